package monitor_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/operations/operationstest"
	"github.com/itemops/itemops/phase"
)

// inProgress stores the run of o InProgress, with one unfinished operation, as a
// StartRun whose process died between its two writes leaves it.
func inProgress(t *testing.T, s operations.Store, o operations.Owner) {
	t.Helper()
	ctx := context.Background()
	r := operations.Run{Owner: o, Phase: phase.New, Created: t0}
	require.NoError(t, r.SetPhase(phase.InProgress, "main run started", t0))
	require.NoError(t, s.CreateRun(ctx, r))
	require.NoError(t, s.PutOperations(ctx, o, []operations.Operation{{Owner: o, Action: "p", ID: "x",
		Status: operations.Status{Phase: operations.OperationNew, Created: t0}}}))
}

// TestRecoverAsksForTheClaim: on a store with claims, Recover fails an InProgress run
// whose claim it gets (its starter died), cancelling its operation, and leaves alone
// one whose claim another holder has (a main run under way in another replica).
func TestRecoverAsksForTheClaim(t *testing.T) {
	ctx := context.Background()
	s := newClaimingStore()
	dead := operations.Owner{Kind: phase.Backup, Name: "dead"}
	live := operations.Owner{Kind: phase.Backup, Name: "live"}
	inProgress(t, s, dead)
	inProgress(t, s, live)
	s.hold(live)
	var cancels atomic.Int32
	tracker := &operationstest.Tracker{CancelFunc: func(context.Context, operations.Operation) error { cancels.Add(1); return nil }}
	m := monitor.New(s, operationstest.Resolver(map[string]operations.Tracker{"p": tracker}))

	res, err := m.Recover(ctx)
	require.NoError(t, err)
	require.Equal(t, []operations.Owner{dead}, res.Failed)
	require.Equal(t, int32(1), cancels.Load(), "Cancel calls")
	r, err := s.GetRun(ctx, live)
	require.NoError(t, err)
	require.Equal(t, phase.InProgress, r.Phase, "the run whose claim another holder has")
	require.Empty(t, s.holder(dead), "Recover kept the claim of the run it failed")

	s.err = errors.New("claims unreachable")
	_, err = m.Recover(ctx)
	require.ErrorIs(t, err, s.err, "Recover that cannot tell who holds an InProgress run's claim")
}

// TestStartRunFailsARunWhoseStarterDied: on a store with claims, StartRun that finds
// the run InProgress returns it as it is while another holder has its claim (a main
// run under way), and fails it, as Recover would, once the claim is free (the process
// that ran main died); main is never run.
func TestStartRunFailsARunWhoseStarterDied(t *testing.T) {
	ctx := context.Background()
	s := newClaimingStore()
	o := operations.Owner{Kind: phase.Restore, Name: "r"}
	inProgress(t, s, o)
	s.hold(o)
	m := monitor.New(s, operationstest.Resolver(map[string]operations.Tracker{"p": &operationstest.Tracker{}}))
	main := func(context.Context) (operations.MainRun, error) {
		t.Fatal("main ran for a run already InProgress")
		return operations.MainRun{}, nil
	}
	r, err := m.StartRun(ctx, operations.Run{Owner: o}, main)
	require.NoError(t, err)
	require.Equal(t, phase.InProgress, r.Phase, "the run while its starter holds the claim")

	s.mu.Lock()
	delete(s.holders, o) // the starter's claim ends with its process
	s.mu.Unlock()
	r, err = m.StartRun(ctx, operations.Run{Owner: o}, main)
	require.NoError(t, err)
	require.Equal(t, phase.Failed, r.Phase, "the run once its starter's claim ended")
	_, want, _ := phase.OnRestart(phase.Restore, phase.InProgress, phase.Profile{})
	require.Equal(t, want, r.FailureReason)
	got, err := operationstest.OperationPhases(ctx, s, o)
	require.NoError(t, err)
	require.Equal(t, map[string]operations.OperationPhase{"x": operations.OperationFailed}, got)
}

// TestStartRunWaitsForTheClaimOfAnotherStarter: on a store with claims, StartRun that
// finds the claim of a run not yet stored held by another caller (starting it, say in
// another replica) neither writes the run nor runs main: it waits. It returns the run
// once the other caller has made it InProgress, leaving it alone; and when the claim is
// given up with no run written, it takes the claim and runs main itself. A caller that
// wrote the run InProgress without the claim could see a Monitor take the free claim
// and fail the run while its main ran.
func TestStartRunWaitsForTheClaimOfAnotherStarter(t *testing.T) {
	ctx := context.Background()
	var calls atomic.Int32
	main := func(context.Context) (operations.MainRun, error) {
		calls.Add(1)
		return operations.MainRun{Operations: []operations.Operation{{Action: "p", ID: "x"}}}, nil
	}
	start := func(s *claimingStore, o operations.Owner) <-chan operations.Run {
		done := make(chan operations.Run, 1)
		m := monitor.New(s, operationstest.Resolver(nil))
		go func() {
			r, err := m.StartRun(ctx, operations.Run{Owner: o, Created: t0}, main)
			if err != nil {
				t.Errorf("StartRun: %v", err)
			}
			done <- r
		}()
		// It asked for the claim, found it held, read the run, and asked again.
		require.Eventually(t, func() bool { return s.refusals() >= 2 }, 10*time.Second, time.Millisecond)
		return done
	}

	t.Run("the other caller starts the run", func(t *testing.T) {
		s := newClaimingStore()
		o := operations.Owner{Kind: phase.Backup, Name: "b", UID: "uid-b"}
		s.hold(o)
		done := start(s, o)
		require.Equal(t, int32(0), calls.Load(), "main ran while another caller held the claim")
		inProgress(t, s, o) // the other caller's write
		r := <-done
		require.Equal(t, phase.InProgress, r.Phase, "the run the other caller started")
		require.Equal(t, int32(0), calls.Load(), "main runs")
		stored, err := s.GetRun(ctx, o)
		require.NoError(t, err)
		require.Equal(t, phase.InProgress, stored.Phase, "the run as stored: its main runs under the other caller's claim")
	})
	t.Run("the other caller gives up", func(t *testing.T) {
		s := newClaimingStore()
		o := operations.Owner{Kind: phase.Backup, Name: "c", UID: "uid-c"}
		s.hold(o)
		done := start(s, o)
		s.mu.Lock()
		delete(s.holders, operations.Owner{Kind: o.Kind, Name: o.Name}) // the store keys claims by kind and name
		s.mu.Unlock()
		r := <-done
		require.Equal(t, phase.WaitingForPluginOperations, r.Phase)
		require.Equal(t, int32(1), calls.Load(), "main runs")
		require.Empty(t, s.holder(o), "a claim left after the main run")
	})
}

// TestStartRunMainRunsOnce: StartRun of one run from several goroutines at once, on
// Monitors of one store (the replicas of an operator), runs main once; the Monitor
// whose call ran it is woken, the others return the run InProgress.
func TestStartRunMainRunsOnce(t *testing.T) {
	const callers = 6
	ctx := context.Background()
	s := newClaimingStore()
	o := operations.Owner{Kind: phase.Backup, Name: "b", UID: "uid-b"}
	var calls atomic.Int32
	others := make(chan struct{})
	var settled, wg sync.WaitGroup
	settled.Add(callers - 1)
	go func() { settled.Wait(); close(others) }()
	main := func(context.Context) (operations.MainRun, error) {
		calls.Add(1)
		select {
		case <-others:
		case <-time.After(10 * time.Second): // a guard against hanging when main runs twice
		}
		return operations.MainRun{Operations: []operations.Operation{{Action: "p", ID: "x"}}}, nil
	}
	var mu sync.Mutex
	phases := map[phase.Phase]int{}
	var errs []error
	for range callers {
		m := monitor.New(s, operationstest.Resolver(nil))
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := m.StartRun(ctx, operations.Run{Owner: o, Created: t0}, main)
			mu.Lock()
			defer mu.Unlock()
			errs = append(errs, err)
			phases[r.Phase]++
			if r.Phase == phase.InProgress {
				settled.Done()
			}
		}()
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	require.Equal(t, int32(1), calls.Load(), "main runs")
	require.Equal(t, map[phase.Phase]int{phase.InProgress: callers - 1, phase.WaitingForPluginOperations: 1}, phases)
	require.Empty(t, s.holder(o), "a claim left after the main run")
}
