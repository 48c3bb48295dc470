package operations_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/memstore"
)

// plainStore is a store without optional abilities, so StartRun takes its fallback path.
type plainStore struct{ operations.Store }

// starterStore is a memstore, a RunStarter, counting the calls StartRun makes.
type starterStore struct {
	*memstore.Store
	starts, creates atomic.Int32
}

func (s *starterStore) CreateRunWithOperations(ctx context.Context, r operations.Run, ops []operations.Operation) error {
	s.starts.Add(1)
	return s.Store.CreateRunWithOperations(ctx, r, ops)
}

func (s *starterStore) CreateRun(ctx context.Context, r operations.Run) error {
	s.creates.Add(1)
	return s.Store.CreateRun(ctx, r)
}

func mainStarting(ids ...string) func(context.Context) (operations.MainRun, error) {
	return func(context.Context) (operations.MainRun, error) {
		res := operations.MainRun{Warnings: 1}
		for _, id := range ids {
			res.Operations = append(res.Operations, operations.Operation{Action: "p", ID: id})
		}
		return res, nil
	}
}

func TestStartRun(t *testing.T) {
	o := operations.Owner{Kind: phase.Backup, Name: "nightly", UID: "uid-1"}
	for _, tc := range []struct {
		name  string
		store func() operations.Store
	}{
		{"fallback", func() operations.Store { return plainStore{memstore.New()} }},
		{"RunStarter", func() operations.Store { return &starterStore{Store: memstore.New()} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s := tc.store()
			calls := 0
			main := mainStarting("a", "b")
			counted := func(ctx context.Context) (operations.MainRun, error) { calls++; return main(ctx) }

			r, err := operations.StartRun(ctx, s, operations.Run{Owner: o, Created: t0}, counted)
			require.NoError(t, err)
			require.Equal(t, phase.WaitingForPluginOperations, r.Phase)
			require.Equal(t, 1, r.Warnings)
			require.Equal(t, []phase.Phase{phase.InProgress, phase.WaitingForPluginOperations}, historyTo(r))
			stored, err := s.GetRun(ctx, o)
			require.NoError(t, err)
			if diff := cmp.Diff(stored, r); diff != "" {
				t.Errorf("returned run differs from the stored one (-stored +returned):\n%s", diff)
			}
			got, err := s.ListOperations(ctx, o, operations.OperationFilter{})
			require.NoError(t, err)
			want := []operations.Operation{
				{Owner: o, Action: "p", ID: "a", Status: operations.Status{Phase: operations.OperationNew, Created: t0}},
				{Owner: o, Action: "p", ID: "b", Status: operations.Status{Phase: operations.OperationNew, Created: t0}},
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("operations (-want +got):\n%s", diff)
			}

			// A second reconcile finds the run started and does not run the plugins again.
			again, err := operations.StartRun(ctx, s, operations.Run{Owner: o}, counted)
			require.NoError(t, err)
			require.Equal(t, 1, calls)
			if diff := cmp.Diff(r, again); diff != "" {
				t.Errorf("second StartRun (-first +second):\n%s", diff)
			}
			if ss, ok := s.(*starterStore); ok {
				// The run is created before main, so that a second caller cannot run main
				// too; a RunStarter's one write would come after main.
				require.Equal(t, int32(1), ss.creates.Load())
				require.Zero(t, ss.starts.Load(), "StartRun used CreateRunWithOperations")
			}
		})
	}
}

// A main run that fails leaves no run, on every store, so the run is started again;
// the second call records it.
func TestStartRunRetriesAfterFailure(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store operations.Store
	}{
		{"fallback", plainStore{memstore.New()}},
		{"RunStarter", &starterStore{Store: memstore.New()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			o := operations.Owner{Kind: phase.Restore, Name: "r1"}
			boom := errors.New("plugin unreachable")
			_, err := operations.StartRun(ctx, tc.store, operations.Run{Owner: o, Created: t0}, func(context.Context) (operations.MainRun, error) {
				return operations.MainRun{}, boom
			})
			require.ErrorIs(t, err, boom)
			_, err = tc.store.GetRun(ctx, o)
			require.ErrorIs(t, err, operations.ErrNotFound, "the run after its main run failed")

			r, err := operations.StartRun(ctx, tc.store, operations.Run{Owner: o, Created: t0}, mainStarting())
			require.NoError(t, err)
			require.Equal(t, phase.Completed, r.Phase, "a restore with nothing pending ends at once")
			require.Equal(t, []phase.Phase{phase.InProgress, phase.Completed}, historyTo(r))
		})
	}
}

func TestStartRunOutcomes(t *testing.T) {
	tests := []struct {
		name       string
		res        operations.MainRun
		wantPhase  phase.Phase
		wantReason string
		wantErrors int
	}{
		{name: "errors and pending", res: operations.MainRun{Errors: 2, Operations: []operations.Operation{{Action: "p", ID: "x"}}},
			wantPhase: phase.WaitingForPluginOperationsPartiallyFailed, wantErrors: 2},
		{name: "nothing pending", wantPhase: phase.Finalizing},
		{name: "fatal", res: operations.MainRun{Fatal: true, Reason: "no storage location"},
			wantPhase: phase.Failed, wantReason: "no storage location"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := operations.Owner{Kind: phase.Backup, Name: "b"}
			r, err := operations.StartRun(context.Background(), memstore.New(), operations.Run{Owner: o, Created: t0},
				func(context.Context) (operations.MainRun, error) { return tc.res, nil })
			require.NoError(t, err)
			require.Equal(t, tc.wantPhase, r.Phase)
			require.Equal(t, tc.wantReason, r.FailureReason)
			require.Equal(t, tc.wantErrors, r.Errors)
		})
	}
}

// TestStartRunCancelledDuringMainRun requests the cancel of a run while its main run is
// under way (the run is stored before main runs):
// with nothing pending the run ends Failed, with the request's reason; with operations
// pending it waits, so that the Monitor cancels them before it fails the run.
func TestStartRunCancelledDuringMainRun(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ops       []operations.Operation
		wantPhase phase.Phase
		wantWhy   string
	}{
		{"nothing pending", nil, phase.Failed, "stopped by jane"},
		{"operations pending", []operations.Operation{{Action: "p", ID: "x"}}, phase.WaitingForPluginOperations, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s := plainStore{memstore.New()}
			o := operations.Owner{Kind: phase.Restore, Name: "r"}
			r, err := operations.StartRun(ctx, s, operations.Run{Owner: o, Created: t0}, func(ctx context.Context) (operations.MainRun, error) {
				_, err := operations.RequestCancel(ctx, s, o, "stopped by jane", t0)
				return operations.MainRun{Operations: tc.ops}, err
			})
			require.NoError(t, err)
			require.Equal(t, tc.wantPhase, r.Phase)
			require.Equal(t, tc.wantWhy, r.FailureReason)
			require.True(t, r.CancelRequested())
		})
	}
}

func TestStartRunRefuses(t *testing.T) {
	ctx := context.Background()
	main := mainStarting("a")
	o := operations.Owner{Kind: phase.Backup, Name: "b"}
	for _, tc := range []struct {
		name     string
		template operations.Run
		main     func(context.Context) (operations.MainRun, error)
	}{
		{"template not New", operations.Run{Owner: o, Phase: phase.InProgress}, main},
		{"no owner name", operations.Run{Owner: operations.Owner{Kind: phase.Backup}}, main},
		{"empty owner", operations.Run{}, main},
		{"nil main", operations.Run{Owner: o}, nil},
		{"operation of another run", operations.Run{Owner: o}, func(context.Context) (operations.MainRun, error) {
			return operations.MainRun{Operations: []operations.Operation{{Owner: operations.Owner{Kind: phase.Backup, Name: "other"}, Action: "p", ID: "a"}}}, nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := memstore.New()
			_, err := operations.StartRun(ctx, s, tc.template, tc.main)
			require.ErrorIs(t, err, operations.ErrInvalid)
			if tc.template.Owner.Validate() == nil {
				_, err = s.GetRun(ctx, tc.template.Owner)
				require.ErrorIs(t, err, operations.ErrNotFound, "a run left after StartRun refused")
			}
		})
	}
}

// A run of an object deleted and created again under its name is not handed to the new
// object.
func TestStartRunUIDMismatch(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	old := operations.Owner{Kind: phase.Backup, Name: "b", UID: "uid-old"}
	_, err := operations.StartRun(ctx, s, operations.Run{Owner: old}, mainStarting("a"))
	require.NoError(t, err)
	_, err = operations.StartRun(ctx, s, operations.Run{Owner: operations.Owner{Kind: phase.Backup, Name: "b", UID: "uid-new"}}, mainStarting("a"))
	require.ErrorIs(t, err, operations.ErrUIDMismatch)
}

// historyTo returns the phases r's history led to, in order.
func historyTo(r operations.Run) []phase.Phase {
	var out []phase.Phase
	for _, tr := range r.History {
		out = append(out, tr.To)
	}
	return out
}
