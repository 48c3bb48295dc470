package operations_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// SetPhase records every step of the way from the current phase to the one asked for.
func ExampleRun_SetPhase() {
	r := operations.Run{
		Owner: operations.Owner{Kind: phase.Backup, Name: "nightly"},
		Phase: phase.New,
	}
	at := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	if err := r.SetPhase(phase.InProgress, "picked up", at); err != nil {
		fmt.Println(err)
		return
	}
	// A backup that ends with nothing pending goes through Finalizing to Completed.
	if err := r.SetPhase(phase.Completed, "all items backed up", at.Add(time.Minute)); err != nil {
		fmt.Println(err)
		return
	}
	for _, h := range r.History {
		fmt.Printf("%s %s → %s (%s): %s\n", h.Time.Format("15:04"), h.From, h.To, h.Event, h.Reason)
	}
	fmt.Println("started", r.Started.Format("15:04"), "completed", r.Completed.Format("15:04"))
	// Output:
	// 12:00 New → InProgress (start): picked up
	// 12:01 InProgress → Finalizing (finalize): all items backed up
	// 12:01 Finalizing → Completed (complete): all items backed up
	// started 12:00 completed 12:01
}

// A terminal run cannot move back; SetPhase refuses and leaves the run as it was.
func ExampleRun_SetPhase_terminal() {
	r := operations.Run{
		Owner: operations.Owner{Kind: phase.Restore, Name: "r1"},
		Phase: phase.Completed,
	}
	err := r.SetPhase(phase.InProgress, "late writer", time.Now())
	fmt.Println(errors.Is(err, phase.ErrInvalidTransition))
	fmt.Println(r.Phase, len(r.History))
	// Output:
	// true
	// Completed 0
}
