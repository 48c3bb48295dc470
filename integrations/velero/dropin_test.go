package velero_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	velerov1api "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"
	"github.com/vmware-tanzu/velero/pkg/builder"
	"github.com/vmware-tanzu/velero/pkg/itemoperation"
	"github.com/vmware-tanzu/velero/pkg/kuberesource"
	persistencemocks "github.com/vmware-tanzu/velero/pkg/persistence/mocks"
	pluginmocks "github.com/vmware-tanzu/velero/pkg/plugin/mocks"
	vplugin "github.com/vmware-tanzu/velero/pkg/plugin/velero"
	biamocks "github.com/vmware-tanzu/velero/pkg/plugin/velero/mocks/backupitemaction/v2"
	riamocks "github.com/vmware-tanzu/velero/pkg/plugin/velero/mocks/restoreitemaction/v2"

	"github.com/itemops/itemops/integrations/velero"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/memstore"
)

// mainRunOps returns the statuses of a main run's operations, one per ID of
// mainRunIDs: all New, created now.
func mainRunOps() []itemoperation.OperationStatus {
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	var out []itemoperation.OperationStatus
	for range 5 {
		out = append(out, itemoperation.OperationStatus{Phase: itemoperation.OperationPhaseNew, Created: &now})
	}
	return out
}

var mainRunIDs = []string{"done", "errs", "reports", "runs", "missing"}

func mainRunProgress(id string) (vplugin.OperationProgress, error) {
	switch id {
	case "done":
		return vplugin.OperationProgress{Completed: true}, nil
	case "errs":
		return vplugin.OperationProgress{}, errors.New("rpc error: boom")
	case "reports":
		return vplugin.OperationProgress{Completed: true, Err: "quota exceeded"}, nil
	}
	return vplugin.OperationProgress{NCompleted: 1, NTotal: 2, Started: testNow}, nil
}

// TestMainRunProgress checks what the shims of getBackupItemOperationProgress and
// getRestoreItemOperationProgress return to Velero's main-run controllers: whether
// operations still run, whether any changed, the totals, and Velero's error texts (with
// the plugin's name for a backup), and that the records are updated in place.
func TestMainRunProgress(t *testing.T) {
	plugins := &pluginmocks.Manager{}
	bia := &biamocks.BackupItemAction{}
	ria := &riamocks.RestoreItemAction{}
	bia.On("Name").Return("velero.io/bia")
	bia.On("Progress", mock.Anything, mock.Anything).Return(
		func(id string, _ *velerov1api.Backup) vplugin.OperationProgress {
			p, _ := mainRunProgress(id)
			return p
		},
		func(id string, _ *velerov1api.Backup) error { _, err := mainRunProgress(id); return err })
	ria.On("Progress", mock.Anything, mock.Anything).Return(
		func(id string, _ *velerov1api.Restore) vplugin.OperationProgress {
			p, _ := mainRunProgress(id)
			return p
		},
		func(id string, _ *velerov1api.Restore) error { _, err := mainRunProgress(id); return err })
	plugins.On("GetBackupItemActionV2", "velero.io/bia").Return(bia, nil)
	plugins.On("GetRestoreItemActionV2", "velero.io/bia").Return(ria, nil)
	missing := errors.New(`unable to get valid BackupItemActionV2 for "velero.io/gone"`)
	plugins.On("GetBackupItemActionV2", "velero.io/gone").Return(nil, missing)
	plugins.On("GetRestoreItemActionV2", "velero.io/gone").Return(nil, missing)
	res := vplugin.ResourceIdentifier{GroupResource: kuberesource.Pods, Namespace: "ns", Name: "p"}
	actionOf := func(id string) string {
		if id == "missing" {
			return "velero.io/gone"
		}
		return "velero.io/bia"
	}
	wantPhases := []itemoperation.OperationPhase{itemoperation.OperationPhaseCompleted, itemoperation.OperationPhaseFailed,
		itemoperation.OperationPhaseFailed, itemoperation.OperationPhaseInProgress, itemoperation.OperationPhaseFailed}

	t.Run("backup", func(t *testing.T) {
		backup := builder.ForBackup("velero", "b").ItemOperationTimeout(time.Hour).ObjectMeta(builder.WithUID("u")).Result()
		var list []*itemoperation.BackupOperation
		for i, st := range mainRunOps() {
			list = append(list, &itemoperation.BackupOperation{Spec: itemoperation.BackupOperationSpec{BackupName: "b", BackupUID: "u",
				BackupItemAction: actionOf(mainRunIDs[i]), ResourceIdentifier: res, OperationID: mainRunIDs[i]}, Status: st})
		}
		inProgress, changes, completed, failed, errs := velero.BackupItemOperationProgress(backup, plugins, list)
		require.True(t, inProgress)
		require.True(t, changes)
		require.Equal(t, 1, completed)
		require.Equal(t, 3, failed)
		require.ElementsMatch(t, []string{"rpc error: boom, plugin: velero.io/bia", "quota exceeded, plugin: velero.io/bia",
			missing.Error() + ", plugin: unknown"}, errs)
		for i, op := range list {
			require.Equal(t, wantPhases[i], op.Status.Phase, op.Spec.OperationID)
		}
		require.Equal(t, "rpc error: boom", list[1].Status.Error)
		require.Equal(t, missing.Error(), list[4].Status.Error)
		require.True(t, list[3].Status.Started.Time.Equal(testNow))
		// As Velero's loop: one lookup per unfinished operation, whose action also names
		// the plugin in the error texts.
		plugins.AssertNumberOfCalls(t, "GetBackupItemActionV2", len(list))

		// A second check finds nothing new: the ended operations are counted, not checked.
		_, changes, completed, failed, errs = velero.BackupItemOperationProgress(backup, plugins, list[:3])
		require.False(t, changes)
		require.Equal(t, 1, completed)
		require.Equal(t, 2, failed)
		require.Empty(t, errs)
	})
	t.Run("restore", func(t *testing.T) {
		restore := builder.ForRestore("velero", "r").ItemOperationTimeout(time.Hour).ObjectMeta(builder.WithUID("u")).Result()
		var list []*itemoperation.RestoreOperation
		for i, st := range mainRunOps() {
			list = append(list, &itemoperation.RestoreOperation{Spec: itemoperation.RestoreOperationSpec{RestoreName: "r", RestoreUID: "u",
				RestoreItemAction: actionOf(mainRunIDs[i]), ResourceIdentifier: res, OperationID: mainRunIDs[i]}, Status: st})
		}
		inProgress, changes, completed, failed, errs := velero.RestoreItemOperationProgress(restore, plugins, list)
		require.True(t, inProgress)
		require.True(t, changes)
		require.Equal(t, 1, completed)
		require.Equal(t, 3, failed)
		require.ElementsMatch(t, []string{"rpc error: boom", "quota exceeded", missing.Error()}, errs, "a restore's texts name no plugin, as in Velero")
		plugins.AssertNumberOfCalls(t, "GetRestoreItemActionV2", len(list))
		for i, op := range list {
			require.Equal(t, wantPhases[i], op.Status.Phase, op.Spec.OperationID)
		}
	})
	t.Run("a fork's options", func(t *testing.T) {
		backup := builder.ForBackup("velero", "b").ItemOperationTimeout(time.Hour).ObjectMeta(builder.WithUID("u")).Result()
		newList := func(sts []itemoperation.OperationStatus) []*itemoperation.BackupOperation {
			var list []*itemoperation.BackupOperation
			for i, st := range sts {
				list = append(list, &itemoperation.BackupOperation{Spec: itemoperation.BackupOperationSpec{BackupName: "b", BackupUID: "u",
					BackupItemAction: actionOf(mainRunIDs[i]), ResourceIdentifier: res, OperationID: mainRunIDs[i]}, Status: st})
			}
			return list
		}

		// A retry policy keeps the operations whose Progress errs, or whose plugin is
		// missing, unfinished: the operations controller asks again.
		list := newList(mainRunOps())
		inProgress, _, completed, failed, errs := velero.BackupItemOperationProgress(backup, plugins, list, monitor.WithRetryPolicy(retryAll(3)))
		require.True(t, inProgress)
		require.Equal(t, 1, completed)
		require.Equal(t, 1, failed)
		require.Equal(t, []string{"quota exceeded, plugin: velero.io/bia"}, errs)
		for _, i := range []int{1, 4} {
			require.Equal(t, itemoperation.OperationPhaseNew, list[i].Status.Phase, "%s: the error is retried", list[i].Spec.OperationID)
			require.Empty(t, list[i].Status.Error)
		}

		// An invalid option checks nothing and changes nothing.
		want := mainRunOps()
		list = newList(want)
		inProgress, changes, completed, failed, errs := velero.BackupItemOperationProgress(backup, plugins, list, monitor.WithStallTimeout(-time.Minute))
		require.True(t, inProgress)
		require.False(t, changes)
		require.Zero(t, completed+failed)
		require.Empty(t, errs)
		for i, op := range list {
			if diff := cmp.Diff(want[i], op.Status); diff != "" {
				t.Errorf("%s: status (-want +got):\n%s", op.Spec.OperationID, diff)
			}
		}
	})
	t.Run("no operations", func(t *testing.T) {
		backup := builder.ForBackup("velero", "b").Result()
		inProgress, changes, completed, failed, errs := velero.BackupItemOperationProgress(backup, plugins, nil)
		require.False(t, inProgress || changes)
		require.Zero(t, completed+failed)
		require.Empty(t, errs)
	})
}

// failingPuts is a store whose PutOperations fails while fail is set.
type failingPuts struct {
	operations.Store
	fail bool
}

func (s *failingPuts) PutOperations(ctx context.Context, o operations.Owner, ops []operations.Operation) error {
	if s.fail {
		return errors.New("disk full")
	}
	return s.Store.PutOperations(ctx, o, ops)
}

// TestLoadIsIdempotent checks that a second LoadBackup finds the run (no ErrExists, no
// read of the bucket), that a run whose operations could not be written stays New, so
// that a Monitor neither polls nor finalizes it, until a later LoadBackup writes them,
// that operations the file holds as Failed count as counted errors, and that a run of
// an earlier backup of the same name is replaced.
func TestLoadIsIdempotent(t *testing.T) {
	ctx := context.Background()
	created := metav1.NewTime(testNow)
	ops := []*itemoperation.BackupOperation{
		{Spec: itemoperation.BackupOperationSpec{BackupName: "b", BackupUID: "u1", BackupItemAction: "a", OperationID: "1"},
			Status: itemoperation.OperationStatus{Phase: itemoperation.OperationPhaseNew, Created: &created}},
		{Spec: itemoperation.BackupOperationSpec{BackupName: "b", BackupUID: "u1", BackupItemAction: "a", OperationID: "2"},
			Status: itemoperation.OperationStatus{Phase: itemoperation.OperationPhaseFailed, Error: "main run", Created: &created}},
	}
	bs := &persistencemocks.BackupStore{}
	bs.On("GetBackupItemOperations", "b").Return(ops, nil)
	backup := builder.ForBackup("velero", "b").ObjectMeta(builder.WithUID("u1")).
		Phase(velerov1api.BackupPhaseWaitingForPluginOperationsPartiallyFailed).Result()
	backup.Status.Errors = 1

	s := &failingPuts{Store: memstore.New(), fail: true}
	_, err := velero.LoadBackup(ctx, s, bs, backup)
	require.ErrorContains(t, err, "disk full")
	run, err := s.GetRun(ctx, operations.Owner{Kind: phase.Backup, Name: "b"})
	require.NoError(t, err)
	require.Equal(t, phase.New, run.Phase, "without its operations the run stays New")
	m := monitor.New(s, velero.NewResolver(&pluginmocks.Manager{}, velero.Objects{}))
	res, err := m.Poll(ctx, run.Owner)
	require.NoError(t, err)
	require.Equal(t, monitor.PollResult{Phase: phase.New}, res, "a Monitor leaves it alone")

	s.fail = false
	run, err = velero.LoadBackup(ctx, s, bs, backup)
	require.NoError(t, err)
	require.Equal(t, phase.WaitingForPluginOperationsPartiallyFailed, run.Phase)
	require.Equal(t, 1, run.Errors)
	require.Equal(t, 1, run.FailedOperations, "the main run's failed operation is already among the errors")
	stored, err := s.ListOperations(ctx, run.Owner, operations.OperationFilter{})
	require.NoError(t, err)
	require.Len(t, stored, 2)

	again, err := velero.LoadBackup(ctx, s, bs, backup)
	require.NoError(t, err, "a second load finds the run")
	if diff := cmp.Diff(run, again); diff != "" {
		t.Errorf("second load (-first +second):\n%s", diff)
	}
	bs.AssertNumberOfCalls(t, "GetBackupItemOperations", 2) // the failed load and the one that wrote

	// A backup deleted and made again under the same name is loaded afresh.
	remade := backup.DeepCopy()
	remade.UID = "u2"
	bs2 := &persistencemocks.BackupStore{}
	bs2.On("GetBackupItemOperations", "b").Return([]*itemoperation.BackupOperation{}, nil)
	fresh, err := velero.LoadBackup(ctx, s, bs2, remade)
	require.NoError(t, err)
	require.Equal(t, "u2", fresh.Owner.UID)
	stored, err = s.ListOperations(ctx, fresh.Owner, operations.OperationFilter{})
	require.NoError(t, err)
	require.Empty(t, stored, "the earlier backup's operations went with its run")
}

// TestLogger checks that the slog Logger the bridge gives a Monitor writes through
// Velero's logrus logger: levels, message, attributes and groups as fields, and the
// logger's level honoured.
func TestLogger(t *testing.T) {
	l, hook := logtest.NewNullLogger()
	l.SetLevel(logrus.InfoLevel)
	log := velero.Logger(l.WithField("controller", "backup-operations"))
	log.Debug("dropped")
	log.With("run", "Backup/b").WithGroup("op").Warn("progress error retried", "id", "1", slog.Group("call", "n", 2))
	log.Error("failed", "error", errors.New("boom"))
	entries := hook.AllEntries()
	require.Len(t, entries, 2)
	require.Equal(t, logrus.WarnLevel, entries[0].Level)
	require.Equal(t, "progress error retried", entries[0].Message)
	require.Equal(t, logrus.Fields{"controller": "backup-operations", "run": "Backup/b", "op.id": "1", "op.call.n": int64(2)}, entries[0].Data)
	require.Equal(t, logrus.ErrorLevel, entries[1].Level)
	require.EqualError(t, entries[1].Data["error"].(error), "boom")
	require.False(t, log.Enabled(context.Background(), slog.LevelDebug))
	velero.Logger(nil).Error("nowhere") // writes nothing, does not panic
}
