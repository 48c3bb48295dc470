package operationstest

import (
	"context"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// RunPhases returns the phases r went through, read from its History: the phase its
// first entry left, then the phase each entry that changed the phase led to. A run
// without history gives its current phase alone. Compare it with go-cmp:
//
//	want := []phase.Phase{phase.New, phase.InProgress, phase.WaitingForPluginOperations, phase.Finalizing, phase.Completed}
//	if diff := cmp.Diff(want, operationstest.RunPhases(run)); diff != "" { ... }
//
// (phase.Path gives the shortest route between two phases, not the route a run took.)
func RunPhases(r operations.Run) []phase.Phase {
	if len(r.History) == 0 {
		return []phase.Phase{r.Phase}
	}
	out := []phase.Phase{r.History[0].From}
	for _, tr := range r.History {
		if tr.To != out[len(out)-1] {
			out = append(out, tr.To)
		}
	}
	return out
}

// RunEvents returns the event of each entry of r's History, in order, with the entries
// that change no phase (operations.EventCancelRequested) included; nil for a run without
// history.
func RunEvents(r operations.Run) []phase.Event {
	var out []phase.Event
	for _, tr := range r.History {
		out = append(out, tr.Event)
	}
	return out
}

// OperationPhases returns the phase of each operation of the run of o, by operation ID,
// as ListOperations reads them: a map a test compares with go-cmp. It fails as
// ListOperations does (operations.ErrNotFound for a missing run, ctx.Err()).
func OperationPhases(ctx context.Context, s operations.Store, o operations.Owner) (map[string]operations.OperationPhase, error) {
	ops, err := s.ListOperations(ctx, o, operations.OperationFilter{})
	if err != nil {
		return nil, err
	}
	out := make(map[string]operations.OperationPhase, len(ops))
	for _, op := range ops {
		out[op.ID] = op.Status.Phase
	}
	return out, nil
}
