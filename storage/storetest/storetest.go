package storetest

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// A TB is what the suites run on: a [testing.TB] that runs subtests of its own type, as
// *testing.T does. A test of a test can pass its own TB (one that records failures
// instead of reporting them) to check that a broken store fails where it should.
type TB[T any] interface {
	testing.TB
	Run(name string, f func(t T)) bool
}

// tb is the TB every check gets, whatever the caller's type: the caller's value, which
// runs subtests through run.
type tb struct {
	testing.TB
	run func(name string, f func(t tb)) bool
}

// Run runs f as a subtest of t named name, as testing.T.Run does.
func (t tb) Run(name string, f func(t tb)) bool { return t.run(name, f) }

// wrap returns t as a tb.
func wrap[T TB[T]](t T) tb {
	return tb{TB: t, run: func(name string, f func(tb)) bool {
		return t.Run(name, func(t T) { f(wrap(t)) })
	}}
}

// An Option changes what [Run] expects of a store.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	// withoutRunStarter: the store is not meant to be an operations.RunStarter.
	withoutRunStarter bool
	// withoutPassReader: the store is not meant to be an operations.PassReader.
	withoutPassReader bool
}

// WithoutPassReader tells [Run] that the store is not an [operations.PassReader], so
// that a Monitor's pass reads each run with calls of its own: the group Pass then holds
// the one check Pass/NotAPassReader, that it is indeed not one. Without this option, a
// store that is not a PassReader fails every check of the group Pass: a decorator that
// embeds the operations.Store it wraps hides the PassReader of that store (build
// decorators with [decorate.Store], which keeps it).
func WithoutPassReader() Option {
	return optionFunc(func(c *config) { c.withoutPassReader = true })
}

// WithoutRunStarter tells [Run] that the store is not an [operations.RunStarter], so
// that it cannot write a run with its first operations atomically: the check
// Runs/AtomicStart is then replaced by Runs/StartWithoutRunStarter, which checks StartRun
// on such a store (a main run that fails leaves no run, and the next call runs main
// again). Without this option, a store that is not a
// RunStarter fails Runs/AtomicStart: a decorator that embeds the operations.Store it
// wraps hides the RunStarter of that store (build decorators with [decorate.Store],
// which keeps it).
func WithoutRunStarter() Option {
	return optionFunc(func(c *config) { c.withoutRunStarter = true })
}

// Run checks a store against the storage contract of [operations.Store], and checks that
// it is an [operations.RunStarter] (unless [WithoutRunStarter] says it is not meant to
// be) and an [operations.PassReader] that keeps the contract of one (unless
// [WithoutPassReader] says it is not meant to be). newStore is called once per subtest, must return an empty store, and registers
// its own cleanup (with t.Cleanup); a subtest is one check, two levels below t
// (Runs/CreateExisting), and the cases of a table inside a check share its store. Run
// uses only the Store's methods and reports every broken rule as a failure of a named
// subtest, with a sentence that says which call returned what; it never skips a check.
// With -short ([testing.Short]) the slowest check, Scale/LargeBatch, stores 2,000
// operations instead of 100,000, and each writer of the Concurrency checks makes 10
// writes instead of 50. Run returns when every subtest has finished, and starts
// no goroutine that outlives it.
//
// t is usually the test's *testing.T; any [TB] will do.
func Run[T TB[T]](t T, newStore func(t T) operations.Store, opts ...Option) {
	t.Helper()
	var cfg config
	for _, o := range opts {
		o.apply(&cfg)
	}
	if cfg.withoutRunStarter {
		t.Log("storetest: WithoutRunStarter: the store is not an operations.RunStarter, so Runs/StartWithoutRunStarter checks StartRun in place of Runs/AtomicStart")
	}
	for _, g := range groups(cfg) {
		t.Run(g.name, func(t T) { runEach(t, newStore, g.cases) })
	}
}

// runEach runs each check in a subtest of t, on a store of its own.
func runEach[T TB[T]](t T, newStore func(t T) operations.Store, checks []check) {
	for _, c := range checks {
		t.Run(c.name, func(t T) {
			s := newStore(t)
			if s == nil {
				t.Fatal("newStore returned nil")
			}
			c.run(wrap(t), s)
		})
	}
}

// A check is one subtest of the suite, run on a fresh store.
type check struct {
	name string
	run  func(t tb, s operations.Store)
}

type group struct {
	name  string
	cases []check
}

func groups(cfg config) []group {
	return []group{
		{"Runs", runChecks(cfg)},
		{"Operations", operationChecks()},
		{"Isolation", isolationChecks()},
		{"Context", contextChecks()},
		{"Concurrency", concurrencyChecks()},
		{"Scale", scaleChecks()},
		{"Pass", passChecks(cfg)},
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
func runIn(t tb, o operations.Owner, p phase.Phase, profile phase.Profile) operations.Run {
	t.Helper()
	r := newRun(o)
	r.Profile = profile
	noError(t, r.SetPhase(p, "fixture", at(1)), "fixture: SetPhase(%s) of %s", p, o)
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

// fullMonitorState returns a Monitor's state with every field set, one time in a zone
// other than UTC.
func fullMonitorState() operations.MonitorState {
	return operations.MonitorState{ProgressAt: at(3), Attempts: 4, ErrorSince: at(4).In(time.FixedZone("UTC+2", 2*60*60)),
		NextPoll: at(6), LastError: "rpc error: code = Unavailable", MaxCompleted: 12}
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
		for _, t := range []*time.Time{&o.Status.Created, &o.Status.Started, &o.Status.Updated,
			&o.Monitor.ProgressAt, &o.Monitor.ErrorSince, &o.Monitor.NextPoll} {
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

func mustCreate(t tb, s operations.Store, runs ...operations.Run) {
	t.Helper()
	for _, r := range runs {
		noError(t, s.CreateRun(bg, r), "CreateRun(%s)", r.Owner)
	}
}

func mustPut(t tb, s operations.Store, o operations.Owner, ops []operations.Operation) {
	t.Helper()
	noError(t, s.PutOperations(bg, o, ops), "PutOperations(%s, %d operations)", o, len(ops))
}

// wantRun checks that the stored run of want.Owner is want.
func wantRun(t tb, s operations.Store, want operations.Run) {
	t.Helper()
	got, err := s.GetRun(bg, want.Owner)
	noError(t, err, "GetRun(%s)", want.Owner)
	if d := diff(want, got); d != "" {
		t.Errorf("GetRun(%s) (-want +got):\n%s", want.Owner, d)
	}
}

// wantRuns checks that ListRuns(f) returns exactly want, in that order.
func wantRuns(t tb, s operations.Store, f operations.RunFilter, want []operations.Run) {
	t.Helper()
	got, err := s.ListRuns(bg, f)
	noError(t, err, "ListRuns(%+v)", f)
	if d := diff(want, got); d != "" {
		t.Errorf("ListRuns(%+v) (-want +got):\n%s", f, d)
	}
}

// wantOps checks that ListOperations(o, f) returns exactly want, in that order.
func wantOps(t tb, s operations.Store, o operations.Owner, f operations.OperationFilter, want []operations.Operation) {
	t.Helper()
	got, err := s.ListOperations(bg, o, f)
	noError(t, err, "ListOperations(%s, %+v)", o, f)
	if d := diffOps(want, got); d != "" {
		t.Errorf("ListOperations(%s, %+v) %s", o, f, d)
	}
}

// diffOps describes how the list got differs from want, or returns "" when they are
// equal. When the IDs differ it shows only the IDs, in order; when they match it shows
// the first three operations that differ. A diff of whole lists would print hundreds of
// operations for one misplaced ID, and take seconds to compute.
func diffOps(want, got []operations.Operation) string {
	if d := diff(ids(want), ids(got)); d != "" {
		return fmt.Sprintf("lists other IDs (-want +got):\n%s", d)
	}
	var out strings.Builder
	for i, shown := 0, 0; i < len(want) && shown < 3; i++ {
		if d := diff(want[i], got[i]); d != "" {
			fmt.Fprintf(&out, "operation %d, %q (-want +got):\n%s", i, want[i].ID, d)
			shown++
		}
	}
	return out.String()
}

// wantAllOps checks every operation of o, through ListOperations and GetOperation.
func wantAllOps(t tb, s operations.Store, o operations.Owner, want []operations.Operation) {
	t.Helper()
	wantOps(t, s, o, operations.OperationFilter{}, want)
	for _, w := range want {
		got, err := s.GetOperation(bg, o, w.ID)
		noError(t, err, "GetOperation(%s, %q)", o, w.ID)
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
