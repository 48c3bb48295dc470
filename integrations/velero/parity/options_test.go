package parity

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	velerov1api "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"
	"github.com/vmware-tanzu/velero/pkg/builder"
	"github.com/vmware-tanzu/velero/pkg/itemoperation"
	"github.com/vmware-tanzu/velero/pkg/metrics"
	"github.com/vmware-tanzu/velero/pkg/util/encode"

	"github.com/itemops/itemops/clock/clocktest"
	itemvelero "github.com/itemops/itemops/integrations/velero"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/phase"
)

// forked is a waiting backup with one operation, in the bucket of a side, and the
// bridge's controller for it, built with a fork's options.
type forked struct {
	side *side
	sc   *script
	ops  *itemvelero.BackupOperations
	env  itemvelero.BackupEnv
	req  ctrl.Request
}

func newForked(t *testing.T, opID string, opts ...monitor.Option) *forked {
	t.Helper()
	backup := builder.ForBackup(ns, "backup-1").StorageLocation("default").ItemOperationTimeout(time.Hour).
		ObjectMeta(builder.WithUID("uid-1")).Phase(velerov1api.BackupPhaseWaitingForPluginOperations).Result()
	file, errs := encode.ToJSONGzip([]*itemoperation.BackupOperation{{
		Spec: itemoperation.BackupOperationSpec{BackupName: backup.Name, BackupUID: "uid-1", BackupItemAction: action,
			ResourceIdentifier: id(), OperationID: opID},
		Status: itemoperation.OperationStatus{Phase: itemoperation.OperationPhaseNew, Created: created()},
	}}, "backup item operations list")
	require.Empty(t, errs)
	f := &forked{sc: &script{}, ops: itemvelero.NewBackupOperations(opts...),
		req: ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: backup.Name}}}
	f.side = newSide(t, f.sc, backup, location())
	require.NoError(t, f.side.bs.PutBackupItemOperations(backup.Name, bytes.NewReader(file.Bytes())))
	f.env = itemvelero.BackupEnv{Client: f.side.client, Logger: quiet(), NewPluginManager: f.side.newPluginManager,
		BackupStoreGetter: f.side.getter, Metrics: metrics.NewServerMetrics()}
	return f
}

// reconcile runs one reconcile and returns its error and the backup's status after it.
func (f *forked) reconcile(t *testing.T) (velerov1api.BackupStatus, error) {
	t.Helper()
	_, err := f.ops.Reconcile(context.Background(), f.env, f.req)
	got := &velerov1api.Backup{}
	require.NoError(t, f.side.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "backup-1"}, got))
	return got.Status, err
}

// file returns the backup's itemoperations file in the bucket, decompressed.
func (f *forked) file(t *testing.T) string {
	return f.side.bucket(t)["backups/backup-1/backup-1-itemoperations.json.gz"]
}

// TestForkOptions runs the bridge's backup operations controller, as a fork builds it
// with options (NewBackupOperations), over Velero's BackupStore, client and mocked
// plugins: without options a plugin that restarts fails its operation, as in Velero,
// and with a retry policy the next reconcile finds it done; a stall timeout fails an
// operation whose report stops moving (Velero issue #9674) at the end of its window,
// where Velero waits for the whole itemOperationTimeout; an invalid option fails
// every reconcile with an error and changes nothing.
func TestForkOptions(t *testing.T) {
	t.Run("no options: a transient error fails the operation", func(t *testing.T) {
		f := newForked(t, "op-unavailable")
		st, err := f.reconcile(t)
		require.NoError(t, err)
		require.Equal(t, velerov1api.BackupPhaseFinalizingPartiallyFailed, st.Phase)
		require.Equal(t, 1, st.BackupItemOperationsFailed)
		require.Contains(t, f.file(t), `"error":"rpc error: code = Unavailable desc = connection error: plugin restarting"`)
	})
	t.Run("a retry policy: the next reconcile asks again", func(t *testing.T) {
		f := newForked(t, "op-unavailable", monitor.WithRetryPolicy(monitor.RetryPolicy{MaxAttempts: 3}))
		before := f.side.raw()
		st, err := f.reconcile(t)
		require.NoError(t, err)
		require.Equal(t, velerov1api.BackupPhaseWaitingForPluginOperations, st.Phase)
		require.Zero(t, st.BackupItemOperationsFailed+st.Errors)
		require.Equal(t, before, f.side.raw(), "a retried error uploads nothing")
		ops, err := f.ops.Store().ListOperations(context.Background(), operations.Owner{Kind: phase.Backup, Name: "backup-1", UID: "uid-1"}, operations.OperationFilter{})
		require.NoError(t, err)
		require.Len(t, ops, 1)
		require.Equal(t, 1, ops[0].Monitor.Attempts)

		f.sc.next()
		st, err = f.reconcile(t)
		require.NoError(t, err)
		require.Equal(t, velerov1api.BackupPhaseFinalizing, st.Phase)
		require.Equal(t, 1, st.BackupItemOperationsCompleted)
		require.Zero(t, st.BackupItemOperationsFailed+st.Errors)
	})
	t.Run("a stall timeout: failed at the end of the window", func(t *testing.T) {
		clk := clocktest.NewClock(time.Now())
		const window = 30 * time.Minute
		f := newForked(t, "op-stuck", monitor.WithClock(clk), monitor.WithActionStallTimeout(action, window))
		st, err := f.reconcile(t)
		require.NoError(t, err)
		require.Equal(t, velerov1api.BackupPhaseWaitingForPluginOperations, st.Phase)
		start := clk.Now()
		f.side.calls()

		clk.Advance(window - time.Nanosecond)
		st, err = f.reconcile(t)
		require.NoError(t, err)
		require.Equal(t, velerov1api.BackupPhaseWaitingForPluginOperations, st.Phase, "a nanosecond before the window ends")
		require.NotContains(t, f.side.calls(), "Cancel(op-stuck)")

		clk.Advance(time.Nanosecond)
		st, err = f.reconcile(t)
		require.NoError(t, err)
		require.Equal(t, velerov1api.BackupPhaseFinalizingPartiallyFailed, st.Phase)
		require.Equal(t, 1, st.BackupItemOperationsFailed)
		require.Equal(t, 1, st.Errors)
		require.Contains(t, f.side.calls(), "Cancel(op-stuck)", "the plugin is told to stop")
		layout := "15:04:05Z07:00" // the time alone when the window ends on the day it began
		if start.UTC().Format(time.DateOnly) != clk.Now().UTC().Format(time.DateOnly) {
			layout = time.RFC3339
		}
		require.Contains(t, f.file(t), `"error":"no progress for 30m0s: last 10 of 30 Bytes at `+start.UTC().Format(layout)+`"`)
	})
	t.Run("an invalid option: every reconcile fails, nothing changes", func(t *testing.T) {
		f := newForked(t, "op-done", monitor.WithRetryPolicy(monitor.RetryPolicy{InitialInterval: time.Second}))
		before := f.side.raw()
		for range 2 {
			st, err := f.reconcile(t)
			require.ErrorIs(t, err, operations.ErrInvalid)
			require.Equal(t, velerov1api.BackupPhaseWaitingForPluginOperations, st.Phase)
			require.Equal(t, before, f.side.raw())
		}
		require.NotContains(t, fmt.Sprint(f.side.calls()), "Progress", "no plugin is called")
	})
}
