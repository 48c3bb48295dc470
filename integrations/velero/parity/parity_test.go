package parity

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	velerov1api "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"
	"github.com/vmware-tanzu/velero/pkg/builder"
	"github.com/vmware-tanzu/velero/pkg/controller"
	"github.com/vmware-tanzu/velero/pkg/itemoperation"
	"github.com/vmware-tanzu/velero/pkg/itemoperationmap"
	"github.com/vmware-tanzu/velero/pkg/kuberesource"
	"github.com/vmware-tanzu/velero/pkg/metrics"
	"github.com/vmware-tanzu/velero/pkg/persistence"
	"github.com/vmware-tanzu/velero/pkg/plugin/clientmgmt"
	pluginmocks "github.com/vmware-tanzu/velero/pkg/plugin/mocks"
	vplugin "github.com/vmware-tanzu/velero/pkg/plugin/velero"
	objectmocks "github.com/vmware-tanzu/velero/pkg/plugin/velero/mocks"
	biamocks "github.com/vmware-tanzu/velero/pkg/plugin/velero/mocks/backupitemaction/v2"
	riamocks "github.com/vmware-tanzu/velero/pkg/plugin/velero/mocks/restoreitemaction/v2"
	"github.com/vmware-tanzu/velero/pkg/util/encode"

	itemvelero "github.com/itemops/itemops/integrations/velero"
	"github.com/itemops/itemops/operations"
)

const (
	ns     = velerov1api.DefaultNamespace
	action = "velero.io/test-action"
	// missing is an action the plugin manager does not have.
	missing = "velero.io/missing-action"
	bucket  = "velero-bucket"
)

// script is what the plugin reports for each operation at each step: the operations
// are "done" (completes at once), "errs" (Progress fails), "reports" (completes with an
// error), "runs" (makes progress at step 0, then at step 1, and completes at step 2),
// "slow" (makes progress until step 4, and completes at step 5), "stuck" (makes
// progress and never completes) and "unavailable" (fails with gRPC's Unavailable at
// step 0, as a plugin that restarts, and completes after). Cancel fails for an operation
// whose ID ends in "cancel-fails".
type script struct {
	mu   sync.Mutex
	step int
}

var started = time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)

func (s *script) progress(id string) (vplugin.OperationProgress, error) {
	s.mu.Lock()
	step := s.step
	s.mu.Unlock()
	switch {
	case strings.HasSuffix(id, "done"):
		return vplugin.OperationProgress{Completed: true, NCompleted: 3, NTotal: 3, OperationUnits: "items"}, nil
	case strings.HasSuffix(id, "errs"):
		return vplugin.OperationProgress{}, errors.New("rpc error: code = Unavailable desc = boom")
	case strings.HasSuffix(id, "unavailable") && step == 0:
		return vplugin.OperationProgress{}, status.Error(codes.Unavailable, "connection error: plugin restarting")
	case strings.HasSuffix(id, "unavailable"):
		return vplugin.OperationProgress{Completed: true, NCompleted: 3, NTotal: 3, OperationUnits: "items"}, nil
	case strings.HasSuffix(id, "reports"):
		return vplugin.OperationProgress{Completed: true, Err: `snapshot "s-1" failed: <quota & limits>`, Started: started}, nil
	}
	p := vplugin.OperationProgress{NCompleted: int64(10 * (step + 1)), NTotal: 30, OperationUnits: "Bytes",
		Description: "copying", Started: started, Updated: started.Add(time.Duration(step+1) * time.Minute)}
	switch {
	case strings.HasSuffix(id, "runs"):
		p.Completed = step >= 2
	case strings.HasSuffix(id, "slow"):
		p.NTotal = 60
		p.Completed = step >= 5
	}
	return p, nil
}

func (s *script) cancel(id string) error {
	if strings.HasSuffix(id, "cancel-fails") {
		return errors.New("rpc error: code = Internal desc = cannot cancel")
	}
	return nil
}

func (s *script) next() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.step++
}

// side is one controller and all it touches: a fake API server, a bucket, plugins.
type side struct {
	client  client.Client
	objects map[string][]byte // the bucket, by key
	mu      sync.Mutex
	plugins *pluginmocks.Manager
	bia     *biamocks.BackupItemAction
	ria     *riamocks.RestoreItemAction
	seen    [3]int // how many calls of plugins, bia and ria the last side.calls saw
	bs      persistence.BackupStore
	getter  persistence.ObjectBackupStoreGetter
}

func newSide(t *testing.T, sc *script, objs ...runtime.Object) *side {
	t.Helper()
	s := &side{objects: map[string][]byte{}, plugins: &pluginmocks.Manager{}}
	scheme := runtime.NewScheme()
	require.NoError(t, velerov1api.AddToScheme(scheme))
	s.client = fake.NewClientBuilder().WithScheme(scheme).WithRuntimeObjects(objs...).Build()

	store := &objectmocks.ObjectStore{}
	store.On("Init", mock.Anything).Return(nil)
	store.On("PutObject", bucket, mock.Anything, mock.Anything).Return(func(_, key string, body io.Reader) error {
		data, err := io.ReadAll(body)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.objects[key] = data
		return err
	})
	store.On("ObjectExists", bucket, mock.Anything).Return(
		func(_, key string) bool { s.mu.Lock(); defer s.mu.Unlock(); _, ok := s.objects[key]; return ok },
		func(_, _ string) error { return nil })
	store.On("GetObject", bucket, mock.Anything).Return(
		func(_, key string) io.ReadCloser {
			s.mu.Lock()
			defer s.mu.Unlock()
			return io.NopCloser(bytes.NewReader(s.objects[key]))
		},
		func(_, _ string) error { return nil })

	bia := &biamocks.BackupItemAction{}
	bia.On("Name").Return(action)
	bia.On("Progress", mock.Anything, mock.Anything).Return(
		func(id string, _ *velerov1api.Backup) vplugin.OperationProgress { p, _ := sc.progress(id); return p },
		func(id string, _ *velerov1api.Backup) error { _, err := sc.progress(id); return err })
	ria := &riamocks.RestoreItemAction{}
	ria.On("Name").Return(action)
	ria.On("Progress", mock.Anything, mock.Anything).Return(
		func(id string, _ *velerov1api.Restore) vplugin.OperationProgress { p, _ := sc.progress(id); return p },
		func(id string, _ *velerov1api.Restore) error { _, err := sc.progress(id); return err })
	bia.On("Cancel", mock.Anything, mock.Anything).Return(func(id string, _ *velerov1api.Backup) error { return sc.cancel(id) })
	ria.On("Cancel", mock.Anything, mock.Anything).Return(func(id string, _ *velerov1api.Restore) error { return sc.cancel(id) })
	s.bia, s.ria = bia, ria
	s.plugins.On("GetObjectStore", "memory").Return(store, nil)
	s.plugins.On("GetBackupItemActionV2", action).Return(bia, nil)
	s.plugins.On("GetRestoreItemActionV2", action).Return(ria, nil)
	s.plugins.On("GetBackupItemActionV2", missing).Return(nil, errors.New(`unable to get valid BackupItemActionV2 for "velero.io/missing-action"`))
	s.plugins.On("GetRestoreItemActionV2", missing).Return(nil, errors.New(`unable to get valid RestoreItemActionV2 for "velero.io/missing-action"`))
	s.plugins.On("CleanupClients").Return()

	s.getter = persistence.NewObjectBackupStoreGetter(nil)
	var err error
	s.bs, err = s.getter.Get(location(), s.plugins, logrus.New())
	require.NoError(t, err)
	return s
}

func (s *side) newPluginManager(logrus.FieldLogger) clientmgmt.Manager { return s.plugins }

// calls returns the calls of the plugin manager and of the item actions made since
// the last call of calls, sorted, so that two sides' calls compare as multisets: the
// Monitor checks a run's operations concurrently, Velero one after another. Each is
// written as the method and its string arguments (a plugin's name, an operation's ID),
// without the Backup or Restore object. Name, which Velero calls to build the error
// texts that a reconcile only counts, is left out.
func (s *side) calls() []string {
	var out []string
	for i, m := range []*mock.Mock{&s.plugins.Mock, &s.bia.Mock, &s.ria.Mock} {
		for _, c := range m.Calls[s.seen[i]:] {
			if c.Method == "Name" {
				continue
			}
			var args []string
			for _, a := range c.Arguments {
				if a, ok := a.(string); ok {
					args = append(args, a)
				}
			}
			out = append(out, c.Method+"("+strings.Join(args, ", ")+")")
		}
		s.seen[i] = len(m.Calls)
	}
	sort.Strings(out)
	return out
}

// bucket returns the bucket's objects, the itemoperations files decompressed, so that
// a difference shows as text; the compressed bytes are compared by sameBytes.
func (s *side) bucket(t *testing.T) map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]string{}
	for k, v := range s.objects {
		if strings.HasSuffix(k, ".json.gz") {
			r, err := gzip.NewReader(bytes.NewReader(v))
			require.NoError(t, err)
			data, err := io.ReadAll(r)
			require.NoError(t, err)
			v = data
		}
		out[k] = string(v)
	}
	return out
}

func (s *side) raw() map[string][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string][]byte, len(s.objects))
	for k, v := range s.objects {
		out[k] = append([]byte(nil), v...)
	}
	return out
}

func location() *velerov1api.BackupStorageLocation {
	return builder.ForBackupStorageLocation(ns, "default").Provider("memory").Bucket(bucket).Result()
}

func quiet() logrus.FieldLogger {
	l := logrus.New()
	l.Out = io.Discard
	return l
}

// operationIDs are the IDs of a run's operations, one per kind of script.
func operationIDs() []string { return []string{"op-done", "op-errs", "op-reports", "op-runs"} }

// created is the creation time of the operations: a minute ago, as Velero times them
// out by the real clock.
func created() *metav1.Time {
	t := metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second))
	return &t
}

func id() vplugin.ResourceIdentifier {
	return vplugin.ResourceIdentifier{GroupResource: kuberesource.Pods, Namespace: "ns-1", Name: "pod-1"}
}

// compare requires both sides to have the same statuses and bucket after a step.
func compare(t *testing.T, step string, velero, itemops *side, key client.ObjectKey, obj func() client.Object, status func(client.Object) any) {
	t.Helper()
	vo, iobj := obj(), obj()
	require.NoError(t, velero.client.Get(context.Background(), key, vo))
	require.NoError(t, itemops.client.Get(context.Background(), key, iobj))
	if diff := cmp.Diff(status(vo), status(iobj)); diff != "" {
		t.Errorf("%s: status (-velero +itemops):\n%s", step, diff)
	}
	if diff := cmp.Diff(velero.bucket(t), itemops.bucket(t)); diff != "" {
		t.Errorf("%s: bucket (-velero +itemops):\n%s", step, diff)
	}
	// Built with the same Go release, even the compressed bytes are Velero's.
	vr, ir := velero.raw(), itemops.raw()
	keys := make([]string, 0, len(vr))
	for k := range vr {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !bytes.Equal(vr[k], ir[k]) {
			t.Errorf("%s: %s: compressed bytes differ", step, k)
		}
	}
}

// errorsGauge returns the value of Velero's backup_items_errors metric in m for the
// schedule named schedule, and whether m has that series. ServerMetrics registers its
// collectors only with Prometheus's default registerer, so a registry of the test's own
// takes its place for the call.
func errorsGauge(t *testing.T, m *metrics.ServerMetrics, schedule string) (float64, bool) {
	t.Helper()
	reg := prometheus.NewRegistry()
	saved := prometheus.DefaultRegisterer
	prometheus.DefaultRegisterer = reg
	m.RegisterAllMetrics()
	prometheus.DefaultRegisterer = saved
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if !strings.HasSuffix(f.GetName(), "backup_items_errors") {
			continue
		}
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetValue() == schedule {
					return s.GetGauge().GetValue(), true
				}
			}
		}
	}
	return 0, false
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestBackupParity runs a waiting backup whose operations complete, fail by error, fail
// by the plugin's report and keep running, through Velero's backup operations
// controller and through the bridge, reconcile by reconcile, with a download request
// in between, and requires the same bucket bytes and the same status after each step.
func TestBackupParity(t *testing.T) {
	backup := builder.ForBackup(ns, "backup-1").StorageLocation("default").ItemOperationTimeout(time.Hour).
		ObjectMeta(builder.WithUID("uid-1"), builder.WithLabels(velerov1api.ScheduleNameLabel, "daily")).
		Phase(velerov1api.BackupPhaseWaitingForPluginOperations).Result()
	backup.Status.Errors = 1 // one error of the main run
	var ops []*itemoperation.BackupOperation
	for _, op := range operationIDs() {
		ops = append(ops, &itemoperation.BackupOperation{
			Spec: itemoperation.BackupOperationSpec{BackupName: backup.Name, BackupUID: "uid-1", BackupItemAction: action,
				ResourceIdentifier: id(), OperationID: op},
			Status: itemoperation.OperationStatus{Phase: itemoperation.OperationPhaseNew, Created: created()},
		})
	}
	file, errs := encode.ToJSONGzip(ops, "backup item operations list")
	require.Empty(t, errs)

	vsc, isc := &script{}, &script{}
	velero, itemops := newSide(t, vsc, backup.DeepCopy(), location()), newSide(t, isc, backup.DeepCopy(), location())
	for _, s := range []*side{velero, itemops} {
		require.NoError(t, s.bs.PutBackupItemOperations(backup.Name, bytes.NewReader(file.Bytes())))
	}
	vmap := itemoperationmap.NewBackupItemOperationsMap()
	vmetrics := metrics.NewServerMetrics()
	vr := controller.NewBackupOperationsReconciler(quiet(), velero.client, time.Second, velero.newPluginManager, velero.getter, vmetrics, vmap)
	iops := itemvelero.NewBackupOperations()
	env := itemvelero.BackupEnv{Client: itemops.client, Logger: quiet(), NewPluginManager: itemops.newPluginManager,
		BackupStoreGetter: itemops.getter, Metrics: metrics.NewServerMetrics()}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: backup.Name}}
	key := client.ObjectKey{Namespace: ns, Name: backup.Name}
	obj := func() client.Object { return &velerov1api.Backup{} }
	status := func(o client.Object) any { return o.(*velerov1api.Backup).Status }

	reconcile := func(step string) {
		t.Helper()
		_, verr := vr.Reconcile(context.Background(), req)
		_, ierr := iops.Reconcile(context.Background(), env, req)
		require.Equal(t, errText(verr), errText(ierr), "%s: reconcile error", step)
		compare(t, step, velero, itemops, key, obj, status)
		vg, vok := errorsGauge(t, vmetrics, "daily")
		ig, iok := errorsGauge(t, env.Metrics, "daily")
		require.Equal(t, []any{vg, vok}, []any{ig, iok}, "%s: the backup_items_errors metric (Velero's, then the bridge's)", step)
	}

	reconcile("first reconcile: done, errs and reports end; runs runs")
	gauge, ok := errorsGauge(t, env.Metrics, "daily")
	require.True(t, ok)
	require.Equal(t, float64(3), gauge, "the errors metric set to the backup's errors")
	got := &velerov1api.Backup{}
	require.NoError(t, itemops.client.Get(context.Background(), key, got))
	require.Equal(t, velerov1api.BackupPhaseWaitingForPluginOperationsPartiallyFailed, got.Status.Phase)
	require.Equal(t, 3, got.Status.Errors, "the main run's error and the two failed operations")
	require.Equal(t, 1, got.Status.BackupItemOperationsCompleted)
	require.Equal(t, 2, got.Status.BackupItemOperationsFailed)
	file1 := itemops.bucket(t)["backups/backup-1/backup-1-itemoperations.json.gz"]
	require.Contains(t, file1, `"error":"rpc error: code = Unavailable desc = boom"`, "the plugin's error as it is")
	require.Contains(t, file1, `"error":"snapshot \"s-1\" failed: \u003cquota \u0026 limits\u003e"`)

	vsc.next()
	isc.next()
	before := itemops.raw()
	reconcile("second reconcile: runs makes progress (nothing uploaded)")
	require.Equal(t, before, itemops.raw(), "progress alone uploads nothing")

	require.NoError(t, vmap.UpdateForBackup(velero.bs, backup.Name))
	require.NoError(t, iops.UpdateForBackup(itemops.bs, backup.Name))
	compare(t, "download request: the progress uploaded", velero, itemops, key, obj, status)
	require.NotEqual(t, before, itemops.raw(), "the download request uploaded the progress")

	vsc.next()
	isc.next()
	reconcile("third reconcile: runs completes")
	require.NoError(t, itemops.client.Get(context.Background(), key, got))
	require.Equal(t, velerov1api.BackupPhaseFinalizingPartiallyFailed, got.Status.Phase)
	require.Equal(t, 2, got.Status.BackupItemOperationsCompleted)

	reconcile("fourth reconcile: no longer waiting, skipped")
	runs, err := iops.Store().ListRuns(context.Background(), operations.RunFilter{})
	require.NoError(t, err)
	require.Empty(t, runs, "a finalizing backup's run is forgotten, as Velero's map forgets it")
}

// TestRestoreParity does for a waiting restore what TestBackupParity does for a backup.
func TestRestoreParity(t *testing.T) {
	backup := builder.ForBackup(ns, "backup-1").StorageLocation("default").Result()
	restore := builder.ForRestore(ns, "restore-1").Backup("backup-1").ItemOperationTimeout(time.Hour).
		ObjectMeta(builder.WithUID("uid-2")).Phase(velerov1api.RestorePhaseWaitingForPluginOperations).Result()
	var ops []*itemoperation.RestoreOperation
	for _, op := range operationIDs() {
		ops = append(ops, &itemoperation.RestoreOperation{
			Spec: itemoperation.RestoreOperationSpec{RestoreName: restore.Name, RestoreUID: "uid-2", RestoreItemAction: action,
				ResourceIdentifier: id(), OperationID: op},
			Status: itemoperation.OperationStatus{Phase: itemoperation.OperationPhaseNew, Created: created()},
		})
	}
	file, errs := encode.ToJSONGzip(ops, "restore item operations list")
	require.Empty(t, errs)

	vsc, isc := &script{}, &script{}
	velero := newSide(t, vsc, restore.DeepCopy(), backup.DeepCopy(), location())
	itemops := newSide(t, isc, restore.DeepCopy(), backup.DeepCopy(), location())
	for _, s := range []*side{velero, itemops} {
		require.NoError(t, s.bs.PutRestoreItemOperations(restore.Name, bytes.NewReader(file.Bytes())))
	}
	vmap := itemoperationmap.NewRestoreItemOperationsMap()
	vr := controller.NewRestoreOperationsReconciler(quiet(), ns, velero.client, time.Second, velero.newPluginManager, velero.getter, metrics.NewServerMetrics(), vmap)
	iops := itemvelero.NewRestoreOperations()
	env := itemvelero.RestoreEnv{Client: itemops.client, Logger: quiet(), NewPluginManager: itemops.newPluginManager,
		BackupStoreGetter: itemops.getter,
		BackupLocation: func(name string) (*velerov1api.BackupStorageLocation, error) {
			b := &velerov1api.Backup{}
			if err := itemops.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, b); err != nil {
				return nil, err
			}
			loc := &velerov1api.BackupStorageLocation{}
			return loc, itemops.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: b.Spec.StorageLocation}, loc)
		}}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: restore.Name}}
	key := client.ObjectKey{Namespace: ns, Name: restore.Name}
	obj := func() client.Object { return &velerov1api.Restore{} }
	status := func(o client.Object) any { return o.(*velerov1api.Restore).Status }
	reconcile := func(step string) {
		t.Helper()
		_, verr := vr.Reconcile(context.Background(), req)
		_, ierr := iops.Reconcile(context.Background(), env, req)
		require.Equal(t, errText(verr), errText(ierr), "%s: reconcile error", step)
		compare(t, step, velero, itemops, key, obj, status)
	}

	reconcile("first reconcile")
	got := &velerov1api.Restore{}
	require.NoError(t, itemops.client.Get(context.Background(), key, got))
	require.Equal(t, velerov1api.RestorePhaseWaitingForPluginOperationsPartiallyFailed, got.Status.Phase)
	require.Equal(t, 2, got.Status.Errors)
	vsc.next()
	isc.next()
	reconcile("second reconcile: progress only")
	require.NoError(t, vmap.UpdateForRestore(velero.bs, restore.Name))
	require.NoError(t, iops.UpdateForRestore(itemops.bs, restore.Name))
	compare(t, "download request", velero, itemops, key, obj, status)
	vsc.next()
	isc.next()
	reconcile("third reconcile: all ended")
	require.NoError(t, itemops.client.Get(context.Background(), key, got))
	require.Equal(t, velerov1api.RestorePhaseFinalizingPartiallyFailed, got.Status.Phase)
}

// TestEarlyErrorParity runs Velero's early ways out through both controllers: a backup
// whose storage location is missing or read-only, and a restore whose backup is
// missing.
func TestEarlyErrorParity(t *testing.T) {
	waiting := func() *velerov1api.Backup {
		return builder.ForBackup(ns, "backup-1").StorageLocation("default").ItemOperationTimeout(time.Hour).
			ObjectMeta(builder.WithUID("uid-1")).Phase(velerov1api.BackupPhaseWaitingForPluginOperations).Result()
	}
	readOnly := location()
	readOnly.Spec.AccessMode = velerov1api.BackupStorageLocationAccessModeReadOnly
	for name, objs := range map[string][]runtime.Object{
		"storage location missing":   {waiting()},
		"storage location read-only": {waiting(), readOnly},
	} {
		t.Run(name, func(t *testing.T) {
			velero, itemops := newSide(t, &script{}, copies(objs)...), newSide(t, &script{}, copies(objs)...)
			vr := controller.NewBackupOperationsReconciler(quiet(), velero.client, time.Second, velero.newPluginManager, velero.getter, metrics.NewServerMetrics(), itemoperationmap.NewBackupItemOperationsMap())
			iops := itemvelero.NewBackupOperations()
			env := itemvelero.BackupEnv{Client: itemops.client, Logger: quiet(), NewPluginManager: itemops.newPluginManager,
				BackupStoreGetter: itemops.getter, Metrics: metrics.NewServerMetrics()}
			req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "backup-1"}}
			_, verr := vr.Reconcile(context.Background(), req)
			_, ierr := iops.Reconcile(context.Background(), env, req)
			require.Equal(t, errText(verr), errText(ierr))
			compare(t, name, velero, itemops, client.ObjectKey{Namespace: ns, Name: "backup-1"},
				func() client.Object { return &velerov1api.Backup{} }, func(o client.Object) any { return o.(*velerov1api.Backup).Status })
			got := &velerov1api.Backup{}
			require.NoError(t, itemops.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "backup-1"}, got))
			require.Equal(t, velerov1api.BackupPhasePartiallyFailed, got.Status.Phase)
		})
	}
	t.Run("backup of a restore missing", func(t *testing.T) {
		restore := builder.ForRestore(ns, "restore-1").Backup("gone").ObjectMeta(builder.WithUID("uid-2")).
			Phase(velerov1api.RestorePhaseWaitingForPluginOperationsPartiallyFailed).Result()
		velero, itemops := newSide(t, &script{}, restore.DeepCopy()), newSide(t, &script{}, restore.DeepCopy())
		vr := controller.NewRestoreOperationsReconciler(quiet(), ns, velero.client, time.Second, velero.newPluginManager, velero.getter, metrics.NewServerMetrics(), itemoperationmap.NewRestoreItemOperationsMap())
		iops := itemvelero.NewRestoreOperations()
		env := itemvelero.RestoreEnv{Client: itemops.client, Logger: quiet(), NewPluginManager: itemops.newPluginManager,
			BackupStoreGetter: itemops.getter,
			BackupLocation: func(name string) (*velerov1api.BackupStorageLocation, error) {
				b := &velerov1api.Backup{}
				if err := itemops.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, b); err != nil {
					return nil, fmt.Errorf("can't find backup %s/%s: %w", ns, name, err)
				}
				return location(), nil
			}}
		req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "restore-1"}}
		_, verr := vr.Reconcile(context.Background(), req)
		_, ierr := iops.Reconcile(context.Background(), env, req)
		require.Equal(t, errText(verr), errText(ierr))
		compare(t, "backup missing", velero, itemops, client.ObjectKey{Namespace: ns, Name: "restore-1"},
			func() client.Object { return &velerov1api.Restore{} }, func(o client.Object) any { return o.(*velerov1api.Restore).Status })
	})
}

func copies(objs []runtime.Object) []runtime.Object {
	out := make([]runtime.Object, len(objs))
	for i, o := range objs {
		out[i] = o.DeepCopyObject()
	}
	return out
}

// A multiPassOp is an operation of TestMultiPassParity's runs.
type multiPassOp struct {
	id, action string
	created    *metav1.Time
	phase      itemoperation.OperationPhase
}

// multiPassOps are the operations of TestMultiPassParity's runs, one of each outcome
// (see script): they complete at once, fail by a Progress error, fail by the plugin's
// report, complete at the third pass, complete at the sixth, time out at the first
// pass with a Cancel that succeeds or fails, name a plugin the manager does not have,
// or had completed before the first pass. The run's timeout is an hour; the two
// operations that time out were created two hours ago.
func multiPassOps() []multiPassOp {
	long := metav1.NewTime(time.Now().Add(-2 * time.Hour).Truncate(time.Second))
	return []multiPassOp{
		{"op-done", action, created(), itemoperation.OperationPhaseNew},
		{"op-errs", action, created(), itemoperation.OperationPhaseNew},
		{"op-reports", action, created(), itemoperation.OperationPhaseInProgress},
		{"op-runs", action, created(), itemoperation.OperationPhaseNew},
		{"op-slow", action, created(), itemoperation.OperationPhaseInProgress},
		{"op-stuck", action, &long, itemoperation.OperationPhaseInProgress},
		{"op-stuck-cancel-fails", action, &long, itemoperation.OperationPhaseNew},
		{"op-missing", missing, created(), itemoperation.OperationPhaseNew},
		{"op-ended", action, created(), itemoperation.OperationPhaseCompleted},
	}
}

// multiPass reconciles both sides pass after pass until the run has ended, with a
// download request after the second and the fifth, and requires after each the same
// errors, the same status of the object at key and bucket (see compare), and the same
// plugin calls, as multisets. reconcile and download make a reconcile and a download
// request on each side and return Velero's error and the bridge's.
func multiPass(t *testing.T, velero, itemops *side, vsc, isc *script, key client.ObjectKey, obj func() client.Object, status func(client.Object) any,
	reconcile, download func() (verr, ierr error)) {
	t.Helper()
	velero.calls() // the set-up's
	itemops.calls()
	for pass := 1; pass <= 7; pass++ {
		step := fmt.Sprintf("pass %d", pass)
		verr, ierr := reconcile()
		require.Equal(t, errText(verr), errText(ierr), "%s: reconcile error", step)
		compare(t, step, velero, itemops, key, obj, status)
		vc, ic := velero.calls(), itemops.calls()
		if diff := cmp.Diff(vc, ic); diff != "" {
			t.Errorf("%s: plugin calls (-velero +itemops):\n%s", step, diff)
		}
		if pass == 1 {
			for _, c := range []string{"Cancel(op-stuck)", "Cancel(op-stuck-cancel-fails)", "Progress(op-errs)"} {
				require.Contains(t, vc, c, "the scenario makes Velero call %s in the first pass", c)
			}
		}
		if pass == 2 || pass == 5 {
			step += ", then a download request"
			verr, ierr := download()
			require.NoError(t, verr, step)
			require.NoError(t, ierr, step)
			compare(t, step, velero, itemops, key, obj, status)
			if diff := cmp.Diff(velero.calls(), itemops.calls()); diff != "" {
				t.Errorf("%s: plugin calls (-velero +itemops):\n%s", step, diff)
			}
		}
		vsc.next()
		isc.next()
	}
}

// TestMultiPassParity runs a backup and a restore whose operations end in every way
// (multiPassOps) through Velero's operations controllers and through the bridge, pass
// after pass, with download requests between, and requires after each pass the same
// plugin calls (the plugin manager's lookups, Progress and Cancel, as multisets: the
// Monitor makes them concurrently), the same status and the same bucket.
func TestMultiPassParity(t *testing.T) {
	t.Run("backup", func(t *testing.T) {
		backup := builder.ForBackup(ns, "backup-1").StorageLocation("default").ItemOperationTimeout(time.Hour).
			ObjectMeta(builder.WithUID("uid-1"), builder.WithLabels(velerov1api.ScheduleNameLabel, "daily")).
			Phase(velerov1api.BackupPhaseWaitingForPluginOperations).Result()
		var ops []*itemoperation.BackupOperation
		for _, op := range multiPassOps() {
			ops = append(ops, &itemoperation.BackupOperation{
				Spec: itemoperation.BackupOperationSpec{BackupName: backup.Name, BackupUID: "uid-1", BackupItemAction: op.action,
					ResourceIdentifier: id(), OperationID: op.id},
				Status: itemoperation.OperationStatus{Phase: op.phase, Created: op.created},
			})
		}
		file, errs := encode.ToJSONGzip(ops, "backup item operations list")
		require.Empty(t, errs)
		vsc, isc := &script{}, &script{}
		velero, itemops := newSide(t, vsc, backup.DeepCopy(), location()), newSide(t, isc, backup.DeepCopy(), location())
		for _, s := range []*side{velero, itemops} {
			require.NoError(t, s.bs.PutBackupItemOperations(backup.Name, bytes.NewReader(file.Bytes())))
		}
		vmap := itemoperationmap.NewBackupItemOperationsMap()
		vr := controller.NewBackupOperationsReconciler(quiet(), velero.client, time.Second, velero.newPluginManager, velero.getter, metrics.NewServerMetrics(), vmap)
		iops := itemvelero.NewBackupOperations()
		env := itemvelero.BackupEnv{Client: itemops.client, Logger: quiet(), NewPluginManager: itemops.newPluginManager,
			BackupStoreGetter: itemops.getter, Metrics: metrics.NewServerMetrics()}
		req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: backup.Name}}
		key := client.ObjectKey{Namespace: ns, Name: backup.Name}
		obj := func() client.Object { return &velerov1api.Backup{} }
		status := func(o client.Object) any { return o.(*velerov1api.Backup).Status }
		multiPass(t, velero, itemops, vsc, isc, key, obj, status,
			func() (error, error) {
				_, verr := vr.Reconcile(context.Background(), req)
				_, ierr := iops.Reconcile(context.Background(), env, req)
				return verr, ierr
			},
			func() (error, error) {
				return vmap.UpdateForBackup(velero.bs, backup.Name), iops.UpdateForBackup(itemops.bs, backup.Name)
			})
		got := &velerov1api.Backup{}
		require.NoError(t, itemops.client.Get(context.Background(), key, got))
		require.Equal(t, velerov1api.BackupPhaseFinalizingPartiallyFailed, got.Status.Phase)
		require.Equal(t, 4, got.Status.BackupItemOperationsCompleted)
		require.Equal(t, 5, got.Status.BackupItemOperationsFailed)
	})
	t.Run("restore", func(t *testing.T) {
		backup := builder.ForBackup(ns, "backup-1").StorageLocation("default").Result()
		restore := builder.ForRestore(ns, "restore-1").Backup("backup-1").ItemOperationTimeout(time.Hour).
			ObjectMeta(builder.WithUID("uid-2")).Phase(velerov1api.RestorePhaseWaitingForPluginOperations).Result()
		var ops []*itemoperation.RestoreOperation
		for _, op := range multiPassOps() {
			ops = append(ops, &itemoperation.RestoreOperation{
				Spec: itemoperation.RestoreOperationSpec{RestoreName: restore.Name, RestoreUID: "uid-2", RestoreItemAction: op.action,
					ResourceIdentifier: id(), OperationID: op.id},
				Status: itemoperation.OperationStatus{Phase: op.phase, Created: op.created},
			})
		}
		file, errs := encode.ToJSONGzip(ops, "restore item operations list")
		require.Empty(t, errs)
		vsc, isc := &script{}, &script{}
		velero := newSide(t, vsc, restore.DeepCopy(), backup.DeepCopy(), location())
		itemops := newSide(t, isc, restore.DeepCopy(), backup.DeepCopy(), location())
		for _, s := range []*side{velero, itemops} {
			require.NoError(t, s.bs.PutRestoreItemOperations(restore.Name, bytes.NewReader(file.Bytes())))
		}
		vmap := itemoperationmap.NewRestoreItemOperationsMap()
		vr := controller.NewRestoreOperationsReconciler(quiet(), ns, velero.client, time.Second, velero.newPluginManager, velero.getter, metrics.NewServerMetrics(), vmap)
		iops := itemvelero.NewRestoreOperations()
		env := itemvelero.RestoreEnv{Client: itemops.client, Logger: quiet(), NewPluginManager: itemops.newPluginManager,
			BackupStoreGetter: itemops.getter, BackupLocation: func(string) (*velerov1api.BackupStorageLocation, error) { return location(), nil }}
		req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: restore.Name}}
		key := client.ObjectKey{Namespace: ns, Name: restore.Name}
		obj := func() client.Object { return &velerov1api.Restore{} }
		status := func(o client.Object) any { return o.(*velerov1api.Restore).Status }
		multiPass(t, velero, itemops, vsc, isc, key, obj, status,
			func() (error, error) {
				_, verr := vr.Reconcile(context.Background(), req)
				_, ierr := iops.Reconcile(context.Background(), env, req)
				return verr, ierr
			},
			func() (error, error) {
				return vmap.UpdateForRestore(velero.bs, restore.Name), iops.UpdateForRestore(itemops.bs, restore.Name)
			})
		got := &velerov1api.Restore{}
		require.NoError(t, itemops.client.Get(context.Background(), key, got))
		require.Equal(t, velerov1api.RestorePhaseFinalizingPartiallyFailed, got.Status.Phase)
		require.Equal(t, 4, got.Status.RestoreItemOperationsCompleted)
		require.Equal(t, 5, got.Status.RestoreItemOperationsFailed)
	})
}
