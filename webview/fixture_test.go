package webview_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/clock/clocktest"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/opsfile"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/memstore"
)

// t0 is when the fixture's runs were created; the fixture's clock reads t0 + 10m.
var t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// bidiName is a run name that a reader who trusts the screen would take for
// "exe.png...": a right-to-left override, as term_test.go in cmd/itemops checks, with
// mark-up and a zero-width space.
const bidiName = "\u202egnp.exe<script>alert(1)</script>\u200b"

// hostileOperations returns the operations of the valid itemoperations file of the
// hostile corpus (testdata/hostile) whose owner's name holds an escape sequence and NUL.
func hostileOperations(t *testing.T) []operations.Operation {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "testdata", "hostile", "opsfiles", "owner-with-escapes.json.gz"))
	require.NoError(t, err)
	defer f.Close()
	ops, err := opsfile.Decode(f)
	require.NoError(t, err)
	require.NotEmpty(t, ops)
	return ops
}

// createRun stores a run of o, moved through phases at the given times.
func createRun(t *testing.T, s operations.Store, o operations.Owner, steps ...any) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, s.CreateRun(ctx, operations.Run{Owner: o, Phase: phase.New, Created: t0, Updated: t0,
		ItemsTotal: 20, ItemsDone: 12}))
	for i := 0; i < len(steps); i += 3 {
		to, reason, at := steps[i].(phase.Phase), steps[i+1].(string), steps[i+2].(time.Time)
		_, err := s.UpdateRun(ctx, o, func(r *operations.Run) error { return r.SetPhase(to, reason, at) })
		require.NoError(t, err)
	}
}

// fixture returns a store of a few runs with fixed times, and a clock at t0 + 10m:
//
//   - Backup/nightly, waiting for three operations: one moving (with a retry behind
//     it), one failed, one completed;
//   - Restore/restore-1, completed;
//   - a Backup whose name is bidiName, failed with a hostile reason;
//   - the Backup of the hostile corpus's operations file, with its operation.
func fixture(t *testing.T) (*memstore.Store, *clocktest.Clock) {
	t.Helper()
	ctx := context.Background()
	s := memstore.New()
	nightly := operations.Owner{Kind: phase.Backup, Name: "nightly", UID: "uid-1"}
	createRun(t, s, nightly,
		phase.InProgress, "started", t0.Add(time.Minute),
		phase.WaitingForPluginOperations, "main run done", t0.Add(3*time.Minute))
	require.NoError(t, s.PutOperations(ctx, nightly, []operations.Operation{
		{
			Owner: nightly, Action: "velero.io/csi-pvc-backupper", ID: "snap-1",
			Resource: operations.ResourceIdentifier{Resource: "persistentvolumeclaims", Namespace: "shop", Name: "db-data"},
			Status: operations.Status{Phase: operations.OperationInProgress, NCompleted: 40, NTotal: 100, OperationUnits: "Bytes",
				Description: "uploading", Created: t0.Add(3 * time.Minute), Started: t0.Add(3 * time.Minute), Updated: t0.Add(5 * time.Minute)},
			Monitor: operations.MonitorState{ProgressAt: t0.Add(5 * time.Minute), NextPoll: t0.Add(10*time.Minute + 30*time.Second),
				Attempts: 2, ErrorSince: t0.Add(9 * time.Minute), LastError: "connection refused"},
			PostOperationItems: []operations.ResourceIdentifier{{Group: "snapshot.storage.k8s.io", Resource: "volumesnapshots", Namespace: "shop", Name: "snap-1"}},
		},
		{
			Owner: nightly, Action: "velero.io/csi-pvc-backupper", ID: "snap-2",
			Resource: operations.ResourceIdentifier{Resource: "persistentvolumeclaims", Namespace: "shop", Name: "logs"},
			Status: operations.Status{Phase: operations.OperationFailed, Error: "volume snapshot class not found",
				Created: t0.Add(3 * time.Minute), Updated: t0.Add(4 * time.Minute)},
		},
		{
			Owner: nightly, Action: "example.io/copy", ID: "copy-1",
			Resource: operations.ResourceIdentifier{Group: "apps", Resource: "deployments", Namespace: "shop", Name: "web"},
			Status: operations.Status{Phase: operations.OperationCompleted, NCompleted: 7, NTotal: 7, OperationUnits: "Files",
				Created: t0.Add(3 * time.Minute), Updated: t0.Add(6 * time.Minute)},
		},
	}))
	createRun(t, s, operations.Owner{Kind: phase.Restore, Name: "restore-1"},
		phase.InProgress, "started", t0.Add(time.Minute),
		phase.Completed, "done", t0.Add(2*time.Minute))
	createRun(t, s, operations.Owner{Kind: phase.Backup, Name: bidiName},
		phase.InProgress, "started", t0.Add(time.Minute),
		phase.Failed, "plugin said \x1b[31m\u2067<b>nothing</b>\u2069", t0.Add(2*time.Minute))
	ops := hostileOperations(t)
	createRun(t, s, operations.Owner{Kind: ops[0].Owner.Kind, Name: ops[0].Owner.Name},
		phase.InProgress, "started", t0.Add(time.Minute),
		phase.WaitingForPluginOperations, "waiting", t0.Add(2*time.Minute))
	require.NoError(t, s.PutOperations(ctx, operations.Owner{Kind: ops[0].Owner.Kind, Name: ops[0].Owner.Name}, ops))
	return s, clocktest.NewClock(t0.Add(10 * time.Minute))
}
