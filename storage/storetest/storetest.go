package storetest

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// Run checks a store against the storage contract of [operations.Store]. newStore is
// called once per subtest, must return an empty store, and registers its own cleanup
// (with t.Cleanup); a subtest is one check, two levels below t (Runs/CreateExisting),
// and the cases of a table inside a check share its store. Run uses only the Store's
// methods and reports every broken rule as a failure of a named subtest; it never skips
// a check. Run returns when every subtest has finished, and starts no goroutine that
// outlives it.
func Run(t *testing.T, newStore func(t *testing.T) operations.Store) {
	t.Helper()
	for _, g := range groups() {
		t.Run(g.name, func(t *testing.T) { runEach(t, newStore, g.cases) })
	}
}

// runEach runs each check in a subtest of t, on a store of its own.
func runEach(t *testing.T, newStore func(t *testing.T) operations.Store, checks []check) {
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			s := newStore(t)
			if s == nil {
				t.Fatal("newStore returned nil")
			}
			c.run(t, s)
		})
	}
}

// A check is one subtest of the suite, run on a fresh store.
type check struct {
	name string
	run  func(t *testing.T, s operations.Store)
}

type group struct {
	name  string
	cases []check
}

func groups() []group {
	return []group{
		{"Runs", runChecks()},
		{"Operations", operationChecks()},
		{"Isolation", isolationChecks()},
		{"Context", contextChecks()},
		{"Concurrency", concurrencyChecks()},
		{"Scale", scaleChecks()},
	}
}

// bg is the context of every call that is not about contexts. (The go line of itemops
// predates testing.T.Context.)
var bg = context.Background()

// base is the time of the fixtures; its nanoseconds check that a store keeps them.
var base = time.Date(2024, 5, 1, 12, 0, 0, 123456789, time.UTC)

func at(minutes int) time.Time { return base.Add(time.Duration(minutes) * time.Minute) }

func backup(name string) operations.Owner {
	return operations.Owner{Kind: phase.Backup, Name: name, UID: "uid-backup-" + name}
}

func restore(name string) operations.Owner {
	return operations.Owner{Kind: phase.Restore, Name: name, UID: "uid-restore-" + name}
}

// newRun returns a run of o in phase New.
func newRun(o operations.Owner) operations.Run {
	return operations.Run{Owner: o, Phase: phase.New, Created: base, Updated: base, OperationTimeout: 4 * time.Hour}
}

// runIn returns a run of o moved from New to p with Run.SetPhase, so that its history is
// what a store accepts.
func runIn(t *testing.T, o operations.Owner, p phase.Phase, profile phase.Profile) operations.Run {
	t.Helper()
	r := newRun(o)
	r.Profile = profile
	require.NoError(t, r.SetPhase(p, "fixture", at(1)), "fixture: SetPhase(%s) of %s", p, o)
	return r
}

// fullRun returns a run with every field set, one history time in a non-UTC zone.
func fullRun(o operations.Owner) operations.Run {
	return operations.Run{
		Owner:            o,
		Phase:            phase.WaitingForPluginOperationsPartiallyFailed,
		Profile:          phase.Profile{RestoreFinalizing: o.Kind == phase.Restore},
		OperationTimeout: 90 * time.Minute,
		ItemsTotal:       120,
		ItemsDone:        117,
		Errors:           2,
		Warnings:         5,
		FailedOperations: 1,
		FailureReason:    "not a failure, just a reason",
		Created:          base,
		Started:          at(1),
		Completed:        at(3), // not yet terminal; a store keeps what it is given
		Updated:          at(2),
		History: []operations.Transition{
			{From: phase.New, To: phase.InProgress, Event: phase.EventStart, Time: at(1).In(time.FixedZone("CEST", 2*60*60)), Reason: "picked up"},
			{From: phase.InProgress, To: phase.WaitingForPluginOperationsPartiallyFailed, Event: phase.EventWaitPartiallyFailed, Time: at(2), Reason: "2 errors, 3 operations pending"},
			{From: phase.WaitingForPluginOperationsPartiallyFailed, To: phase.WaitingForPluginOperationsPartiallyFailed, Event: operations.EventCancelRequested, Time: at(3), Reason: "cancelled by jane: wrong namespace"},
		},
		Cancel: operations.CancelRequest{Reason: "cancelled by jane: wrong namespace", At: at(3).In(time.FixedZone("EST", -5*60*60))},
	}
}

// newOp returns an operation of o in phase p with every field set.
func newOp(o operations.Owner, id string, p operations.OperationPhase) operations.Operation {
	op := operations.Operation{
		Owner:    o,
		Action:   "example.io/volume-snapshotter",
		Resource: operations.ResourceIdentifier{Group: "", Resource: "persistentvolumeclaims", Namespace: "app", Name: "data-" + id},
		ID:       id,
		Status: operations.Status{
			Phase:          p,
			NCompleted:     10,
			NTotal:         100,
			OperationUnits: "Bytes",
			Description:    "copying " + id,
			Created:        base,
			Started:        at(1),
			Updated:        at(2),
		},
	}
	if o.Kind == phase.Backup {
		op.PostOperationItems = []operations.ResourceIdentifier{
			{Group: "snapshot.storage.k8s.io", Resource: "volumesnapshots", Namespace: "app", Name: "snap-" + id},
		}
	}
	if p == operations.OperationFailed {
		op.Status.Error = "plugin said no"
	}
	return op
}

// newOps returns n operations of o in phase p with IDs prefix0000, prefix0001, ...
func newOps(o operations.Owner, prefix string, n int, p operations.OperationPhase) []operations.Operation {
	ops := make([]operations.Operation, n)
	for i := range ops {
		ops[i] = newOp(o, fmt.Sprintf("%s%04d", prefix, i), p)
	}
	return ops
}

// cloneOps deep-copies ops, so that fixtures given to a store are not the expectations.
func cloneOps(ops []operations.Operation) []operations.Operation {
	out := make([]operations.Operation, len(ops))
	for i := range ops {
		out[i] = ops[i].Clone()
	}
	return out
}

// diff compares as the package documentation says: times as instants, nil slices equal
// to empty ones. go-cmp decides and explains; the quick reflect.DeepEqual of normalized
// copies only spares it the common case of equal values, since DeepEqual is the stricter
// of the two (it would tell nil from empty, and compare time.Time's representation).
func diff(want, got any) string {
	if reflect.DeepEqual(normalize(want), normalize(got)) {
		return ""
	}
	return cmp.Diff(want, got, cmpopts.EquateEmpty())
}

// normalize returns a copy of v with every time of a Run or Operation in UTC (which also
// drops the monotonic reading) and empty slices made nil.
func normalize(v any) any {
	utc := func(t *time.Time) { *t = t.UTC() }
	run := func(r operations.Run) operations.Run {
		for _, t := range []*time.Time{&r.Created, &r.Started, &r.Completed, &r.Updated} {
			utc(t)
		}
		if len(r.History) == 0 {
			r.History = nil
		} else {
			r.History = slices.Clone(r.History)
			for i := range r.History {
				utc(&r.History[i].Time)
			}
		}
		return r
	}
	op := func(o operations.Operation) operations.Operation {
		for _, t := range []*time.Time{&o.Status.Created, &o.Status.Started, &o.Status.Updated} {
			utc(t)
		}
		if len(o.PostOperationItems) == 0 {
			o.PostOperationItems = nil
		}
		return o
	}
	switch v := v.(type) {
	case operations.Run:
		return run(v)
	case operations.Operation:
		return op(v)
	case []operations.Run:
		if len(v) == 0 {
			return []operations.Run(nil)
		}
		out := make([]operations.Run, len(v))
		for i := range v {
			out[i] = run(v[i])
		}
		return out
	case []operations.Operation:
		if len(v) == 0 {
			return []operations.Operation(nil)
		}
		out := make([]operations.Operation, len(v))
		for i := range v {
			out[i] = op(v[i])
		}
		return out
	}
	return v
}

func mustCreate(t *testing.T, s operations.Store, runs ...operations.Run) {
	t.Helper()
	for _, r := range runs {
		require.NoError(t, s.CreateRun(bg, r), "CreateRun(%s)", r.Owner)
	}
}

func mustPut(t *testing.T, s operations.Store, o operations.Owner, ops []operations.Operation) {
	t.Helper()
	require.NoError(t, s.PutOperations(bg, o, ops), "PutOperations(%s, %d operations)", o, len(ops))
}

// wantRun checks that the stored run of want.Owner is want.
func wantRun(t *testing.T, s operations.Store, want operations.Run) {
	t.Helper()
	got, err := s.GetRun(bg, want.Owner)
	require.NoError(t, err, "GetRun(%s)", want.Owner)
	if d := diff(want, got); d != "" {
		t.Errorf("GetRun(%s) (-want +got):\n%s", want.Owner, d)
	}
}

// wantRuns checks that ListRuns(f) returns exactly want, in that order.
func wantRuns(t *testing.T, s operations.Store, f operations.RunFilter, want []operations.Run) {
	t.Helper()
	got, err := s.ListRuns(bg, f)
	require.NoError(t, err, "ListRuns(%+v)", f)
	if d := diff(want, got); d != "" {
		t.Errorf("ListRuns(%+v) (-want +got):\n%s", f, d)
	}
}

// wantOps checks that ListOperations(o, f) returns exactly want, in that order.
func wantOps(t *testing.T, s operations.Store, o operations.Owner, f operations.OperationFilter, want []operations.Operation) {
	t.Helper()
	got, err := s.ListOperations(bg, o, f)
	require.NoError(t, err, "ListOperations(%s, %+v)", o, f)
	if d := diff(want, got); d != "" {
		t.Errorf("ListOperations(%s, %+v) (-want +got):\n%s", o, f, d)
	}
}

// wantAllOps checks every operation of o, through ListOperations and GetOperation.
func wantAllOps(t *testing.T, s operations.Store, o operations.Owner, want []operations.Operation) {
	t.Helper()
	wantOps(t, s, o, operations.OperationFilter{}, want)
	for _, w := range want {
		got, err := s.GetOperation(bg, o, w.ID)
		require.NoError(t, err, "GetOperation(%s, %q)", o, w.ID)
		if d := diff(w, got); d != "" {
			t.Errorf("GetOperation(%s, %q) (-want +got):\n%s", o, w.ID, d)
		}
	}
}

// ids returns the IDs of ops, in order.
func ids(ops []operations.Operation) []string {
	out := make([]string, len(ops))
	for i := range ops {
		out[i] = ops[i].ID
	}
	return out
}

// phases is shorthand for an operation filter.
func phases(ps ...operations.OperationPhase) operations.OperationFilter {
	return operations.OperationFilter{Phases: ps}
}
