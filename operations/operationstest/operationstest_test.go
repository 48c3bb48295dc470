package operationstest_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/adapters"
	"github.com/itemops/itemops/adapters/adaptertest"
	"github.com/itemops/itemops/clock/clocktest"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/operations/operationstest"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/memstore"
)

func TestTracker(t *testing.T) {
	var zero operationstest.Tracker
	p, err := zero.Progress(context.Background(), operations.Operation{ID: "a"})
	require.NoError(t, err)
	require.Equal(t, operations.Progress{}, p, "unset: still running, no progress")
	require.NoError(t, zero.Cancel(context.Background(), operations.Operation{ID: "a"}))
	require.Equal(t, 1, zero.ProgressCalls("a"))
	require.Equal(t, 1, zero.CancelCalls("a"))
	require.Zero(t, zero.ProgressCalls("b"))

	boom := errors.New("boom")
	tr := &operationstest.Tracker{
		ProgressFunc: func(ctx context.Context, op operations.Operation) (operations.Progress, error) {
			return operations.Progress{Completed: true, Description: op.ID}, nil
		},
		CancelFunc: func(ctx context.Context, op operations.Operation) error { return boom },
	}
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := tr.Progress(context.Background(), operations.Operation{ID: "x"})
			require.NoError(t, err)
			require.Equal(t, "x", p.Description)
			require.ErrorIs(t, tr.Cancel(context.Background(), operations.Operation{ID: "x"}), boom)
		}()
	}
	wg.Wait()
	require.Equal(t, 50, tr.ProgressCalls("x"))
	require.Equal(t, 50, tr.CancelCalls("x"))
}

func TestResolver(t *testing.T) {
	tr := &operationstest.Tracker{}
	r := operationstest.Resolver(map[string]operations.Tracker{"velero.io/mover": tr})
	got, err := r.Resolve("velero.io/mover")
	require.NoError(t, err)
	require.Same(t, tr, got)
	_, err = r.Resolve("velero.io/other")
	require.ErrorContains(t, err, `no plugin registered as "velero.io/other"`)
}

// A Counter counts what a Monitor asks of the plugins of a real Registry.
func TestCounter(t *testing.T) {
	ctx := context.Background()
	clock := clocktest.NewClock(t0)
	mover := adaptertest.NewDataMover[struct{}, struct{}]("example.io/mover", clock, nil)
	reg := adapters.NewRegistry[struct{}, struct{}](nil, nil)
	if err := reg.RegisterBackupItemAction(mover.BackupItemAction()); err != nil {
		t.Fatalf("RegisterBackupItemAction returned the error %q, want none", err)
	}
	counter := &operationstest.Counter{Resolver: reg}

	s := memstore.New()
	o := operations.Owner{Kind: phase.Backup, Name: "nightly"}
	_, err := operations.StartRun(ctx, s, operations.Run{Owner: o, Created: t0}, func(context.Context) (operations.MainRun, error) {
		return operations.MainRun{Operations: []operations.Operation{{Action: mover.Name(), ID: mover.Start()}}}, nil
	})
	if err != nil {
		t.Fatalf("StartRun(%s) returned the error %q, want none", o, err)
	}
	id := mover.Name() + "/1"
	m := monitor.New(s, counter, monitor.WithClock(clock))
	for range 2 {
		if _, err := m.RunOnce(ctx); err != nil {
			t.Fatalf("RunOnce returned the error %q, want none", err)
		}
	}
	clock.AdvanceTo(t0.Add(mover.Duration()))
	if _, err := m.RunOnce(ctx); err != nil {
		t.Fatalf("RunOnce returned the error %q, want none", err)
	}
	if _, err := m.RunOnce(ctx); err != nil { // the run has ended: no more calls
		t.Fatalf("RunOnce returned the error %q, want none", err)
	}
	got := []int{counter.ProgressCalls(id), counter.CancelCalls(id)}
	if diff := cmp.Diff([]int{3, 0}, got); diff != "" {
		t.Errorf("Progress and Cancel calls of %s through the Counter (-want +got):\n%s", id, diff)
	}
	phases, err := operationstest.OperationPhases(ctx, s, o)
	if err != nil {
		t.Fatalf("OperationPhases(%s) returned the error %q, want none", o, err)
	}
	if diff := cmp.Diff(map[string]operations.OperationPhase{id: operations.OperationCompleted}, phases); diff != "" {
		t.Errorf("OperationPhases(%s) (-want +got):\n%s", o, diff)
	}

	tr, err := counter.Resolve(mover.Name())
	if err != nil {
		t.Fatalf("Resolve(%q) returned the error %q, want none", mover.Name(), err)
	}
	if err := tr.Cancel(ctx, operations.Operation{Owner: o, Action: mover.Name(), ID: id}); err != nil {
		t.Fatalf("Cancel(%s) returned the error %q, want none", id, err)
	}
	if n := counter.CancelCalls(id); n != 1 {
		t.Errorf("CancelCalls(%q) = %d after one Cancel, want 1", id, n)
	}
	if _, err := counter.Resolve("example.io/unknown"); err == nil {
		t.Error(`Resolve("example.io/unknown") returned no error, want the Registry's`)
	}
	var empty operationstest.Counter
	if _, err := empty.Resolve(mover.Name()); err == nil {
		t.Errorf("Resolve(%q) of a Counter without a Resolver returned no error, want one", mover.Name())
	}
}

// Counts read while calls are counted, from the first call on, race with nothing (run
// with -race: readers spin while the first calls are counted).
func TestCountsWhileCalled(t *testing.T) {
	for range 20 {
		tr := &operationstest.Tracker{}
		var stop atomic.Bool
		var readers sync.WaitGroup
		for range 4 {
			readers.Add(1)
			go func() {
				defer readers.Done()
				for !stop.Load() {
					tr.CancelCalls("a")
					tr.ProgressCalls("a")
				}
			}()
		}
		_ = tr.Cancel(context.Background(), operations.Operation{ID: "a"})
		_, _ = tr.Progress(context.Background(), operations.Operation{ID: "a"})
		stop.Store(true)
		readers.Wait()
		if got := []int{tr.ProgressCalls("a"), tr.CancelCalls("a")}; got[0] != 1 || got[1] != 1 {
			t.Fatalf("ProgressCalls, CancelCalls = %v after one call of each, want 1, 1", got)
		}
	}
}
