package operations_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/memstore"
)

// TestStartRunMainRunsOnce starts one owner's run from several goroutines at once, as
// the reconciles of several replicas that share a store do, and holds the main run that
// got in until every other call has returned: main runs once, the other calls return
// the run InProgress without running it, and the run then waits for the one main run's
// operations.
func TestStartRunMainRunsOnce(t *testing.T) {
	const callers = 8
	for _, tc := range []struct {
		name   string
		store  func() operations.Store
		stored phase.Phase // the phase of a run stored before the calls; "" for none
	}{
		{"RunStarter", func() operations.Store { return &starterStore{Store: memstore.New()} }, ""},
		{"fallback", func() operations.Store { return plainStore{memstore.New()} }, ""},
		{"claims", func() operations.Store { return newClaimingStore() }, ""},
		{"run stored New", func() operations.Store { return plainStore{memstore.New()} }, phase.New},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s := tc.store()
			o := operations.Owner{Kind: phase.Backup, Name: "nightly", UID: "uid-1"}
			if tc.stored != "" {
				require.NoError(t, s.CreateRun(ctx, operations.Run{Owner: o, Phase: tc.stored, Created: t0}))
			}
			var calls atomic.Int32
			others := make(chan struct{}) // closed once every call but main's has returned
			main := func(context.Context) (operations.MainRun, error) {
				calls.Add(1)
				select {
				case <-others:
				case <-time.After(10 * time.Second):
					// A guard against hanging: the other calls ran main too and wait here.
				}
				return mainStarting("a", "b")(ctx)
			}
			var (
				wg      sync.WaitGroup
				mu      sync.Mutex
				phases  []phase.Phase // what the calls returned, main's last
				errs    []error
				settled sync.WaitGroup // the calls that do not run main
			)
			settled.Add(callers - 1)
			go func() { settled.Wait(); close(others) }()
			for range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r, err := operations.StartRun(ctx, s, operations.Run{Owner: o, Created: t0}, main)
					mu.Lock()
					phases, errs = append(phases, r.Phase), append(errs, err)
					n := len(phases)
					mu.Unlock()
					if n < callers {
						settled.Done()
					}
				}()
			}
			wg.Wait()
			require.Equal(t, int32(1), calls.Load(), "main runs")
			require.NoError(t, errors.Join(errs...))
			want := make([]phase.Phase, callers)
			for i := range want[:callers-1] {
				want[i] = phase.InProgress
			}
			want[callers-1] = phase.WaitingForPluginOperations
			require.Equal(t, want, phases, "the phases the calls returned, in the order they returned")
			ops, err := s.ListOperations(ctx, o, operations.OperationFilter{})
			require.NoError(t, err)
			require.Len(t, ops, 2)
		})
	}
}

// TestStartRunHoldsClaimDuringMain: on a store with claims, the run's claim is held
// while its main run runs, so that a Monitor tells it from a run whose starter died,
// and given up after.
func TestStartRunHoldsClaimDuringMain(t *testing.T) {
	ctx := context.Background()
	s := newClaimingStore()
	o := operations.Owner{Kind: phase.Restore, Name: "r"}
	r, err := operations.StartRun(ctx, s, operations.Run{Owner: o, Created: t0}, func(context.Context) (operations.MainRun, error) {
		_, ok, err := s.ClaimRun(ctx, o)
		require.NoError(t, err)
		require.False(t, ok, "another holder got the claim of a run whose main run runs")
		return operations.MainRun{Operations: []operations.Operation{{Action: "p", ID: "x"}}}, nil
	})
	require.NoError(t, err)
	require.Equal(t, phase.WaitingForPluginOperations, r.Phase)
	release, ok, err := s.ClaimRun(ctx, o)
	require.NoError(t, err)
	require.True(t, ok, "the claim after StartRun returned")
	release()

	// A claim StartRun cannot get from the store fails it before anything is written.
	s.fail = errors.New("claims unreachable")
	q := operations.Owner{Kind: phase.Restore, Name: "q"}
	_, err = operations.StartRun(ctx, s, operations.Run{Owner: q, Created: t0}, func(context.Context) (operations.MainRun, error) {
		t.Fatal("main ran without knowing the claim")
		return operations.MainRun{}, nil
	})
	require.ErrorIs(t, err, s.fail)
	_, err = s.GetRun(ctx, q)
	require.ErrorIs(t, err, operations.ErrNotFound)
}

// TestStartRunStoredRunFailsWithMain: a run stored before StartRun (New, as a queue
// stores it) cannot go back to New when its main run fails, so it becomes Failed with
// the error, and the next call does not run main again.
func TestStartRunStoredRunFailsWithMain(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	o := operations.Owner{Kind: phase.Backup, Name: "queued"}
	require.NoError(t, s.CreateRun(ctx, operations.Run{Owner: o, Phase: phase.New, Created: t0}))
	boom := errors.New("no storage location")
	_, err := operations.StartRun(ctx, s, operations.Run{Owner: o, Created: t0}, func(context.Context) (operations.MainRun, error) {
		return operations.MainRun{}, boom
	})
	require.ErrorIs(t, err, boom)
	r, err := operations.StartRun(ctx, s, operations.Run{Owner: o, Created: t0}, func(context.Context) (operations.MainRun, error) {
		t.Fatal("main ran again for a failed run")
		return operations.MainRun{}, nil
	})
	require.NoError(t, err)
	require.Equal(t, phase.Failed, r.Phase)
	require.Equal(t, "main run failed: no storage location", r.FailureReason)
}

// claimingStore is a memstore with claims that one holder at a time gets, as the
// replicas of a shared store do. fail, when set, is ClaimRun's error.
type claimingStore struct {
	*memstore.Store
	mu   sync.Mutex
	held map[string]bool
	fail error
}

var _ operations.RunClaimer = (*claimingStore)(nil)

func newClaimingStore() *claimingStore {
	return &claimingStore{Store: memstore.New(), held: map[string]bool{}}
}

func (s *claimingStore) ClaimRun(_ context.Context, o operations.Owner) (func(), bool, error) {
	key := fmt.Sprint(o.Kind, "/", o.Name)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return nil, false, s.fail
	}
	if s.held[key] {
		return nil, false, nil
	}
	s.held[key] = true
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			delete(s.held, key)
		})
	}, true, nil
}

// lostAnswerStore is a memstore whose PutOperations applies the batch and then fails,
// as a write whose answer was lost does.
type lostAnswerStore struct{ *memstore.Store }

var errLostAnswer = errors.New("connection reset: the answer was lost")

func (s lostAnswerStore) PutOperations(ctx context.Context, o operations.Owner, ops []operations.Operation) error {
	if err := s.Store.PutOperations(ctx, o, ops); err != nil {
		return err
	}
	return errLostAnswer
}

// TestStartRunKeepsRunAfterLostWrite: when the write of main's operations fails, it may
// have been applied, so StartRun does not undo the run: the run stays InProgress with
// the operations it recorded, for the restart rules to cancel, and the next call does
// not run main again.
func TestStartRunKeepsRunAfterLostWrite(t *testing.T) {
	ctx := context.Background()
	s := lostAnswerStore{memstore.New()}
	o := operations.Owner{Kind: phase.Backup, Name: "b", UID: "u"}
	var calls atomic.Int32
	main := func(context.Context) (operations.MainRun, error) {
		calls.Add(1)
		return operations.MainRun{Operations: []operations.Operation{{Action: "p", ID: "upload-1"}}}, nil
	}
	_, err := operations.StartRun(ctx, s, operations.Run{Owner: o}, main)
	require.ErrorIs(t, err, errLostAnswer)
	run, err := s.GetRun(ctx, o)
	require.NoError(t, err, "the run whose operations' write lost its answer")
	require.Equal(t, phase.InProgress, run.Phase)
	ops, err := s.ListOperations(ctx, o, operations.OperationFilter{})
	require.NoError(t, err)
	require.Len(t, ops, 1, "the operation main started, recorded by the write")

	again, err := operations.StartRun(ctx, s, operations.Run{Owner: o}, main)
	require.NoError(t, err)
	require.Equal(t, phase.InProgress, again.Phase)
	require.Equal(t, int32(1), calls.Load(), "main runs of the one run")
}
