package phase_test

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/itemops/itemops/phase"
)

// A machine is built from the phase a record was stored with, then moved by events.
func ExampleNewMachine() {
	stored := "WaitingForPluginOperations" // read from a Backup's status, say
	p, err := phase.Parse(stored)
	if err != nil {
		fmt.Println(err)
		return
	}
	m, err := phase.NewMachine(phase.Backup, p)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(m.Phase(), m.Events())
	// Output: WaitingForPluginOperations [wait-partially-failed finalize fail]
}

func ExampleMachine_Fire() {
	ctx := context.Background()
	m, _ := phase.NewMachine(phase.Restore, phase.New)
	for _, e := range []phase.Event{phase.EventStart, phase.EventWait, phase.EventComplete} {
		if err := m.Fire(ctx, e); err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(e, "→", m.Phase())
	}
	// Output:
	// start → InProgress
	// wait → WaitingForPluginOperations
	// complete → Completed
}

// An event the current phase does not accept is refused, and the machine stays where it is.
func ExampleMachine_Fire_invalid() {
	m, _ := phase.NewMachine(phase.Backup, phase.Completed)
	err := m.Fire(context.Background(), phase.EventStart)

	var te *phase.TransitionError
	if errors.As(err, &te) {
		fmt.Println("refused:", te.From, te.Event)
	}
	fmt.Println(errors.Is(err, phase.ErrInvalidTransition), m.Phase())
	fmt.Println(err)
	// Output:
	// refused: Completed start
	// true Completed
	// phase: Backup in Completed cannot take event "start": invalid phase transition
}

// The queue profile adds Queued and ReadyToStart before a backup starts.
func ExampleWithQueue() {
	m, _ := phase.NewMachine(phase.Backup, phase.New, phase.WithQueue())
	fmt.Println(m.Can(phase.EventStart), m.Can(phase.EventQueue))
	// Output: false true
}

func ExampleAfterMainRun() {
	next := phase.AfterMainRun(phase.Backup, phase.Outcome{Errors: 1, Pending: 3})
	fmt.Println(next)
	next = phase.AfterMainRun(phase.Restore, phase.Outcome{})
	fmt.Println(next)
	// Output:
	// WaitingForPluginOperationsPartiallyFailed
	// Completed
}

// After a poll, the rule may skip a step; Path gives the events that get there.
func ExampleAfterPoll() {
	from := phase.WaitingForPluginOperations
	next, _ := phase.AfterPoll(phase.Backup, from, 1, 0) // one new error, nothing pending
	events, _ := phase.Path(phase.Backup, from, next)
	fmt.Println(next, events)
	// Output: FinalizingPartiallyFailed [wait-partially-failed finalize-partially-failed]
}

func ExampleOnRestart() {
	next, reason, changed := phase.OnRestart(phase.Backup, phase.InProgress)
	fmt.Println(next, changed)
	fmt.Println(reason)
	// Output:
	// Failed true
	// found a backup with status "InProgress" during the server starting, mark it as "Failed"
}

func ExampleMermaid() {
	text, _ := phase.Mermaid(phase.Restore)
	fmt.Print(text[:strings.Index(text, "    New -->")])
	// Output:
	// ---
	// title: Restore (default profile)
	// ---
	// stateDiagram-v2
	//     [*] --> New
}
