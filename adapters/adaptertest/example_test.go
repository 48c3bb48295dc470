package adaptertest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/itemops/itemops/adapters"
	"github.com/itemops/itemops/adapters/adaptertest"
	"github.com/itemops/itemops/clock/clocktest"
)

// A data mover's operations move as its clock does.
func ExampleDataMover() {
	ctx := context.Background()
	clock := clocktest.NewClock(time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC))
	mover := adaptertest.NewDataMover[string, string]("example.io/data-mover", clock, &adaptertest.DataMoverOptions{
		Size: 10 << 30, Rate: 1 << 30, // ten seconds
	})
	action := mover.BackupItemAction()
	_, _, id, _, _ := action.Execute(ctx, nil, "nightly")
	for i := 0; i < 3; i++ {
		p, _ := action.Progress(ctx, id, "nightly")
		fmt.Printf("%s: %d of %d GiB, completed %v\n", id, p.NCompleted>>30, p.NTotal>>30, p.Completed)
		clock.Advance(5 * time.Second)
	}
	// Output:
	// example.io/data-mover/1: 0 of 10 GiB, completed false
	// example.io/data-mover/1: 5 of 10 GiB, completed false
	// example.io/data-mover/1: 10 of 10 GiB, completed true
}

// Running the conformance suite on your own v2 action: New makes a fresh one on a fake
// clock, and the FinishFunc moves that clock past an operation's end.
func ExampleRunBackupItemAction() {
	testYourAction := func(t *testing.T) {
		adaptertest.RunBackupItemAction(t, adaptertest.BackupItemActionHarness[string]{
			New: func(t *testing.T) (adapters.BackupItemAction[string], adaptertest.FinishFunc) {
				clock := clocktest.NewClock(time.Now())
				m := adaptertest.NewDataMover[string, string]("example.io/yours", clock, nil) // your action here
				return m.BackupItemAction(), func(string) { clock.Advance(m.Duration()) }
			},
			Backup: "nightly",
		})
	}
	_ = testYourAction // func TestYourAction(t *testing.T) { ... } in your _test.go file
}
