package monitor_test

import (
	"context"
	"fmt"
	"time"

	"github.com/itemops/itemops/clock/clocktest"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/operations/operationstest"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/memstore"
)

// A Monitor wired to a memstore and a fake data mover: the backup's main run left one
// upload running; one poll finds it finished and moves the backup on.
func ExampleMonitor_Poll() {
	ctx := context.Background()
	now := time.Date(2022, 12, 14, 12, 0, 0, 0, time.UTC)
	store := memstore.New()

	owner := operations.Owner{Kind: phase.Backup, Name: "nightly", UID: "f8c72709"}
	run := operations.Run{Owner: owner, Phase: phase.New, Created: now}
	_ = run.SetPhase(phase.InProgress, "started", now)
	_ = store.CreateRun(ctx, run)
	_ = store.PutOperations(ctx, owner, []operations.Operation{{
		Owner:    owner,
		Action:   "example.io/data-mover",
		Resource: operations.ResourceIdentifier{Resource: "persistentvolumeclaims", Namespace: "app", Name: "data-0"},
		ID:       "upload-1",
		Status:   operations.Status{Phase: operations.OperationInProgress, Created: now},
	}})
	next := phase.AfterMainRun(phase.Backup, phase.Outcome{Pending: 1})
	_, _ = store.UpdateRun(ctx, owner, func(r *operations.Run) error {
		return r.SetPhase(next, "main run ended", now)
	})

	mover := &operationstest.Tracker{
		ProgressFunc: func(ctx context.Context, op operations.Operation) (operations.Progress, error) {
			return operations.Progress{Completed: true, NCompleted: 5 << 30, NTotal: 5 << 30, OperationUnits: "Bytes"}, nil
		},
	}
	resolver := operationstest.Resolver(map[string]operations.Tracker{"example.io/data-mover": mover})
	m := monitor.New(store, resolver, monitor.WithClock(clocktest.NewClock(now.Add(time.Minute))))

	res, err := m.Poll(ctx, owner)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s: %d completed, %d running\n", res.Phase, res.Completed, res.Running)
	op, _ := store.GetOperation(ctx, owner, "upload-1")
	fmt.Println(op.Status.Phase, op.Status.NCompleted, op.Status.OperationUnits)
	// Output:
	// Finalizing: 1 completed, 0 running
	// Completed 5368709120 Bytes
}

// A test drives a backup to Completed with a fake clock: StartRun records the upload the
// plugin started, and each RunOnce is one pass of the Monitor, with no real waiting.
func ExampleMonitor_RunOnce() {
	ctx := context.Background()
	clock := clocktest.NewClock(time.Date(2022, 12, 14, 12, 0, 0, 0, time.UTC))
	store := memstore.New()
	uploadDone := clock.Now().Add(10 * time.Minute)
	mover := &operationstest.Tracker{
		ProgressFunc: func(ctx context.Context, op operations.Operation) (operations.Progress, error) {
			return operations.Progress{Completed: !clock.Now().Before(uploadDone)}, nil
		},
	}
	m := monitor.New(store, operationstest.Resolver(map[string]operations.Tracker{"example.io/data-mover": mover}),
		monitor.WithClock(clock))

	owner := operations.Owner{Kind: phase.Backup, Name: "nightly"}
	run, _ := operations.StartRun(ctx, store, operations.Run{Owner: owner, Created: clock.Now()},
		func(ctx context.Context) (operations.MainRun, error) {
			return operations.MainRun{Operations: []operations.Operation{{Action: "example.io/data-mover", ID: "upload-1"}}}, nil
		})
	fmt.Println(run.Phase)
	for range 2 {
		_, _ = m.RunOnce(ctx)
		run, _ = store.GetRun(ctx, owner)
		fmt.Println(run.Phase)
		clock.Advance(10 * time.Minute)
	}
	// Output:
	// WaitingForPluginOperations
	// WaitingForPluginOperations
	// Completed
}

// A program that schedules the Monitor's passes itself calls RunOnce in a loop. Given
// WithKeptClaims, a Monitor on a store that replicas share (storage/etcdstore,
// storage/kubestore; a memstore here, which keeps no claims) keeps its claims from one
// pass to the next, as Run does, and Close gives them up once the loop is over.
func ExampleWithKeptClaims() {
	const interval = 10 * time.Second
	var store operations.Store = memstore.New()
	resolver := operationstest.Resolver(map[string]operations.Tracker{})
	m := monitor.New(store, resolver, monitor.WithKeptClaims(), monitor.WithInterval(interval))
	defer m.Close()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for ctx.Err() == nil {
		if _, err := m.RunOnce(ctx); err != nil && ctx.Err() == nil {
			fmt.Println("pass:", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(interval):
		}
	}
}
