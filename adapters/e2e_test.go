package adapters_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/itemops/itemops/adapters"
	"github.com/itemops/itemops/adapters/adaptertest"
	"github.com/itemops/itemops/clock/clocktest"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/memstore"
)

// item is an item of a backup or restore with its resource.
type item struct {
	gr  schema.GroupResource
	obj *unstructured.Unstructured
}

func resourceOf(it item) operations.ResourceIdentifier {
	return operations.ResourceIdentifier{Group: it.gr.Group, Resource: it.gr.Resource, Namespace: it.obj.GetNamespace(), Name: it.obj.GetName()}
}

// host is the part of a backup or restore controller the end-to-end tests need: a
// store, a clock and a registry.
type host struct {
	t     *testing.T
	store *memstore.Store
	clock *clocktest.Clock
	reg   *registry

	askedMu sync.Mutex         // guards asked: the Monitor polls operations at once
	asked   []operations.Owner // the owners the lookups were asked about
}

func (h *host) ask(o operations.Owner) {
	h.askedMu.Lock()
	defer h.askedMu.Unlock()
	h.asked = append(h.asked, o)
}

func newHost(t *testing.T) *host {
	h := &host{t: t, store: memstore.New(), clock: clocktest.NewClock(t0)}
	h.reg = adapters.NewRegistry(
		func(ctx context.Context, o operations.Owner) (*backup, error) {
			h.ask(o)
			if _, err := h.store.GetRun(ctx, o); err != nil {
				return nil, err
			}
			return &backup{Name: o.Name}, nil
		},
		func(ctx context.Context, o operations.Owner) (*restore, error) {
			h.ask(o)
			return &restore{Name: o.Name}, nil
		})
	return h
}

// mainRun does what a controller's main run does: it runs the actions that apply to
// each item, records the operations they start, and moves the run to its next phase.
func (h *host) mainRun(o operations.Owner, timeout time.Duration, items ...item) []operations.Operation {
	h.t.Helper()
	ctx := context.Background()
	now := h.clock.Now()
	r := operations.Run{Owner: o, Phase: phase.New, Created: now, OperationTimeout: timeout}
	require.NoError(h.t, r.SetPhase(phase.InProgress, "started", now))
	require.NoError(h.t, h.store.CreateRun(ctx, r))
	var ops []operations.Operation
	record := func(action, id string, it item, post []operations.ResourceIdentifier) {
		if id == "" {
			return
		}
		ops = append(ops, operations.Operation{
			Owner: o, Action: action, Resource: resourceOf(it), ID: id, PostOperationItems: post,
			Status: operations.Status{Phase: operations.OperationNew, Created: now},
		})
	}
	for _, it := range items {
		switch o.Kind {
		case phase.Backup:
			actions, err := h.reg.BackupItemActionsFor(ctx, it.gr, it.obj)
			require.NoError(h.t, err)
			for _, a := range actions {
				_, _, id, post, err := a.Execute(ctx, it.obj, &backup{Name: o.Name})
				require.NoError(h.t, err)
				record(a.Name(), id, it, post)
			}
		case phase.Restore:
			actions, err := h.reg.RestoreItemActionsFor(ctx, it.gr, it.obj)
			require.NoError(h.t, err)
			for _, a := range actions {
				out, err := a.Execute(ctx, adapters.RestoreItemActionInput[*restore]{Item: it.obj, ItemFromBackup: it.obj, Restore: &restore{Name: o.Name}})
				require.NoError(h.t, err)
				record(a.Name(), out.OperationID, it, nil)
			}
		}
	}
	require.NoError(h.t, h.store.PutOperations(ctx, o, ops))
	next := phase.AfterMainRun(o.Kind, phase.Outcome{Pending: len(ops)})
	_, err := h.store.UpdateRun(ctx, o, func(r *operations.Run) error { return r.SetPhase(next, "main run ended", now) })
	require.NoError(h.t, err)
	return ops
}

// status returns the status of every operation of o, by ID.
func (h *host) status(o operations.Owner) map[string]operations.Status {
	h.t.Helper()
	ops, err := h.store.ListOperations(context.Background(), o, operations.OperationFilter{})
	require.NoError(h.t, err)
	out := map[string]operations.Status{}
	for _, op := range ops {
		out[op.ID] = op.Status
	}
	return out
}

// A v2 data mover started by Execute during a backup is polled to completion by the
// Monitor through the Registry, beside an adapted v1 action that starts nothing.
func TestEndToEndBackupPolledToCompletion(t *testing.T) {
	ctx := context.Background()
	h := newHost(t)
	mover := adaptertest.NewDataMover[*backup, *restore]("example.io/data-mover", h.clock, &adaptertest.DataMoverOptions{
		Size: 1000, Rate: 100, // ten seconds
		Selector: adapters.ResourceSelector{IncludedResources: []string{"persistentvolumeclaims"}, ExcludedNamespaces: []string{"kube-system"}},
	})
	labeler := &adaptertest.BackupItemActionV1[*backup]{}
	require.NoError(t, h.reg.RegisterBackupItemActionV1("example.io/labeler", labeler))
	require.NoError(t, h.reg.RegisterBackupItemAction(mover.BackupItemAction()))

	o := operations.Owner{Kind: phase.Backup, Name: "nightly", UID: "u1"}
	ops := h.mainRun(o, 0,
		item{pvcs, obj("app", "data-0", nil)},
		item{pvcs, obj("app", "data-1", nil)},
		item{pvcs, obj("kube-system", "etcd", nil)},
		item{configMaps, obj("app", "settings", nil)},
	)
	require.Equal(t, 4, labeler.Calls("Execute"), "the v1 action applies to every item")
	want := []operations.Operation{
		{Owner: o, Action: "example.io/data-mover", Resource: operations.ResourceIdentifier{Resource: "persistentvolumeclaims", Namespace: "app", Name: "data-0"}, ID: "example.io/data-mover/1"},
		{Owner: o, Action: "example.io/data-mover", Resource: operations.ResourceIdentifier{Resource: "persistentvolumeclaims", Namespace: "app", Name: "data-1"}, ID: "example.io/data-mover/2"},
	}
	if diff := cmp.Diff(want, ops, cmpopts.IgnoreFields(operations.Operation{}, "Status")); diff != "" {
		t.Fatalf("operations of the main run (-want +got):\n%s", diff)
	}

	m := monitor.New(h.store, h.reg, monitor.WithClock(h.clock))
	steps := []struct {
		advance    time.Duration
		wantPhase  phase.Phase
		wantOp     operations.OperationPhase
		wantNCompl int64
	}{
		{advance: 0, wantPhase: phase.WaitingForPluginOperations, wantOp: operations.OperationInProgress, wantNCompl: 0},
		{advance: 4 * time.Second, wantPhase: phase.WaitingForPluginOperations, wantOp: operations.OperationInProgress, wantNCompl: 400},
		{advance: 6 * time.Second, wantPhase: phase.Finalizing, wantOp: operations.OperationCompleted, wantNCompl: 1000},
	}
	for i, s := range steps {
		h.clock.Advance(s.advance)
		res, err := m.Poll(ctx, o)
		require.NoError(t, err, "poll %d", i)
		require.Equal(t, s.wantPhase, res.Phase, "poll %d", i)
		for id, st := range h.status(o) {
			require.Equal(t, s.wantOp, st.Phase, "poll %d, operation %s", i, id)
			require.Equal(t, s.wantNCompl, st.NCompleted, "poll %d, operation %s", i, id)
			require.Equal(t, int64(1000), st.NTotal)
			require.Equal(t, "Bytes", st.OperationUnits)
			require.True(t, st.Started.Equal(t0), "Started %v", st.Started)
		}
	}
	require.Len(t, h.asked, 6, "each Progress call looked the backup up")
	for _, a := range h.asked {
		require.Equal(t, o, a)
	}
	run, err := h.store.GetRun(ctx, o)
	require.NoError(t, err)
	require.Zero(t, run.Errors)
}

// Monitor.Run drives a restore's data-mover operations to completion as the clock moves.
func TestEndToEndRestoreMonitorRun(t *testing.T) {
	h := newHost(t)
	mover := adaptertest.NewDataMover[*backup, *restore]("example.io/data-mover", h.clock, &adaptertest.DataMoverOptions{
		Size: 300, Rate: 10, // thirty seconds
		Selector: adapters.ResourceSelector{IncludedResources: []string{"persistentvolumeclaims"}},
	})
	require.NoError(t, h.reg.RegisterRestoreItemAction(mover.RestoreItemAction()))
	require.NoError(t, h.reg.RegisterRestoreItemActionV1("example.io/v1", &adaptertest.RestoreItemActionV1[*restore]{}))
	o := operations.Owner{Kind: phase.Restore, Name: "r1", UID: "u2"}
	ops := h.mainRun(o, 0, item{pvcs, obj("app", "data-0", nil)}, item{pods, obj("app", "web-0", nil)})
	require.Len(t, ops, 1)

	passes := make(chan monitor.PassStats)
	m := monitor.New(h.store, h.reg, monitor.WithClock(h.clock), monitor.WithInterval(10*time.Second),
		monitor.WithObserver(monitor.Observer{Pass: func(s monitor.PassStats) { passes <- s }}))
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- m.Run(ctx) }()

	var completed []int64 // NCompleted seen after each pass
	for {
		s := <-passes
		require.NoError(t, s.Err)
		completed = append(completed, h.status(o)[ops[0].ID].NCompleted)
		if s.Completed > 0 {
			break
		}
		h.clock.BlockUntilWaiters(1)
		h.clock.Advance(10 * time.Second)
	}
	cancel()
	require.ErrorIs(t, <-stopped, context.Canceled)

	require.Equal(t, []int64{0, 100, 200, 300}, completed)
	run, err := h.store.GetRun(context.Background(), o)
	require.NoError(t, err)
	require.Equal(t, phase.Completed, run.Phase)
	last := run.History[len(run.History)-1]
	require.Equal(t, "all operations ended", last.Reason)
	require.True(t, last.Time.Equal(t0.Add(30*time.Second)), "completed at %v", last.Time)
}

// Operations the registry cannot serve fail at their first poll with an error that says
// why, and one past its timeout is cancelled through the registry.
func TestEndToEndOperationsThatFail(t *testing.T) {
	tests := []struct {
		name    string
		action  string
		timeout time.Duration // of the run; 0: the Monitor's default
		advance time.Duration // before the poll
		wantErr string
		// wantCancelled says whether the mover's operation was cancelled.
		wantCancelled bool
	}{
		{name: "operation of an adapted v1 action", action: "example.io/v1", wantErr: "asynchronous operations not supported"},
		{name: "operation of an unknown plugin", action: "example.io/gone", wantErr: "unknown plugin"},
		{name: "operation past its timeout", action: "example.io/data-mover", timeout: 5 * time.Second, advance: 6 * time.Second, wantErr: monitor.TimeoutMessage, wantCancelled: true},
		{name: "operation within its timeout", action: "example.io/data-mover", timeout: time.Hour, advance: 6 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			h := newHost(t)
			mover := adaptertest.NewDataMover[*backup, *restore]("example.io/data-mover", h.clock, &adaptertest.DataMoverOptions{Size: 1000, Rate: 100})
			require.NoError(t, h.reg.RegisterBackupItemAction(mover.BackupItemAction()))
			require.NoError(t, h.reg.RegisterBackupItemActionV1("example.io/v1", &adaptertest.BackupItemActionV1[*backup]{}))

			o := operations.Owner{Kind: phase.Backup, Name: "b1"}
			r := operations.Run{Owner: o, Phase: phase.New, Created: t0, OperationTimeout: tc.timeout}
			require.NoError(t, r.SetPhase(phase.WaitingForPluginOperations, "main run ended", t0))
			require.NoError(t, h.store.CreateRun(ctx, r))
			id := "op-1"
			if tc.action == "example.io/data-mover" {
				id = mover.Start()
			}
			require.NoError(t, h.store.PutOperations(ctx, o, []operations.Operation{{
				Owner: o, Action: tc.action, ID: id, Status: operations.Status{Phase: operations.OperationNew, Created: t0},
			}}))

			h.clock.Advance(tc.advance)
			res, err := monitor.New(h.store, h.reg, monitor.WithClock(h.clock)).Poll(ctx, o)
			require.NoError(t, err)
			st := h.status(o)[id]
			if tc.wantErr == "" {
				require.Equal(t, operations.OperationInProgress, st.Phase)
				require.Equal(t, phase.WaitingForPluginOperations, res.Phase)
			} else {
				require.Equal(t, operations.OperationFailed, st.Phase)
				require.Contains(t, st.Error, tc.wantErr)
				require.Equal(t, phase.FinalizingPartiallyFailed, res.Phase)
			}
			if tc.action == "example.io/data-mover" {
				p, err := mover.Progress(ctx, id)
				require.NoError(t, err)
				require.Equal(t, tc.wantCancelled, p.Err == "cancelled", "mover's report %+v", p)
			}
		})
	}
}

// A Lookup that fails fails the operation with its error (here: the backup is gone).
func TestEndToEndLookupFails(t *testing.T) {
	ctx := context.Background()
	h := newHost(t)
	mover := adaptertest.NewDataMover[*backup, *restore]("example.io/data-mover", h.clock, nil)
	require.NoError(t, h.reg.RegisterBackupItemAction(mover.BackupItemAction()))
	tracker, err := h.reg.Resolve("example.io/data-mover")
	require.NoError(t, err)
	_, err = tracker.Progress(ctx, operations.Operation{Owner: operations.Owner{Kind: phase.Backup, Name: "deleted"}, ID: mover.Start()})
	require.True(t, errors.Is(err, operations.ErrNotFound), "error %v", err)
}
