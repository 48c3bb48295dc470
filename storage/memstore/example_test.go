package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/memstore"
)

// A backup's life in the store: created, moved on with its phase machine, its plugin
// operations recorded and finished, and a late writer refused.
func ExampleNew() {
	ctx := context.Background()
	s := memstore.New()
	b := operations.Owner{Kind: phase.Backup, Name: "nightly"}
	at := time.Date(2024, 5, 1, 2, 0, 0, 0, time.UTC)

	if err := s.CreateRun(ctx, operations.Run{Owner: b, Phase: phase.New, Created: at}); err != nil {
		fmt.Println(err)
		return
	}
	// The main run started two operations, then waits for them.
	ops := []operations.Operation{
		{Owner: b, Action: "example.io/snapshotter", ID: "snap-1", Status: operations.Status{Phase: operations.OperationInProgress, Created: at}},
		{Owner: b, Action: "example.io/snapshotter", ID: "snap-2", Status: operations.Status{Phase: operations.OperationNew, Created: at}},
	}
	if err := s.PutOperations(ctx, b, ops); err != nil {
		fmt.Println(err)
		return
	}
	if _, err := s.UpdateRun(ctx, b, func(r *operations.Run) error {
		return r.SetPhase(phase.WaitingForPluginOperations, "2 operations pending", at.Add(time.Minute))
	}); err != nil {
		fmt.Println(err)
		return
	}

	// A poll finds snap-1 done.
	ops[0].Status.Phase = operations.OperationCompleted
	if err := s.PutOperations(ctx, b, ops[:1]); err != nil {
		fmt.Println(err)
		return
	}
	pending, _ := s.ListOperations(ctx, b, operations.OperationFilter{
		Phases: []operations.OperationPhase{operations.OperationNew, operations.OperationInProgress},
	})
	for _, op := range pending {
		fmt.Println("pending:", op.ID, op.Status.Phase)
	}
	waiting, _ := s.ListRuns(ctx, operations.RunFilter{Phases: []phase.Phase{phase.WaitingForPluginOperations}})
	for _, r := range waiting {
		fmt.Println("waiting:", r.Owner)
	}

	// A late writer cannot revive a finished operation.
	ops[0].Status.Phase = operations.OperationInProgress
	err := s.PutOperations(ctx, b, ops[:1])
	fmt.Println("revive snap-1:", errors.Is(err, operations.ErrConflict))
	// Output:
	// pending: snap-2 New
	// waiting: Backup/nightly
	// revive snap-1: true
}
