package velero

import (
	"bytes"
	"context"
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
// timestamps those of its status. The run follows the profile opts select
// (phase.WithQueue for a fork whose backups queue; none by default).
//
// A backup without a file (no asynchronous operations, or made before Velero had them)
// gives a run without operations. A phase unknown to the machine fails with the error
// of [operations.Run.SetPhase]; an owner that already has a run fails with an error
// wrapping [operations.ErrExists], and s is left as it was; an error from bs is returned
// wrapped. The run is created before its operations are written: when that write
// fails, the run stays, without operations, and the error says so.
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
	vops, err := bs.GetBackupItemOperations(backup.Name)
	if err != nil {
		return operations.Run{}, fmt.Errorf("velero: load operations of backup %q: %w", backup.Name, err)
	}
	ops := make([]operations.Operation, len(vops))
	for i, op := range vops {
		ops[i] = FromBackupOperation(op)
	}
	return load(ctx, s, run, phase.Phase(backup.Status.Phase), ops)
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
	vops, err := bs.GetRestoreItemOperations(restore.Name)
	if err != nil {
		return operations.Run{}, fmt.Errorf("velero: load operations of restore %q: %w", restore.Name, err)
	}
	ops := make([]operations.Operation, len(vops))
	for i, op := range vops {
		ops[i] = FromRestoreOperation(op)
	}
	return load(ctx, s, run, phase.Phase(restore.Status.Phase), ops)
}

func load(ctx context.Context, s operations.Store, run operations.Run, to phase.Phase, ops []operations.Operation) (operations.Run, error) {
	if to != phase.New {
		if err := run.SetPhase(to, LoadReason, time.Now()); err != nil {
			return operations.Run{}, fmt.Errorf("velero: load %s: %w", run.Owner, err)
		}
	}
	if err := operations.ValidateBatch(run.Owner, ops); err != nil {
		return operations.Run{}, fmt.Errorf("velero: load %s: %w", run.Owner, err)
	}
	if err := s.CreateRun(ctx, run); err != nil {
		return operations.Run{}, fmt.Errorf("velero: load %s: %w", run.Owner, err)
	}
	if len(ops) > 0 {
		if err := s.PutOperations(ctx, run.Owner, ops); err != nil {
			return operations.Run{}, fmt.Errorf("velero: load %s: run created, operations not written: %w", run.Owner, err)
		}
	}
	return run, nil
}

// Save uploads the itemoperations file of the run of o to bs: every operation s holds
// for it, encoded by [opsfile.Encoder] (byte for byte what Velero uploads), through
// PutBackupItemOperations or PutRestoreItemOperations. Call it after a pass changed the
// run's operations (see monitor.WithObserver), as Velero's operations controllers
// upload the file after a reconcile that found errors or an end.
//
// A run without operations uploads nothing, as in Velero, which writes no file for a
// backup or restore without asynchronous operations. Errors from s and bs are returned
// wrapped; a failed upload leaves the file in the
// bucket as it was, for Velero's object stores write objects whole. Save reads the
// operations at one instant; a write to s after that is uploaded by the next Save.
func Save(ctx context.Context, s operations.Store, bs BackupStore, o operations.Owner) error {
	ops, err := s.ListOperations(ctx, o, operations.OperationFilter{})
	if err != nil {
		return fmt.Errorf("velero: save %s: %w", o, err)
	}
	if len(ops) == 0 {
		return nil
	}
	var buf bytes.Buffer
	enc := opsfile.NewEncoder(&buf, o.Kind)
	for _, op := range ops {
		if err := enc.Encode(op); err != nil {
			return fmt.Errorf("velero: save %s: %w", o, err)
		}
	}
	if err := enc.Close(); err != nil {
		return fmt.Errorf("velero: save %s: %w", o, err)
	}
	switch o.Kind {
	case phase.Backup:
		err = bs.PutBackupItemOperations(o.Name, bytes.NewReader(buf.Bytes()))
	case phase.Restore:
		err = bs.PutRestoreItemOperations(o.Name, bytes.NewReader(buf.Bytes()))
	default:
		err = fmt.Errorf("unknown kind %q: %w", o.Kind, operations.ErrInvalid)
	}
	if err != nil {
		return fmt.Errorf("velero: save %s: %w", o, err)
	}
	return nil
}
