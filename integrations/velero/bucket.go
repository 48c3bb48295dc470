package velero

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	velerov1api "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"
	"github.com/vmware-tanzu/velero/pkg/itemoperation"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/opsfile"
	"github.com/itemops/itemops/phase"
)

// BackupStore is the part of Velero's persistence.BackupStore that holds the
// itemoperations files of a backup storage location. Velero's BackupStore, and its
// mocks.BackupStore, satisfy it.
type BackupStore interface {
	GetBackupItemOperations(name string) ([]*itemoperation.BackupOperation, error)
	PutBackupItemOperations(backup string, backupItemOperations io.Reader) error
	GetRestoreItemOperations(name string) ([]*itemoperation.RestoreOperation, error)
	PutRestoreItemOperations(restore string, restoreItemOperations io.Reader) error
}

// LoadReason is the reason the history of a run made by [LoadBackup] or [LoadRestore]
// gives for its phase.
const LoadReason = "loaded from the backup storage location"

// LoadBackup records in s the run of backup and the operations its itemoperations
// file in bs holds, and returns the run: the owner is the backup's name and UID, the
// phase its status.phase (reached from New, with [LoadReason] at the time of the call),
// the operation timeout its spec.itemOperationTimeout, the error and warning counts and
// timestamps those of its status. The operations the file holds as Failed count as
// already among the errors (Run.FailedOperations), as the main run counted them. The
// run follows the profile opts select (phase.WithQueue for a fork whose backups queue;
// none by default).
//
// LoadBackup is idempotent: when s already holds the run of the backup (same name and
// UID), it returns it as it is, reading nothing from bs, so that each reconcile may call
// it. A run of the same name with another UID is of a backup deleted since and made
// again: it is deleted with its operations and the backup loaded afresh.
//
// A backup without a file (no asynchronous operations, or made before Velero had them)
// gives a run without operations. A phase unknown to the machine fails with the error
// of [operations.Run.SetPhase]; an error from bs is returned wrapped, with s left as it
// was. The run is created in New, its operations written, and only then moved to its
// phase: when a write fails, the run stays New, which no Monitor polls or finalizes (it
// would finalize a run without operations), and the next LoadBackup writes the
// operations again and moves it.
func LoadBackup(ctx context.Context, s operations.Store, bs BackupStore, backup *velerov1api.Backup, opts ...phase.Option) (operations.Run, error) {
	run := operations.Run{
		Owner:            operations.Owner{Kind: phase.Backup, Name: backup.Name, UID: string(backup.UID)},
		Phase:            phase.New,
		Profile:          phase.ProfileOf(phase.Backup, opts...),
		OperationTimeout: backup.Spec.ItemOperationTimeout.Duration,
		Errors:           backup.Status.Errors,
		Warnings:         backup.Status.Warnings,
		Created:          backup.CreationTimestamp.Time,
		Started:          fromTime(backup.Status.StartTimestamp),
	}
	return load(ctx, s, run, phase.Phase(backup.Status.Phase), func() ([]operations.Operation, error) {
		vops, err := bs.GetBackupItemOperations(backup.Name)
		if err != nil {
			return nil, &bucketError{what: fmt.Sprintf("backup %q", backup.Name), cause: err}
		}
		ops := make([]operations.Operation, len(vops))
		for i, op := range vops {
			ops[i] = FromBackupOperation(op)
		}
		return ops, nil
	})
}

// LoadRestore does for restore what [LoadBackup] does for a backup. The run follows
// the profile with phase.WithRestoreFinalizing, as restores do since Velero 1.12,
// plus what opts select.
func LoadRestore(ctx context.Context, s operations.Store, bs BackupStore, restore *velerov1api.Restore, opts ...phase.Option) (operations.Run, error) {
	run := operations.Run{
		Owner:            operations.Owner{Kind: phase.Restore, Name: restore.Name, UID: string(restore.UID)},
		Phase:            phase.New,
		Profile:          phase.ProfileOf(phase.Restore, append([]phase.Option{phase.WithRestoreFinalizing()}, opts...)...),
		OperationTimeout: restore.Spec.ItemOperationTimeout.Duration,
		Errors:           restore.Status.Errors,
		Warnings:         restore.Status.Warnings,
		Created:          restore.CreationTimestamp.Time,
		Started:          fromTime(restore.Status.StartTimestamp),
	}
	return load(ctx, s, run, phase.Phase(restore.Status.Phase), func() ([]operations.Operation, error) {
		vops, err := bs.GetRestoreItemOperations(restore.Name)
		if err != nil {
			return nil, &bucketError{what: fmt.Sprintf("restore %q", restore.Name), cause: err}
		}
		ops := make([]operations.Operation, len(vops))
		for i, op := range vops {
			ops[i] = FromRestoreOperation(op)
		}
		return ops, nil
	})
}

// A bucketError is a failure to read the itemoperations file of what; cause is the
// BackupStore's error.
type bucketError struct {
	what  string
	cause error
}

func (e *bucketError) Error() string {
	return "velero: load operations of " + e.what + ": " + e.cause.Error()
}
func (e *bucketError) Unwrap() error { return e.cause }

// load records run, in phase to, with the operations read returns; see LoadBackup.
func load(ctx context.Context, s operations.Store, run operations.Run, to phase.Phase, read func() ([]operations.Operation, error)) (operations.Run, error) {
	stored, err := s.GetRun(ctx, operations.Owner{Kind: run.Owner.Kind, Name: run.Owner.Name}) // whatever its UID
	switch {
	case err == nil && stored.Owner.UID == run.Owner.UID && stored.Phase != phase.New:
		return stored, nil // loaded before
	case err == nil && stored.Owner.UID != run.Owner.UID:
		if err := s.DeleteRun(ctx, stored.Owner); err != nil && !errors.Is(err, operations.ErrNotFound) {
			return operations.Run{}, fmt.Errorf("velero: load %s: delete the run of an earlier object of that name: %w", run.Owner, err)
		}
		stored, err = operations.Run{}, operations.ErrNotFound
	case err != nil && !errors.Is(err, operations.ErrNotFound):
		return operations.Run{}, fmt.Errorf("velero: load %s: %w", run.Owner, err)
	}
	created := err == nil // a run left in New by a load whose writes failed
	// The phase is checked before anything is written.
	if to != phase.New {
		check := run
		if err := check.SetPhase(to, LoadReason, time.Now()); err != nil {
			return operations.Run{}, fmt.Errorf("velero: load %s: %w", run.Owner, err)
		}
	}
	ops, err := read()
	if err != nil {
		return operations.Run{}, err
	}
	if err := operations.ValidateBatch(run.Owner, ops); err != nil {
		return operations.Run{}, fmt.Errorf("velero: load %s: %w", run.Owner, err)
	}
	for _, op := range ops {
		if op.Status.Phase == operations.OperationFailed {
			run.FailedOperations++
		}
	}
	if !created {
		if err := s.CreateRun(ctx, run); err != nil {
			return operations.Run{}, fmt.Errorf("velero: load %s: %w", run.Owner, err)
		}
	}
	if len(ops) > 0 {
		if err := s.PutOperations(ctx, run.Owner, ops); err != nil {
			return operations.Run{}, fmt.Errorf("velero: load %s: run created in New, operations not written: %w", run.Owner, err)
		}
	}
	loaded, err := s.UpdateRun(ctx, run.Owner, func(r *operations.Run) error {
		r.FailedOperations = run.FailedOperations
		if to == phase.New || r.Phase != phase.New {
			return nil
		}
		return r.SetPhase(to, LoadReason, time.Now())
	})
	if err != nil {
		return operations.Run{}, fmt.Errorf("velero: load %s: operations written, run left in New: %w", run.Owner, err)
	}
	return loaded, nil
}

// Save uploads the itemoperations file of the run of o to bs: every operation s holds
// for it, encoded by [opsfile.Encoder] (byte for byte what Velero uploads), through
// PutBackupItemOperations or PutRestoreItemOperations. Call it after a pass changed the
// run's operations (see monitor.WithObserver), as Velero's operations controllers
// upload the file after a reconcile that found errors or an end.
//
// Save refuses an owner of a kind other than Backup and Restore (a kind of one's own, see
// phase.Declare) with an error wrapping operations.ErrInvalid: Velero's bucket has no
// place for it. A run without operations uploads nothing, as in Velero, which writes no
// file for a backup or restore without asynchronous operations. Errors from s and bs are
// returned wrapped; a failed upload leaves the file in the bucket as it was, for
// Velero's object stores write objects whole. Save reads the
// operations at one instant; a write to s after that is uploaded by the next Save.
func Save(ctx context.Context, s operations.Store, bs BackupStore, o operations.Owner) error {
	if o.Kind != phase.Backup && o.Kind != phase.Restore {
		return fmt.Errorf("velero: save %s: kind %q is not Backup or Restore, the only kinds of Velero's bucket: %w", o, o.Kind, operations.ErrInvalid)
	}
	if err := upload(ctx, s, bs, o); err != nil {
		return fmt.Errorf("velero: save %s: %w", o, err)
	}
	return nil
}

// upload is Save, with the errors Velero's item-operations map returns when it uploads.
func upload(ctx context.Context, s operations.Store, bs BackupStore, o operations.Owner) error {
	ops, err := s.ListOperations(ctx, o, operations.OperationFilter{})
	if err != nil {
		return err
	}
	if len(ops) == 0 {
		return nil
	}
	var buf bytes.Buffer
	enc := opsfile.NewEncoder(&buf, o.Kind)
	for _, op := range ops {
		if err := enc.Encode(op); err != nil {
			return fmt.Errorf("error encoding item operations json: %w", err)
		}
	}
	if err := enc.Close(); err != nil {
		return fmt.Errorf("error encoding item operations json: %w", err)
	}
	switch o.Kind {
	case phase.Backup:
		err = bs.PutBackupItemOperations(o.Name, bytes.NewReader(buf.Bytes()))
	case phase.Restore:
		err = bs.PutRestoreItemOperations(o.Name, bytes.NewReader(buf.Bytes()))
	default:
		return fmt.Errorf("unknown kind %q: %w", o.Kind, operations.ErrInvalid)
	}
	if err != nil {
		return fmt.Errorf("error uploading item operations json: %w", err)
	}
	return nil
}
