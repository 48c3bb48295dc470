package memstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// checkIndexes verifies what the indexes promise: every run is in the one phase set of
// its kind and phase, no set is empty, and each run's unfinished positions are ascending,
// cover every unfinished operation, and are at most about twice as many.
func checkIndexes(s *Store) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	indexed := 0
	for pk, set := range s.byPhase {
		if len(set) == 0 {
			return fmt.Errorf("empty phase set %v kept", pk)
		}
		for name, e := range set {
			if s.runs[key{pk.kind, name}] != e {
				return fmt.Errorf("phase set %v holds %s, which is not stored", pk, name)
			}
			if pk != (phaseKey{e.run.Owner.Kind, e.run.Phase}) {
				return fmt.Errorf("run %s in %s is in phase set %v", e.run.Owner, e.run.Phase, pk)
			}
			indexed++
		}
	}
	if indexed != len(s.runs) {
		return fmt.Errorf("%d runs in the phase index, %d stored", indexed, len(s.runs))
	}
	for k, e := range s.runs {
		if len(e.index) != len(e.ops) {
			return fmt.Errorf("%v: %d IDs indexed, %d operations", k, len(e.index), len(e.ops))
		}
		var want, live []int
		for i, op := range e.ops {
			if e.index[op.ID] != i {
				return fmt.Errorf("%v: %q indexed at %d, stored at %d", k, op.ID, e.index[op.ID], i)
			}
			if !op.Status.Phase.Finished() {
				want = append(want, i)
			}
		}
		for j, i := range e.unfinished {
			if j > 0 && e.unfinished[j-1] >= i {
				return fmt.Errorf("%v: unfinished positions not strictly ascending: %v", k, e.unfinished)
			}
			if !e.ops[i].Status.Phase.Finished() {
				live = append(live, i)
			}
		}
		if !slices.Equal(want, live) || e.nUnfinished != len(want) {
			return fmt.Errorf("%v: unfinished operations at %v, index has %v (count %d)", k, want, live, e.nUnfinished)
		}
		if len(e.unfinished) > 2*e.nUnfinished+32 {
			return fmt.Errorf("%v: %d positions kept for %d unfinished operations", k, len(e.unfinished), e.nUnfinished)
		}
	}
	return nil
}

// TestIndexesRandomWalk drives a store through random creates, phase changes, deletes and
// batches, checking the indexes after every step.
func TestIndexesRandomWalk(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	s := New()
	owners := make([]operations.Owner, 12)
	for i := range owners {
		kind := phase.Backup
		if i%2 == 1 {
			kind = phase.Restore
		}
		owners[i] = operations.Owner{Kind: kind, Name: fmt.Sprintf("run-%d", i/2)}
	}
	opPhases := []operations.OperationPhase{operations.OperationNew, operations.OperationInProgress, operations.OperationCompleted, operations.OperationFailed}
	const steps = 2000
	succeeded := 0
	for step := range steps {
		o := owners[rng.IntN(len(owners))]
		var err error // refusals are expected; what matters is that the indexes survive them
		switch n := rng.IntN(20); {
		case n == 0:
			err = s.DeleteRun(ctx, o)
		case n <= 2:
			err = s.CreateRun(ctx, operations.Run{Owner: o, Phase: phase.New})
		case n <= 6:
			to := phase.Phases()[rng.IntN(len(phase.Phases()))]
			_, err = s.UpdateRun(ctx, o, func(r *operations.Run) error { return r.SetPhase(to, "", r.Updated) })
		default:
			// Distinct IDs from a pool small enough that batches replace as often as
			// they insert, and large enough for a run to outgrow the compaction slack.
			batch := make([]operations.Operation, rng.IntN(40))
			for i, id := range rng.Perm(400)[:len(batch)] {
				batch[i] = operations.Operation{Owner: o, ID: fmt.Sprint("op-", id), Status: operations.Status{Phase: opPhases[rng.IntN(len(opPhases))]}}
			}
			err = s.PutOperations(ctx, o, batch)
		}
		if err == nil {
			succeeded++
		}
		if ierr := checkIndexes(s); ierr != nil {
			t.Fatalf("step %d (the call returned %v): %v", step, err, ierr)
		}
	}
	// The walk must have exercised what it is meant to.
	s.mu.RLock()
	defer s.mu.RUnlock()
	var ops, finished, phases int
	for _, e := range s.runs {
		ops += len(e.ops)
		finished += len(e.ops) - e.nUnfinished
	}
	phases = len(s.byPhase)
	require.Greater(t, ops, 500, "operations stored")
	require.Greater(t, finished, 100, "finished operations")
	require.Greater(t, phases, 2, "phase sets")
	require.Greater(t, succeeded, steps/4, "calls that succeeded")
	require.Less(t, succeeded, steps-steps/10, "calls that were refused")
}

// TestUnfinishedListVisitsLittle checks the cost promise directly: after most of a run's
// operations finish, listing the unfinished ones visits about as many positions as it
// returns.
func TestUnfinishedListVisitsLittle(t *testing.T) {
	ctx := context.Background()
	s := New()
	o := operations.Owner{Kind: phase.Backup, Name: "b"}
	require.NoError(t, s.CreateRun(ctx, operations.Run{Owner: o, Phase: phase.New}))
	const n = 10_000
	ops := make([]operations.Operation, n)
	for i := range ops {
		ops[i] = operations.Operation{Owner: o, ID: fmt.Sprintf("op-%05d", i), Status: operations.Status{Phase: operations.OperationInProgress}}
	}
	require.NoError(t, s.PutOperations(ctx, o, ops))
	// Finish all but every hundredth, one at a time, as a Monitor pass would over time.
	for i := range ops {
		if i%100 == 0 {
			continue
		}
		ops[i].Status.Phase = operations.OperationCompleted
		require.NoError(t, s.PutOperations(ctx, o, ops[i:i+1]))
	}
	e := s.runs[key{o.Kind, o.Name}]
	require.Equal(t, n/100, e.nUnfinished)
	require.LessOrEqual(t, len(e.unfinished), 2*e.nUnfinished+32, "positions visited by an unfinished listing")
	got, err := s.ListOperations(ctx, o, operations.OperationFilter{Phases: []operations.OperationPhase{operations.OperationNew, operations.OperationInProgress}})
	require.NoError(t, err)
	require.Len(t, got, n/100)
	for k, op := range got {
		require.Equal(t, fmt.Sprintf("op-%05d", 100*k), op.ID)
	}
}
