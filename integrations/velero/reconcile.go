package velero

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	velerov1api "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"
	"github.com/vmware-tanzu/velero/pkg/metrics"
	"github.com/vmware-tanzu/velero/pkg/persistence"
	"github.com/vmware-tanzu/velero/pkg/plugin/clientmgmt"
	"github.com/vmware-tanzu/velero/pkg/util/encode"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/phase"
)

// BackupOperations is the logic of Velero's backup operations controller over itemops:
// it keeps the operations of the backups waiting for their plugins in an
// [operations.Store] (an in-memory one, filled from the bucket as Velero's
// BackupItemOperationsMap is), checks them with a [monitor.Monitor] at each reconcile,
// and uploads and patches as Velero does. The drop-in makes Velero's
// itemoperationmap.BackupItemOperationsMap this type, so the server, the backup
// operations controller and the download-request controller share one, as they share
// the map. It is safe for concurrent use.
type BackupOperations struct{ *tracked }

// NewBackupOperations returns a BackupOperations with an empty in-memory store. opts
// are given to the [monitor.Monitor] of each reconcile, after the bridge's logger (so a
// [monitor.WithLogger] among them replaces it): with none, each reconcile does what
// Velero's does. A fork opts in to a stall timeout ([monitor.WithStallTimeout],
// [monitor.WithActionStallTimeout]) or a retry policy for transient Progress errors
// ([monitor.WithRetryPolicy], [monitor.WithActionRetryPolicy]) here, and passes the
// same options to [BackupItemOperationProgress] (see docs/velero-fork.md). What they
// keep between reconciles lives with the run in the in-memory store, and a restart of
// the server starts it over. An invalid option makes each Reconcile return its error
// (wrapping [operations.ErrInvalid]) with no plugin called and nothing uploaded or
// patched.
func NewBackupOperations(opts ...monitor.Option) *BackupOperations {
	return &BackupOperations{newTracked(phase.Backup, opts)}
}

// BackupEnv is what Velero's backup operations controller holds besides the map: its
// client, logger, plugin manager factory, backup store getter and metrics (which may be
// nil).
type BackupEnv struct {
	Client            client.Client
	Logger            logrus.FieldLogger
	NewPluginManager  func(logrus.FieldLogger) clientmgmt.Manager
	BackupStoreGetter persistence.ObjectBackupStoreGetter
	Metrics           *metrics.ServerMetrics
}

// UpdateForBackup uploads the itemoperations file of the backup named name through bs
// when its operations changed, or errors were found, since the last upload: what
// Velero's download-request controller asks before it serves the file, so that
// `velero backup describe --details` shows the current progress. It returns the
// upload's error; the changes are then uploaded by the next call.
func (b *BackupOperations) UpdateForBackup(bs BackupStore, name string) error {
	return b.update(bs, name)
}

// Reconcile is one reconcile of Velero's backup operations controller for the backup
// req names, with Velero's behaviour: a backup not waiting for plugin operations is
// skipped; a storage location that is missing, cannot be read or is read-only moves it
// to PartiallyFailed (through the phase machine) without an upload; otherwise its
// operations are loaded from the bucket on the first reconcile ([LoadBackup]) and
// checked once ([monitor.Monitor.Poll]), its status gets the totals of completed and
// failed operations, the new errors and the phase, and the backup's JSON and its
// itemoperations file are uploaded when errors were found or the operations ended,
// before the backup is patched. A backup whose operations changed without either is
// patched only when its totals changed; the file then waits for the next upload or a
// download request ([BackupOperations.UpdateForBackup]). The errors returned are
// Velero's, with its texts. When ctx ends during the check, Reconcile returns its error
// and writes nothing; the next reconcile checks the operations again.
func (b *BackupOperations) Reconcile(ctx context.Context, env BackupEnv, req ctrl.Request) (ctrl.Result, error) {
	log := env.Logger.WithField("backup operations for backup", req.String())
	log.Debug("backupOperationsReconciler getting backup")
	original := &velerov1api.Backup{}
	if err := env.Client.Get(ctx, req.NamespacedName, original); err != nil {
		if apierrors.IsNotFound(err) {
			log.WithError(err).Error("backup not found")
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("error getting backup %s: %w", req.String(), err)
	}
	backup := original.DeepCopy()
	log.Debugf("backup: %s", backup.Name)
	log = env.Logger.WithFields(logrus.Fields{"backup": req.String()})
	switch backup.Status.Phase {
	case velerov1api.BackupPhaseWaitingForPluginOperations, velerov1api.BackupPhaseWaitingForPluginOperationsPartiallyFailed:
	default:
		log.Debug("Backup has no ongoing plugin operations, skipping")
		return ctrl.Result{}, nil
	}
	o := operations.Owner{Kind: phase.Backup, Name: backup.Name, UID: string(backup.UID)}

	loc := &velerov1api.BackupStorageLocation{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: req.Namespace, Name: backup.Spec.StorageLocation}, loc); err != nil {
		if apierrors.IsNotFound(err) {
			log.Warnf("Cannot check progress on Backup operations because backup storage location %s does not exist; marking backup PartiallyFailed", backup.Spec.StorageLocation)
		} else {
			log.Warnf("Cannot check progress on Backup operations because backup storage location %s could not be retrieved: %s; marking backup PartiallyFailed", backup.Spec.StorageLocation, err.Error())
		}
		if err2 := b.fail(ctx, env, original, backup, err.Error()); err2 != nil {
			log.WithError(err2).Error("error updating Backup")
		}
		return ctrl.Result{}, fmt.Errorf("error getting backup storage location: %w", err)
	}
	if loc.Spec.AccessMode == velerov1api.BackupStorageLocationAccessModeReadOnly {
		log.Infof("Cannot check progress on Backup operations because backup storage location %s is currently in read-only mode; marking backup PartiallyFailed", loc.Name)
		if err := b.fail(ctx, env, original, backup, "BSL is read-only"); err != nil {
			log.WithError(err).Error("error updating Backup")
		}
		return ctrl.Result{}, nil
	}

	pluginManager := env.NewPluginManager(env.Logger)
	defer pluginManager.CleanupClients()
	backupStore, err := env.BackupStoreGetter.Get(loc, pluginManager, env.Logger)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("error getting backup store: %w", err)
	}

	if _, err := LoadBackup(ctx, b.store, backupStore, backup); err != nil {
		// Velero counts the failure as an error to upload, but neither adds it to the
		// backup's errors nor moves the backup: the next reconcile tries again.
		b.registerErrors(env, backup)
		if err2 := b.upload(ctx, env, original, backup, backupStore, operations.Owner{}); err2 != nil {
			return ctrl.Result{}, fmt.Errorf("error updating Backup: %w", err2)
		}
		return ctrl.Result{}, fmt.Errorf("error getting backup operations: %w", bucketCause(err))
	}
	r := NewResolver(pluginManager, Objects{Backup: func(context.Context, operations.Owner) (*velerov1api.Backup, error) { return backup, nil }})
	res, ops, changes, err := b.poll(ctx, o, r, log)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("error checking backup operations: %w", err)
	}
	errs := b.note(o, res.NewErrors, changes)
	backup.Status.Errors += errs
	completed, failed := totals(ops)
	completionChanges := false
	if backup.Status.BackupItemOperationsCompleted != completed || backup.Status.BackupItemOperationsFailed != failed {
		completionChanges = true
		backup.Status.BackupItemOperationsCompleted = completed
		backup.Status.BackupItemOperationsFailed = failed
	}
	backup.Status.Phase = velerov1api.BackupPhase(res.Phase)
	if res.Running == 0 {
		log.Infof("Marking backup %s %s", backup.Name, backup.Status.Phase)
	}

	if errs > 0 {
		b.registerErrors(env, backup)
	}
	if errs > 0 || backupFinal(backup.Status.Phase) {
		if err := b.upload(ctx, env, original, backup, backupStore, o); err != nil {
			return ctrl.Result{}, fmt.Errorf("error updating Backup: %w", err)
		}
		if backupFinal(backup.Status.Phase) {
			if err := b.forget(ctx, o); err != nil {
				return ctrl.Result{}, fmt.Errorf("error updating Backup: %w", err)
			}
		}
	} else if completionChanges {
		// New totals without errors or an end: patch the backup, leave the file for
		// later, as Velero does.
		if err := env.Client.Patch(ctx, backup, client.MergeFrom(original)); err != nil {
			return ctrl.Result{}, fmt.Errorf("error updating Backup: error updating Backup %s: %w", backup.Name, err)
		}
	}
	return ctrl.Result{}, nil
}

// backupFinal reports whether p ends the backup operations controller's work on a
// backup.
func backupFinal(p velerov1api.BackupPhase) bool {
	switch p {
	case velerov1api.BackupPhaseCompleted, velerov1api.BackupPhasePartiallyFailed,
		velerov1api.BackupPhaseFinalizing, velerov1api.BackupPhaseFinalizingPartiallyFailed:
		return true
	}
	return false
}

// registerErrors sets the metric of the backup's errors, as Velero does when a
// reconcile found errors.
func (b *BackupOperations) registerErrors(env BackupEnv, backup *velerov1api.Backup) {
	if env.Metrics != nil {
		env.Metrics.RegisterBackupItemsErrorsGauge(backup.GetLabels()[velerov1api.ScheduleNameLabel], backup.Status.Errors)
	}
}

// fail moves backup to PartiallyFailed for reason, through the phase machine, counts
// the error in the metric, patches it, and forgets its run: Velero's way out when the
// backup's storage location cannot be used. Nothing is uploaded.
func (b *BackupOperations) fail(ctx context.Context, env BackupEnv, original, backup *velerov1api.Backup, reason string) error {
	o := operations.Owner{Kind: phase.Backup, Name: backup.Name, UID: string(backup.UID)}
	if err := b.end(ctx, o, phase.ProfileOf(phase.Backup), phase.Phase(backup.Status.Phase), phase.PartiallyFailed, reason); err != nil {
		return err
	}
	backup.Status.Phase = velerov1api.BackupPhasePartiallyFailed
	b.registerErrors(env, backup)
	if err := env.Client.Patch(ctx, backup, client.MergeFrom(original)); err != nil {
		return fmt.Errorf("error updating Backup %s: %w", backup.Name, err)
	}
	return b.forget(ctx, o)
}

// upload uploads the backup's JSON and, when o is set, its itemoperations file, then
// patches the backup. A failed upload leaves the errors to be counted again by the
// next reconcile, as Velero does.
func (b *BackupOperations) upload(ctx context.Context, env BackupEnv, original, backup *velerov1api.Backup, bs persistence.BackupStore, o operations.Owner) error {
	backupJSON := new(bytes.Buffer)
	if err := encode.To(backup, "json", backupJSON); err != nil {
		return fmt.Errorf("error encoding backup json: %w", err)
	}
	if err := bs.PutBackupMetadata(backup.Name, backupJSON); err != nil {
		return fmt.Errorf("error uploading backup json: %w", err)
	}
	if o.Name != "" {
		if err := upload(ctx, b.store, bs, o); err != nil {
			return err
		}
		b.uploaded(o)
	}
	if err := env.Client.Patch(ctx, backup, client.MergeFrom(original)); err != nil {
		return fmt.Errorf("error updating Backup %s: %w", backup.Name, err)
	}
	return nil
}

// RestoreOperations is for restores what [BackupOperations] is for backups: the drop-in
// makes Velero's itemoperationmap.RestoreItemOperationsMap this type. It is safe for
// concurrent use.
type RestoreOperations struct{ *tracked }

// NewRestoreOperations returns a RestoreOperations with an empty in-memory store; opts
// are as for [NewBackupOperations], and a fork passes the same to
// [RestoreItemOperationProgress].
func NewRestoreOperations(opts ...monitor.Option) *RestoreOperations {
	return &RestoreOperations{newTracked(phase.Restore, opts)}
}

// RestoreEnv is what Velero's restore operations controller holds besides the map.
// BackupLocation returns the storage location of the backup named name, or an error
// when the backup or its location cannot be fetched (Velero's fetchBackupInfo).
type RestoreEnv struct {
	Client            client.Client
	Logger            logrus.FieldLogger
	NewPluginManager  func(logrus.FieldLogger) clientmgmt.Manager
	BackupStoreGetter persistence.ObjectBackupStoreGetter
	BackupLocation    func(backupName string) (*velerov1api.BackupStorageLocation, error)
}

// UpdateForRestore does for a restore what [BackupOperations.UpdateForBackup] does for a
// backup.
func (r *RestoreOperations) UpdateForRestore(bs BackupStore, name string) error {
	return r.update(bs, name)
}

// Reconcile is one reconcile of Velero's restore operations controller for the restore
// req names, as [BackupOperations.Reconcile] is for backups, with the restore's
// differences in Velero: a backup whose information cannot be fetched moves the
// restore to FinalizingPartiallyFailed, errors are logged instead of counted in a
// metric, and only the itemoperations file is uploaded.
func (r *RestoreOperations) Reconcile(ctx context.Context, env RestoreEnv, req ctrl.Request) (ctrl.Result, error) {
	log := env.Logger.WithField("restore operations for restore", req.String())
	log.Debug("restoreOperationsReconciler getting restore")
	original := &velerov1api.Restore{}
	if err := env.Client.Get(ctx, req.NamespacedName, original); err != nil {
		if apierrors.IsNotFound(err) {
			log.WithError(err).Error("restore not found")
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("error getting restore %s: %w", req.String(), err)
	}
	restore := original.DeepCopy()
	log.Debugf("restore: %s", restore.Name)
	log = env.Logger.WithFields(logrus.Fields{"restore": req.String()})
	switch restore.Status.Phase {
	case velerov1api.RestorePhaseWaitingForPluginOperations, velerov1api.RestorePhaseWaitingForPluginOperationsPartiallyFailed:
	default:
		log.Debug("Restore has no ongoing plugin operations, skipping")
		return ctrl.Result{}, nil
	}
	o := operations.Owner{Kind: phase.Restore, Name: restore.Name, UID: string(restore.UID)}
	profile := phase.ProfileOf(phase.Restore, phase.WithRestoreFinalizing())

	loc, err := env.BackupLocation(restore.Spec.BackupName)
	if err != nil {
		log.Warnf("Cannot check progress on Restore operations because backup info is unavailable %s; marking restore FinalizingPartiallyFailed", err.Error())
		if err2 := r.fail(ctx, env, original, restore, profile, err.Error()); err2 != nil {
			log.WithError(err2).Error("error updating Restore")
		}
		return ctrl.Result{}, fmt.Errorf("error getting backup info: %w", err)
	}

	pluginManager := env.NewPluginManager(env.Logger)
	defer pluginManager.CleanupClients()
	backupStore, err := env.BackupStoreGetter.Get(loc, pluginManager, env.Logger)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("error getting backup store: %w", err)
	}

	if _, err := LoadRestore(ctx, r.store, backupStore, restore); err != nil {
		r.logErrors(env, restore, 1)
		if err2 := r.upload(ctx, env, original, restore, backupStore, operations.Owner{}); err2 != nil {
			return ctrl.Result{}, fmt.Errorf("error updating Restore: %w", err2)
		}
		return ctrl.Result{}, fmt.Errorf("error getting restore operations: %w", bucketCause(err))
	}
	res, ops, changes, err := r.poll(ctx, o, NewResolver(pluginManager, Objects{Restore: func(context.Context, operations.Owner) (*velerov1api.Restore, error) { return restore, nil }}), log)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("error checking restore operations: %w", err)
	}
	errs := r.note(o, res.NewErrors, changes)
	restore.Status.Errors += errs
	completed, failed := totals(ops)
	completionChanges := false
	if restore.Status.RestoreItemOperationsCompleted != completed || restore.Status.RestoreItemOperationsFailed != failed {
		completionChanges = true
		restore.Status.RestoreItemOperationsCompleted = completed
		restore.Status.RestoreItemOperationsFailed = failed
	}
	restore.Status.Phase = velerov1api.RestorePhase(res.Phase)
	if res.Running == 0 {
		log.Infof("Marking restore %s %s", restore.Name, restore.Status.Phase)
	}

	if errs > 0 {
		r.logErrors(env, restore, errs)
	}
	final := restore.Status.Phase == velerov1api.RestorePhaseFinalizing || restore.Status.Phase == velerov1api.RestorePhaseFinalizingPartiallyFailed
	if errs > 0 || final {
		if err := r.upload(ctx, env, original, restore, backupStore, o); err != nil {
			return ctrl.Result{}, fmt.Errorf("error updating Restore: %w", err)
		}
		if final {
			if err := r.forget(ctx, o); err != nil {
				return ctrl.Result{}, fmt.Errorf("error updating Restore: %w", err)
			}
		}
	} else if completionChanges {
		if err := env.Client.Patch(ctx, restore, client.MergeFrom(original)); err != nil {
			return ctrl.Result{}, fmt.Errorf("error updating Restore: error updating Restore %s: %w", restore.Name, err)
		}
	}
	return ctrl.Result{}, nil
}

// logErrors logs how many errors a reconcile found, as Velero does for a restore.
func (r *RestoreOperations) logErrors(env RestoreEnv, restore *velerov1api.Restore, n int) {
	env.Logger.WithField("restore", restore.Name).Infof("Restore has %d errors", n)
}

// fail moves restore to FinalizingPartiallyFailed for reason, through the phase
// machine, patches it and forgets its run: Velero's way out when the restore's backup
// cannot be fetched. Nothing is uploaded.
func (r *RestoreOperations) fail(ctx context.Context, env RestoreEnv, original, restore *velerov1api.Restore, profile phase.Profile, reason string) error {
	o := operations.Owner{Kind: phase.Restore, Name: restore.Name, UID: string(restore.UID)}
	if err := r.end(ctx, o, profile, phase.Phase(restore.Status.Phase), phase.FinalizingPartiallyFailed, reason); err != nil {
		return err
	}
	restore.Status.Phase = velerov1api.RestorePhaseFinalizingPartiallyFailed
	r.logErrors(env, restore, 1)
	if err := env.Client.Patch(ctx, restore, client.MergeFrom(original)); err != nil {
		return fmt.Errorf("error updating Restore %s: %w", restore.Name, err)
	}
	return r.forget(ctx, o)
}

// upload uploads, when o is set, the restore's itemoperations file, then patches the
// restore.
func (r *RestoreOperations) upload(ctx context.Context, env RestoreEnv, original, restore *velerov1api.Restore, bs persistence.BackupStore, o operations.Owner) error {
	if o.Name != "" {
		if err := upload(ctx, r.store, bs, o); err != nil {
			return err
		}
		r.uploaded(o)
	}
	if err := env.Client.Patch(ctx, restore, client.MergeFrom(original)); err != nil {
		return fmt.Errorf("error updating Restore %s: %w", restore.Name, err)
	}
	return nil
}

// bucketCause returns the BackupStore's error when err is a failure to read an
// itemoperations file, else err.
func bucketCause(err error) error {
	var be *bucketError
	if errors.As(err, &be) {
		return be.cause
	}
	return err
}
