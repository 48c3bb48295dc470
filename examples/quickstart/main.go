// Command quickstart is the quick start of the README as a whole program: it records a
// backup and the upload its plugin started in a bbolt store, and lets a Monitor poll the
// upload, through the plugin's Tracker, until the backup has ended.
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/boltstore"
)

func main() {
	dir, err := os.MkdirTemp("", "itemops-quickstart-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := quickstart(context.Background(), filepath.Join(dir, "itemops.db"), os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// uploader is a plugin's Tracker: its uploads take 300ms from the time they are recorded.
type uploader struct{}

func (uploader) Progress(ctx context.Context, op operations.Operation) (operations.Progress, error) {
	elapsed := time.Since(op.Status.Created)
	done := min(elapsed.Milliseconds(), 300)
	return operations.Progress{Completed: done == 300, NCompleted: done, NTotal: 300, OperationUnits: "Bytes",
		Started: op.Status.Created, Updated: time.Now()}, ctx.Err()
}

func (uploader) Cancel(ctx context.Context, op operations.Operation) error { return ctx.Err() }

// quickstart runs a backup with one operation to its end in the store file at path, and
// writes the backup's phase history to w.
func quickstart(ctx context.Context, path string, w io.Writer) error {
	ctx, stop := context.WithCancel(ctx) // stops the Monitor on return
	defer stop()
	// quick start: begin
	store, err := boltstore.Open(path, nil) // or memstore.New() in tests
	if err != nil {
		return err
	}
	defer store.Close()
	plugins := operations.ResolverFunc(func(string) (operations.Tracker, error) { return uploader{}, nil }) // or an adapters.Registry
	m := monitor.New(store, plugins, monitor.WithInterval(100*time.Millisecond))
	go m.Run(ctx) // after a restart, call m.Recover first

	// A backup starts, and its plugin starts an upload: record both.
	backup := operations.Owner{Kind: phase.Backup, Name: "nightly"}
	run := operations.Run{Owner: backup, Phase: phase.New, Created: time.Now()}
	_ = run.SetPhase(phase.InProgress, "started", time.Now())
	upload := operations.Operation{Owner: backup, Action: "example.io/uploader", ID: "upload-1",
		Status: operations.Status{Phase: operations.OperationNew, Created: time.Now()}}
	if err := store.CreateRun(ctx, run); err != nil {
		return err
	}
	if err := store.PutOperations(ctx, backup, []operations.Operation{upload}); err != nil {
		return err
	}
	// The main run ends with the upload pending; the Monitor takes the backup to Completed.
	next := phase.AfterMainRun(phase.Backup, phase.Outcome{Pending: 1}) // WaitingForPluginOperations
	_, err = store.UpdateRun(ctx, backup, func(r *operations.Run) error { return r.SetPhase(next, "main run ended", time.Now()) })
	// quick start: end
	if err != nil {
		return err
	}
	for {
		r, err := store.GetRun(ctx, backup)
		if err != nil {
			return err
		}
		if phase.IsTerminal(r.Phase) {
			for _, tr := range r.History {
				fmt.Fprintf(w, "%s → %s (%s)\n", tr.From, tr.To, tr.Reason)
			}
			op, err := store.GetOperation(ctx, backup, "upload-1")
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(w, "%s: %s, %d of %d %s\n", op.ID, op.Status.Phase, op.Status.NCompleted, op.Status.NTotal, op.Status.OperationUnits)
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
