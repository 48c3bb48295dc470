package boltstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/boltstore"
)

func Example() {
	dir, err := os.MkdirTemp("", "boltstore-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()

	s, err := boltstore.Open(filepath.Join(dir, "store.db"), nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()

	owner := operations.Owner{Kind: phase.Backup, Name: "backup-1"}
	if err := s.CreateRun(ctx, operations.Run{Owner: owner, Phase: phase.New}); err != nil {
		fmt.Println(err)
		return
	}
	created := time.Date(2022, 12, 14, 12, 0, 0, 0, time.UTC)
	err = s.PutOperations(ctx, owner, []operations.Operation{
		{Owner: owner, Action: "velero.io/csi-pvc-backupper", ID: "op-1", Status: operations.Status{Phase: operations.OperationInProgress, Created: created}},
		{Owner: owner, Action: "velero.io/csi-pvc-backupper", ID: "op-2", Status: operations.Status{Phase: operations.OperationCompleted, Created: created}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	pending, err := s.ListOperations(ctx, owner, operations.OperationFilter{
		Phases: []operations.OperationPhase{operations.OperationNew, operations.OperationInProgress},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, op := range pending {
		fmt.Println(op.ID, op.Status.Phase)
	}
	// Output:
	// op-1 InProgress
}

func ExampleOpen_locked() {
	dir, err := os.MkdirTemp("", "boltstore-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "store.db")

	first, err := boltstore.Open(path, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer first.Close()

	// A second Open of the same file waits at most Timeout, then gives up.
	_, err = boltstore.Open(path, &boltstore.Options{Timeout: 10 * time.Millisecond})
	fmt.Println(errors.Is(err, boltstore.ErrLocked))
	// Output:
	// true
}
