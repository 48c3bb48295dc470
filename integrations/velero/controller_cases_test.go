package velero_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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
	biav2 "github.com/vmware-tanzu/velero/pkg/plugin/velero/backupitemaction/v2"
	biamocks "github.com/vmware-tanzu/velero/pkg/plugin/velero/mocks/backupitemaction/v2"
	riamocks "github.com/vmware-tanzu/velero/pkg/plugin/velero/mocks/restoreitemaction/v2"
	riav2 "github.com/vmware-tanzu/velero/pkg/plugin/velero/restoreitemaction/v2"

	"github.com/itemops/itemops/clock/clocktest"
	"github.com/itemops/itemops/integrations/velero"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/operations/opsfile"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/memstore"
)

// controllerCase is one case of Velero's operations-controller tests
// (TestBackupOperationsReconcile, TestRestoreOperationsReconcile in
// pkg/controller/*_operations_controller_test.go), as facts: a run in a waiting phase
// with one New operation created now, a 60-minute operation timeout, and a plugin
// whose Progress reports completion (or not) with an error (or none); then the phase
// Velero's reconcile leaves the run in. The errors and operation phase are what
// Velero's getBackupItemOperationProgress / getRestoreItemOperationProgress record.
type controllerCase struct {
	name      string
	kind      phase.Kind
	start     phase.Phase
	completed bool
	err       string
	want      phase.Phase
}

var controllerCases = []controllerCase{
	{"WaitingForPluginOperations backup with completed operations is Finalizing",
		phase.Backup, phase.WaitingForPluginOperations, true, "", phase.Finalizing},
	{"WaitingForPluginOperations backup with incomplete operations is still incomplete",
		phase.Backup, phase.WaitingForPluginOperations, false, "", phase.WaitingForPluginOperations},
	{"WaitingForPluginOperations backup with completed failed operations is FinalizingPartiallyFailed",
		phase.Backup, phase.WaitingForPluginOperations, true, "failed", phase.FinalizingPartiallyFailed},
	{"WaitingForPluginOperationsPartiallyFailed backup with completed operations is FinalizingPartiallyFailed",
		phase.Backup, phase.WaitingForPluginOperationsPartiallyFailed, true, "", phase.FinalizingPartiallyFailed},
	{"WaitingForPluginOperationsPartiallyFailed backup with incomplete operations is still incomplete",
		phase.Backup, phase.WaitingForPluginOperationsPartiallyFailed, false, "", phase.WaitingForPluginOperationsPartiallyFailed},
	{"WaitingForPluginOperationsPartiallyFailed backup with completed failed operations is FinalizingPartiallyFailed",
		phase.Backup, phase.WaitingForPluginOperationsPartiallyFailed, true, "failed", phase.FinalizingPartiallyFailed},
	// Velero's restore cases are named "... is Completed" and "... is PartiallyFailed"
	// but expect Finalizing and FinalizingPartiallyFailed: restores finalize since 1.12.
	{"WaitingForPluginOperations restore with completed operations is Completed",
		phase.Restore, phase.WaitingForPluginOperations, true, "", phase.Finalizing},
	{"WaitingForPluginOperations restore with incomplete operations is still incomplete",
		phase.Restore, phase.WaitingForPluginOperations, false, "", phase.WaitingForPluginOperations},
	{"WaitingForPluginOperations restore with completed failed operations is PartiallyFailed",
		phase.Restore, phase.WaitingForPluginOperations, true, "failed", phase.FinalizingPartiallyFailed},
	{"WaitingForPluginOperationsPartiallyFailed restore with completed operations is PartiallyFailed",
		phase.Restore, phase.WaitingForPluginOperationsPartiallyFailed, true, "", phase.FinalizingPartiallyFailed},
	{"WaitingForPluginOperationsPartiallyFailed restore with incomplete operations is still incomplete",
		phase.Restore, phase.WaitingForPluginOperationsPartiallyFailed, false, "", phase.WaitingForPluginOperationsPartiallyFailed},
	{"WaitingForPluginOperationsPartiallyFailed restore with completed failed operations is PartiallyFailed",
		phase.Restore, phase.WaitingForPluginOperationsPartiallyFailed, true, "failed", phase.FinalizingPartiallyFailed},
}

// harness runs one Velero backup or restore through the bridge: the run is loaded from
// Velero's mocked BackupStore with velero.LoadBackup or LoadRestore, polled by a
// Monitor whose Resolver is a velero.Resolver over Velero's mocked plugin manager and
// item actions, and saved back with velero.Save.
type harness struct {
	store   *memstore.Store
	bs      *persistencemocks.BackupStore
	plugins *pluginmocks.Manager
	bia     *biamocks.BackupItemAction
	ria     *riamocks.RestoreItemAction
	clock   *clocktest.Clock
	backup  *velerov1api.Backup
	restore *velerov1api.Restore
	owner   operations.Owner
	opID    string
	action  string
	files   map[string][]byte // uploaded itemoperations files, by run name
}

var testNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func newHarness(t *testing.T, kind phase.Kind, start phase.Phase, created time.Time) *harness {
	t.Helper()
	h := &harness{
		store: memstore.New(), bs: &persistencemocks.BackupStore{}, plugins: &pluginmocks.Manager{},
		bia: &biamocks.BackupItemAction{}, ria: &riamocks.RestoreItemAction{},
		clock: clocktest.NewClock(testNow), opID: "operation-1", action: "velero.io/test",
		files: map[string][]byte{},
	}
	metaCreated := metav1.NewTime(created)
	status := itemoperation.OperationStatus{Phase: itemoperation.OperationPhaseNew, Created: &metaCreated}
	id := vplugin.ResourceIdentifier{GroupResource: kuberesource.Pods, Namespace: "ns-1", Name: "pod-1"}
	record := func(name string, r io.Reader) error {
		data, err := io.ReadAll(r)
		h.files[name] = data
		return err
	}
	ctx := context.Background()
	var err error
	switch kind {
	case phase.Backup:
		h.backup = builder.ForBackup(velerov1api.DefaultNamespace, "backup-1").StorageLocation("default").
			ItemOperationTimeout(60 * time.Minute).ObjectMeta(builder.WithUID("uid-1")).
			Phase(velerov1api.BackupPhase(start)).Result()
		h.bs.On("GetBackupItemOperations", "backup-1").Return([]*itemoperation.BackupOperation{{
			Spec: itemoperation.BackupOperationSpec{BackupName: "backup-1", BackupUID: "uid-1",
				BackupItemAction: h.action, ResourceIdentifier: id, OperationID: h.opID},
			Status: status,
		}}, nil)
		h.bs.On("PutBackupItemOperations", "backup-1", mock.Anything).Return(record)
		h.plugins.On("GetBackupItemActionV2", h.action).Return(h.bia, nil)
		h.bia.On("Name").Return(h.action)
		var run operations.Run
		run, err = velero.LoadBackup(ctx, h.store, h.bs, h.backup)
		h.owner = run.Owner
	case phase.Restore:
		h.restore = builder.ForRestore(velerov1api.DefaultNamespace, "restore-1").Backup("backup-1").
			ItemOperationTimeout(60 * time.Minute).ObjectMeta(builder.WithUID("uid-1")).
			Phase(velerov1api.RestorePhase(start)).Result()
		h.bs.On("GetRestoreItemOperations", "restore-1").Return([]*itemoperation.RestoreOperation{{
			Spec: itemoperation.RestoreOperationSpec{RestoreName: "restore-1", RestoreUID: "uid-1",
				RestoreItemAction: h.action, ResourceIdentifier: id, OperationID: h.opID},
			Status: status,
		}}, nil)
		h.bs.On("PutRestoreItemOperations", "restore-1", mock.Anything).Return(record)
		h.plugins.On("GetRestoreItemActionV2", h.action).Return(h.ria, nil)
		var run operations.Run
		run, err = velero.LoadRestore(ctx, h.store, h.bs, h.restore)
		h.owner = run.Owner
	}
	require.NoError(t, err)
	return h
}

// onProgress sets what the plugin's Progress returns.
func (h *harness) onProgress(p vplugin.OperationProgress, err error) {
	if h.owner.Kind == phase.Backup {
		h.bia.On("Progress", h.opID, h.backup).Return(p, err)
	} else {
		h.ria.On("Progress", h.opID, h.restore).Return(p, err)
	}
}

func (h *harness) resolver() *velero.Resolver {
	return velero.NewResolver(h.plugins, velero.Objects{
		Backup: func(_ context.Context, o operations.Owner) (*velerov1api.Backup, error) {
			if o.Name != h.backup.Name {
				return nil, errors.New("no such backup")
			}
			return h.backup, nil
		},
		Restore: func(_ context.Context, o operations.Owner) (*velerov1api.Restore, error) {
			if o.Name != h.restore.Name {
				return nil, errors.New("no such restore")
			}
			return h.restore, nil
		},
	})
}

// retryAll is a retry policy that retries every error, at every poll, until n errors in
// a row.
func retryAll(n int) monitor.RetryPolicy {
	return monitor.RetryPolicy{MaxAttempts: n, Retryable: func(error) bool { return true }}
}

// poll runs one Monitor pass over the run, as one reconcile of Velero's controller,
// then uploads the file, and returns what the pass found and the operation after it.
func (h *harness) poll(t *testing.T, opts ...monitor.Option) (monitor.PollResult, operations.Run, operations.Operation) {
	t.Helper()
	ctx := context.Background()
	m := monitor.New(h.store, h.resolver(), append([]monitor.Option{monitor.WithClock(h.clock)}, opts...)...)
	res, err := m.Poll(ctx, h.owner)
	require.NoError(t, err)
	require.NoError(t, velero.Save(ctx, h.store, h.bs, h.owner))
	run, err := h.store.GetRun(ctx, h.owner)
	require.NoError(t, err)
	op, err := h.store.GetOperation(ctx, h.owner, h.opID)
	require.NoError(t, err)
	return res, run, op
}

// TestVeleroControllerCases runs the cases of Velero's operations-controller tests
// through the bridge: each ends in the phase Velero's reconcile gives, with Velero's
// error count and operation phase, and the uploaded file says what the store holds.
func TestVeleroControllerCases(t *testing.T) {
	for _, tc := range controllerCases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.kind, tc.start, testNow)
			h.onProgress(vplugin.OperationProgress{Completed: tc.completed, Err: tc.err}, nil)
			res, run, op := h.poll(t)

			require.Equal(t, tc.want, run.Phase, "run phase")
			wantOp, wantErrors := operations.OperationNew, 0
			switch {
			case tc.completed && tc.err != "":
				wantOp, wantErrors = operations.OperationFailed, 1
			case tc.completed:
				wantOp = operations.OperationCompleted
			}
			require.Equal(t, wantOp, op.Status.Phase, "operation phase")
			require.Equal(t, tc.err, op.Status.Error, "operation error")
			require.Equal(t, wantErrors, run.Errors, "run errors (Velero: status.errors += the pass's errors)")
			require.Equal(t, wantErrors, res.Failed, "failed operations (Velero: itemOperationsFailed)")
			require.True(t, op.Status.Created.Equal(testNow), "created time kept: %v", op.Status.Created)

			got, err := opsfile.Decode(bytes.NewReader(h.files[h.owner.Name]))
			require.NoError(t, err)
			if diff := cmp.Diff([]operations.Operation{op}, got); diff != "" {
				t.Errorf("uploaded file (-stored +uploaded):\n%s", diff)
			}
		})
	}
}

// TestVeleroControllerRules checks, through the bridge, the rules of Velero's
// getBackupItemOperationProgress that its table cases do not reach: the timeout with
// its Cancel, a reported start, a Progress error, a plugin the manager does not have,
// and Velero's two plugin errors mapped to itemops's.
func TestVeleroControllerRules(t *testing.T) {
	started := testNow.Add(-time.Minute)
	for _, kind := range []phase.Kind{phase.Backup, phase.Restore} {
		t.Run(string(kind)+"/timed out: Cancel, then Failed", func(t *testing.T) {
			h := newHarness(t, kind, phase.WaitingForPluginOperations, testNow.Add(-61*time.Minute))
			h.onProgress(vplugin.OperationProgress{}, nil)
			h.bia.On("Cancel", h.opID, mock.Anything).Return(nil)
			h.ria.On("Cancel", h.opID, mock.Anything).Return(nil)
			_, run, op := h.poll(t)
			require.Equal(t, operations.OperationFailed, op.Status.Phase)
			require.Equal(t, "Asynchronous action timed out", op.Status.Error)
			require.Equal(t, phase.FinalizingPartiallyFailed, run.Phase)
			if kind == phase.Backup {
				h.bia.AssertCalled(t, "Cancel", h.opID, h.backup)
			} else {
				h.ria.AssertCalled(t, "Cancel", h.opID, h.restore)
			}
		})
		t.Run(string(kind)+"/a reported start moves New to InProgress", func(t *testing.T) {
			h := newHarness(t, kind, phase.WaitingForPluginOperations, testNow)
			h.onProgress(vplugin.OperationProgress{NCompleted: 1, NTotal: 3, OperationUnits: "bytes", Description: "copying", Started: started, Updated: started}, nil)
			_, run, op := h.poll(t)
			want := operations.Status{Phase: operations.OperationInProgress, NCompleted: 1, NTotal: 3,
				OperationUnits: "bytes", Description: "copying", Created: testNow, Started: started, Updated: started}
			if diff := cmp.Diff(want, op.Status); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			require.Equal(t, phase.WaitingForPluginOperations, run.Phase)
		})
		t.Run(string(kind)+"/a Progress error fails the operation with its text", func(t *testing.T) {
			h := newHarness(t, kind, phase.WaitingForPluginOperations, testNow)
			h.onProgress(vplugin.OperationProgress{}, errors.New("rpc error: connection refused"))
			_, run, op := h.poll(t)
			require.Equal(t, operations.OperationFailed, op.Status.Phase)
			require.Equal(t, "rpc error: connection refused", op.Status.Error)
			require.Equal(t, phase.FinalizingPartiallyFailed, run.Phase)
		})
	}
	t.Run("a plugin the manager does not have fails the operation with its error", func(t *testing.T) {
		h := newHarness(t, phase.Backup, phase.WaitingForPluginOperations, testNow)
		h.plugins = &pluginmocks.Manager{}
		h.plugins.On("GetBackupItemActionV2", h.action).Return(nil, errors.New("unable to get valid BackupItemActionV2 for \"velero.io/test\""))
		_, run, op := h.poll(t)
		require.Equal(t, operations.OperationFailed, op.Status.Phase)
		require.Equal(t, "unable to get valid BackupItemActionV2 for \"velero.io/test\"", op.Status.Error)
		require.Equal(t, 1, run.Errors)
	})
}

// TestResolverMapsVeleroPluginErrors checks that Velero's two plugin errors, from
// Progress and Cancel of backup and restore actions, match itemops's sentinels and keep
// the plugin's text, and that they fail the operation even under a retry policy that retries
// every other Progress error.
func TestResolverMapsVeleroPluginErrors(t *testing.T) {
	cases := []struct {
		name     string
		biaErr   error
		riaErr   error
		sentinel error
	}{
		{"AsyncOperationsNotSupportedError", biav2.AsyncOperationsNotSupportedError(), riav2.AsyncOperationsNotSupportedError(), operations.ErrAsyncOperationsNotSupported},
		{"InvalidOperationIDError", biav2.InvalidOperationIDError("operation-1"), riav2.InvalidOperationIDError("operation-1"), operations.ErrInvalidOperationID},
	}
	for _, tc := range cases {
		for _, kind := range []phase.Kind{phase.Backup, phase.Restore} {
			t.Run(tc.name+"/"+string(kind), func(t *testing.T) {
				h := newHarness(t, kind, phase.WaitingForPluginOperations, testNow)
				pluginErr := tc.biaErr
				if kind == phase.Restore {
					pluginErr = tc.riaErr
				}
				h.onProgress(vplugin.OperationProgress{}, pluginErr)
				h.bia.On("Cancel", h.opID, mock.Anything).Return(pluginErr)
				h.ria.On("Cancel", h.opID, mock.Anything).Return(pluginErr)

				tr, err := h.resolver().Resolve(h.action)
				require.NoError(t, err)
				op, err := h.store.GetOperation(context.Background(), h.owner, h.opID)
				require.NoError(t, err)
				_, perr := tr.Progress(context.Background(), op)
				cerr := tr.Cancel(context.Background(), op)
				for _, err := range []error{perr, cerr} {
					require.ErrorIs(t, err, tc.sentinel)
					require.ErrorIs(t, err, pluginErr)
					require.EqualError(t, err, pluginErr.Error())
					var oe *operations.OperationError
					require.ErrorAs(t, err, &oe)
					require.Equal(t, operations.OperationError{Action: h.action, OperationID: h.opID, Err: tc.sentinel}, *oe)
				}

				_, _, got := h.poll(t, monitor.WithRetryPolicy(retryAll(4)))
				require.Equal(t, operations.OperationFailed, got.Status.Phase, "a retry policy does not apply to %s", tc.name)
				require.Equal(t, pluginErr.Error(), got.Status.Error)
			})
		}
	}
	t.Run("other errors are returned as they are", func(t *testing.T) {
		h := newHarness(t, phase.Backup, phase.WaitingForPluginOperations, testNow)
		plain := errors.New("operation ID operation-2 is invalid") // another operation's ID
		h.onProgress(vplugin.OperationProgress{}, plain)
		tr, _ := h.resolver().Resolve(h.action)
		op, _ := h.store.GetOperation(context.Background(), h.owner, h.opID)
		_, err := tr.Progress(context.Background(), op)
		require.Same(t, plain, err)
		_, _, got := h.poll(t, monitor.WithRetryPolicy(retryAll(2)))
		require.Equal(t, operations.OperationNew, got.Status.Phase, "one plain error is retried")
	})
	t.Run("a cancelled context calls no plugin", func(t *testing.T) {
		h := newHarness(t, phase.Backup, phase.WaitingForPluginOperations, testNow)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		tr, _ := h.resolver().Resolve(h.action)
		op, _ := h.store.GetOperation(context.Background(), h.owner, h.opID)
		_, err := tr.Progress(ctx, op)
		require.ErrorIs(t, err, context.Canceled)
		require.ErrorIs(t, tr.Cancel(ctx, op), context.Canceled)
		h.bia.AssertNotCalled(t, "Progress", mock.Anything, mock.Anything)
		h.plugins.AssertNotCalled(t, "GetBackupItemActionV2", mock.Anything)
	})
}
