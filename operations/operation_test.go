package operations_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

func op(o operations.Owner, id string, p operations.OperationPhase) operations.Operation {
	return operations.Operation{
		Owner:    o,
		Action:   "velero.io/csi-pvc-backupper",
		Resource: operations.ResourceIdentifier{Resource: "persistentvolumeclaims", Namespace: "app", Name: id},
		ID:       id,
		Status:   operations.Status{Phase: p, Created: t0},
	}
}

func TestOwnerValidate(t *testing.T) {
	tests := []struct {
		name    string
		owner   operations.Owner
		wantErr bool
	}{
		{"backup", operations.Owner{Kind: phase.Backup, Name: "b"}, false},
		{"restore with UID", operations.Owner{Kind: phase.Restore, Name: "r", UID: "u"}, false},
		{"empty UID is fine", operations.Owner{Kind: phase.Restore, Name: "r"}, false},
		{"zero owner", operations.Owner{}, true},
		{"empty name", operations.Owner{Kind: phase.Backup, UID: "u"}, true},
		{"empty kind", operations.Owner{Name: "b"}, true},
		{"kind in lowercase", operations.Owner{Kind: "backup", Name: "b"}, true},
		{"kind of one's own", operations.Owner{Kind: "Schedule", Name: "b"}, false},
		{"kind with a dash", operations.Owner{Kind: "Sched-ule", Name: "b"}, true},
		{"kind longer than 63 bytes", operations.Owner{Kind: phase.Kind("S" + strings.Repeat("s", 63)), Name: "b"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.owner.Validate()
			if !tc.wantErr {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, operations.ErrInvalid)
		})
	}
}

func TestOwnerString(t *testing.T) {
	if got, want := (operations.Owner{Kind: phase.Restore, Name: "r-1", UID: "u"}).String(), "Restore/r-1"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestResourceIdentifierString(t *testing.T) {
	tests := []struct {
		name string
		r    operations.ResourceIdentifier
		want string
	}{
		{"core, namespaced", operations.ResourceIdentifier{Resource: "persistentvolumeclaims", Namespace: "app", Name: "data-0"}, "persistentvolumeclaims app/data-0"},
		{"grouped, namespaced", operations.ResourceIdentifier{Group: "apps", Resource: "deployments", Namespace: "app", Name: "web"}, "deployments.apps app/web"},
		{"cluster-scoped", operations.ResourceIdentifier{Resource: "persistentvolumes", Name: "pv-1"}, "persistentvolumes pv-1"},
		{"grouped, cluster-scoped", operations.ResourceIdentifier{Group: "storage.k8s.io", Resource: "storageclasses", Name: "fast"}, "storageclasses.storage.k8s.io fast"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.r.String(); got != tc.want {
				t.Errorf("String() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestOperationPhase(t *testing.T) {
	tests := []struct {
		phase               operations.OperationPhase
		valid, wantFinished bool
	}{
		{operations.OperationNew, true, false},
		{operations.OperationInProgress, true, false},
		{operations.OperationCompleted, true, true},
		{operations.OperationFailed, true, true},
		{"", false, false},
		{"completed", false, false},
		{"PartiallyFailed", false, false},
	}
	for _, tc := range tests {
		t.Run(string(tc.phase), func(t *testing.T) {
			if got := tc.phase.Valid(); got != tc.valid {
				t.Errorf("%q.Valid() = %v, want %v", tc.phase, got, tc.valid)
			}
			if got := tc.phase.Finished(); got != tc.wantFinished {
				t.Errorf("%q.Finished() = %v, want %v", tc.phase, got, tc.wantFinished)
			}
		})
	}
	// The constants are written as Velero writes them.
	got := []operations.OperationPhase{operations.OperationNew, operations.OperationInProgress, operations.OperationCompleted, operations.OperationFailed}
	want := []operations.OperationPhase{"New", "InProgress", "Completed", "Failed"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("operation phase spellings (-want +got):\n%s", diff)
	}
}

func TestOperationValidate(t *testing.T) {
	valid := op(backupOwner("b"), "op-1", operations.OperationInProgress)
	tests := []struct {
		name    string
		change  func(*operations.Operation)
		wantErr bool
	}{
		{"valid", func(*operations.Operation) {}, false},
		{"every phase is valid", func(o *operations.Operation) { o.Status.Phase = operations.OperationFailed }, false},
		{"no action or resource is fine", func(o *operations.Operation) { o.Action, o.Resource = "", operations.ResourceIdentifier{} }, false},
		{"empty ID", func(o *operations.Operation) { o.ID = "" }, true},
		{"empty phase", func(o *operations.Operation) { o.Status.Phase = "" }, true},
		{"unknown phase", func(o *operations.Operation) { o.Status.Phase = "Canceled" }, true},
		{"owner without a name", func(o *operations.Operation) { o.Owner.Name = "" }, true},
		{"owner of a kind of one's own", func(o *operations.Operation) { o.Owner.Kind = "Schedule" }, false},
		{"owner of a kind that is no name", func(o *operations.Operation) { o.Owner.Kind = "Sched ule" }, true},
		{"progress beyond the total is fine", func(o *operations.Operation) { o.Status.NCompleted, o.Status.NTotal = 120, 100 }, false},
		{"negative completed count", func(o *operations.Operation) { o.Status.NCompleted = -1 }, true},
		{"negative total", func(o *operations.Operation) { o.Status.NTotal = -1 << 63 }, true},
		{"times at the ends of years 0000 to 9999", func(o *operations.Operation) {
			o.Status.Created = time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)
			o.Status.Started = time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)
			o.Status.Updated = time.Date(10000, 1, 1, 0, 59, 59, 0, time.FixedZone("", 3600)) // 9999 in UTC
		}, false},
		{"created in year 10000", func(o *operations.Operation) { o.Status.Created = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }, true},
		{"started in year -1", func(o *operations.Operation) { o.Status.Started = time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC).Add(-1) }, true},
		{"updated in year 9999 in its zone, 10000 in UTC", func(o *operations.Operation) {
			o.Status.Updated = time.Date(9999, 12, 31, 23, 0, 0, 0, time.FixedZone("", -3600))
		}, true},
		{"a Monitor's state", func(o *operations.Operation) {
			o.Monitor = operations.MonitorState{ProgressAt: time.Unix(60, 0).UTC(), Attempts: 2, ErrorSince: time.Unix(30, 0).UTC(),
				NextPoll: time.Unix(90, 0).UTC(), LastError: strings.Repeat("x", operations.MaxTextBytes)}
		}, false},
		{"negative attempts", func(o *operations.Operation) { o.Monitor.Attempts = -1 }, true},
		{"negative highest count completed", func(o *operations.Operation) { o.Monitor.MaxCompleted = -1 }, true},
		{"progress time in year 10000", func(o *operations.Operation) { o.Monitor.ProgressAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }, true},
		{"error since year -1", func(o *operations.Operation) { o.Monitor.ErrorSince = time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC) }, true},
		{"next poll in year 10000", func(o *operations.Operation) { o.Monitor.NextPoll = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }, true},
		{"last error too long", func(o *operations.Operation) { o.Monitor.LastError = strings.Repeat("x", operations.MaxTextBytes+1) }, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := valid.Clone()
			tc.change(&o)
			err := o.Validate()
			if !tc.wantErr {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, operations.ErrInvalid)
		})
	}
}

func TestOperationClone(t *testing.T) {
	orig := op(backupOwner("b"), "op-1", operations.OperationNew)
	orig.PostOperationItems = []operations.ResourceIdentifier{{Resource: "pods", Namespace: "app", Name: "p"}}
	c := orig.Clone()
	require.Empty(t, cmp.Diff(orig, c), "Clone differs from the original")

	c.PostOperationItems[0].Name = "changed"
	c.Status.Phase = operations.OperationFailed
	if orig.PostOperationItems[0].Name != "p" || orig.Status.Phase != operations.OperationNew {
		t.Errorf("changing the clone changed the original: %+v", orig)
	}

	for _, items := range [][]operations.ResourceIdentifier{nil, {}} {
		o := operations.Operation{PostOperationItems: items}
		if got := o.Clone().PostOperationItems; (got == nil) != (items == nil) || len(got) != 0 {
			t.Errorf("Clone of PostOperationItems %#v = %#v: nil and empty must be kept apart", items, got)
		}
	}
}

func TestOperationFilterMatch(t *testing.T) {
	all := []operations.OperationPhase{operations.OperationNew, operations.OperationInProgress, operations.OperationCompleted, operations.OperationFailed}
	tests := []struct {
		name   string
		filter operations.OperationFilter
		want   [4]bool // matches New, InProgress, Completed, Failed
	}{
		{"zero filter selects all", operations.OperationFilter{}, [4]bool{true, true, true, true}},
		{"empty non-nil phases selects all", operations.OperationFilter{Phases: []operations.OperationPhase{}}, [4]bool{true, true, true, true}},
		{"unfinished", operations.OperationFilter{Phases: []operations.OperationPhase{operations.OperationNew, operations.OperationInProgress}}, [4]bool{true, true, false, false}},
		{"failed", operations.OperationFilter{Phases: []operations.OperationPhase{operations.OperationFailed}}, [4]bool{false, false, false, true}},
		{"duplicates", operations.OperationFilter{Phases: []operations.OperationPhase{operations.OperationCompleted, operations.OperationCompleted}}, [4]bool{false, false, true, false}},
		{"unknown phase selects none", operations.OperationFilter{Phases: []operations.OperationPhase{"Canceled"}}, [4]bool{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got [4]bool
			for i, p := range all {
				got[i] = tc.filter.Match(operations.Operation{Status: operations.Status{Phase: p}})
			}
			if got != tc.want {
				t.Errorf("%+v.Match(New, InProgress, Completed, Failed) = %v, want %v", tc.filter, got, tc.want)
			}
		})
	}
}

// TestValidateAllocatesNothing: the checks of a valid operation run on every write of
// every operation, so they allocate nothing.
func TestValidateAllocatesNothing(t *testing.T) {
	op := operations.Operation{
		Owner:              operations.Owner{Kind: phase.Backup, Name: "b", UID: "u"},
		Action:             "mover",
		ID:                 "op-1",
		Resource:           operations.ResourceIdentifier{Group: "g", Resource: "pvcs", Namespace: "ns", Name: "data"},
		PostOperationItems: []operations.ResourceIdentifier{{Resource: "snapshots", Namespace: "ns", Name: "s"}},
		Status: operations.Status{Phase: operations.OperationInProgress, Description: "copying", OperationUnits: "Bytes",
			Created: time.Unix(1700000000, 0), Started: time.Unix(1700000060, 0), Updated: time.Unix(1700000120, 0)},
	}
	if n := testing.AllocsPerRun(100, func() { _ = op.Validate() }); n != 0 {
		t.Errorf("Validate of a valid operation allocates %v times", n)
	}
}

// TestProgressValidate checks the rule for what a plugin reports: counts that are not
// negative (NCompleted above NTotal is an estimate passed, and valid) and times in the
// years an itemoperations file holds.
func TestProgressValidate(t *testing.T) {
	at := time.Date(2026, 11, 27, 10, 42, 7, 0, time.UTC)
	tests := []struct {
		name string
		p    operations.Progress
		want string // the error's text; "" for a valid report
	}{
		{"zero", operations.Progress{}, ""},
		{"running", operations.Progress{NCompleted: 12, NTotal: 100, Started: at, Updated: at}, ""},
		{"beyond an estimated total", operations.Progress{NCompleted: 101, NTotal: 100}, ""},
		{"negative done", operations.Progress{NCompleted: -1, NTotal: 100}, "negative progress (-1 of 100): invalid record"},
		{"negative total", operations.Progress{NTotal: -5}, "negative progress (0 of -5): invalid record"},
		{"started past year 9999", operations.Progress{Started: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}, "started time 10000-01-01T00:00:00Z outside years 0000 to 9999 in UTC: invalid record"},
		{"updated before year 0000", operations.Progress{Updated: time.Date(-1, 12, 31, 23, 59, 59, 0, time.UTC)}, "updated time -0001-12-31T23:59:59Z outside years 0000 to 9999 in UTC: invalid record"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Validate()
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, operations.ErrInvalid)
			require.EqualError(t, err, tc.want)
		})
	}
}
