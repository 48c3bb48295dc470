package velero

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/vmware-tanzu/velero/pkg/itemoperation"
	vplugin "github.com/vmware-tanzu/velero/pkg/plugin/velero"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// FromBackupOperation returns the itemops record of Velero's backup operation op:
// a backup Owner with op's backup name and UID, the plugin's name as Action, and
// every other field as it is. A nil op gives the zero Operation.
func FromBackupOperation(op *itemoperation.BackupOperation) operations.Operation {
	if op == nil {
		return operations.Operation{}
	}
	s := op.Spec
	out := operations.Operation{
		Owner:    operations.Owner{Kind: phase.Backup, Name: s.BackupName, UID: s.BackupUID},
		Action:   s.BackupItemAction,
		Resource: FromResourceIdentifier(s.ResourceIdentifier),
		ID:       s.OperationID,
		Status:   FromStatus(op.Status),
	}
	if s.PostOperationItems != nil {
		out.PostOperationItems = make([]operations.ResourceIdentifier, len(s.PostOperationItems))
		for i, r := range s.PostOperationItems {
			out.PostOperationItems[i] = FromResourceIdentifier(r)
		}
	}
	return out
}

// ToBackupOperation returns Velero's record of the backup operation op. It fails,
// with an error wrapping [operations.ErrInvalid], when op's owner is not a backup.
func ToBackupOperation(op operations.Operation) (*itemoperation.BackupOperation, error) {
	if op.Owner.Kind != phase.Backup {
		return nil, fmt.Errorf("velero: operation %q of %s is not a backup's: %w", op.ID, op.Owner, operations.ErrInvalid)
	}
	out := &itemoperation.BackupOperation{
		Spec: itemoperation.BackupOperationSpec{
			BackupName:         op.Owner.Name,
			BackupUID:          op.Owner.UID,
			BackupItemAction:   op.Action,
			ResourceIdentifier: ToResourceIdentifier(op.Resource),
			OperationID:        op.ID,
		},
		Status: ToStatus(op.Status),
	}
	if op.PostOperationItems != nil {
		out.Spec.PostOperationItems = make([]vplugin.ResourceIdentifier, len(op.PostOperationItems))
		for i, r := range op.PostOperationItems {
			out.Spec.PostOperationItems[i] = ToResourceIdentifier(r)
		}
	}
	return out, nil
}

// FromRestoreOperation returns the itemops record of Velero's restore operation op:
// a restore Owner with op's restore name and UID, the plugin's name as Action, and
// every other field as it is. A nil op gives the zero Operation.
func FromRestoreOperation(op *itemoperation.RestoreOperation) operations.Operation {
	if op == nil {
		return operations.Operation{}
	}
	s := op.Spec
	return operations.Operation{
		Owner:    operations.Owner{Kind: phase.Restore, Name: s.RestoreName, UID: s.RestoreUID},
		Action:   s.RestoreItemAction,
		Resource: FromResourceIdentifier(s.ResourceIdentifier),
		ID:       s.OperationID,
		Status:   FromStatus(op.Status),
	}
}

// ToRestoreOperation returns Velero's record of the restore operation op. It fails,
// with an error wrapping [operations.ErrInvalid], when op's owner is not a restore or
// op has post-operation items, which Velero's restore records cannot hold.
func ToRestoreOperation(op operations.Operation) (*itemoperation.RestoreOperation, error) {
	if op.Owner.Kind != phase.Restore {
		return nil, fmt.Errorf("velero: operation %q of %s is not a restore's: %w", op.ID, op.Owner, operations.ErrInvalid)
	}
	if op.PostOperationItems != nil {
		return nil, fmt.Errorf("velero: restore operation %q has post-operation items: %w", op.ID, operations.ErrInvalid)
	}
	return &itemoperation.RestoreOperation{
		Spec: itemoperation.RestoreOperationSpec{
			RestoreName:        op.Owner.Name,
			RestoreUID:         op.Owner.UID,
			RestoreItemAction:  op.Action,
			ResourceIdentifier: ToResourceIdentifier(op.Resource),
			OperationID:        op.ID,
		},
		Status: ToStatus(op.Status),
	}, nil
}

// FromResourceIdentifier returns the itemops form of Velero's resource identifier.
func FromResourceIdentifier(r vplugin.ResourceIdentifier) operations.ResourceIdentifier {
	return operations.ResourceIdentifier{Group: r.Group, Resource: r.Resource, Namespace: r.Namespace, Name: r.Name}
}

// ToResourceIdentifier returns Velero's form of the resource identifier r.
func ToResourceIdentifier(r operations.ResourceIdentifier) vplugin.ResourceIdentifier {
	return vplugin.ResourceIdentifier{
		GroupResource: schema.GroupResource{Group: r.Group, Resource: r.Resource},
		Namespace:     r.Namespace,
		Name:          r.Name,
	}
}

// FromStatus returns the itemops form of Velero's operation status. A nil time is the
// zero time; a non-nil time is kept as it is, so a time Velero holds as a pointer to
// the zero time also becomes the zero time (Velero writes both as null).
func FromStatus(s itemoperation.OperationStatus) operations.Status {
	return operations.Status{
		Phase:          operations.OperationPhase(s.Phase),
		Error:          s.Error,
		NCompleted:     s.NCompleted,
		NTotal:         s.NTotal,
		OperationUnits: s.OperationUnits,
		Description:    s.Description,
		Created:        fromTime(s.Created),
		Started:        fromTime(s.Started),
		Updated:        fromTime(s.Updated),
	}
}

// ToStatus returns Velero's form of the operation status s. The zero time becomes a
// nil pointer, any other time a pointer to it, unchanged.
func ToStatus(s operations.Status) itemoperation.OperationStatus {
	return itemoperation.OperationStatus{
		Phase:          itemoperation.OperationPhase(s.Phase),
		Error:          s.Error,
		NCompleted:     s.NCompleted,
		NTotal:         s.NTotal,
		OperationUnits: s.OperationUnits,
		Description:    s.Description,
		Created:        toTime(s.Created),
		Started:        toTime(s.Started),
		Updated:        toTime(s.Updated),
	}
}

// FromProgress returns the itemops form of what a Velero plugin's Progress reported.
func FromProgress(p vplugin.OperationProgress) operations.Progress {
	return operations.Progress{
		Completed:      p.Completed,
		Err:            p.Err,
		NCompleted:     p.NCompleted,
		NTotal:         p.NTotal,
		OperationUnits: p.OperationUnits,
		Description:    p.Description,
		Started:        p.Started,
		Updated:        p.Updated,
	}
}

// ToProgress returns Velero's form of the progress report p.
func ToProgress(p operations.Progress) vplugin.OperationProgress {
	return vplugin.OperationProgress{
		Completed:      p.Completed,
		Err:            p.Err,
		NCompleted:     p.NCompleted,
		NTotal:         p.NTotal,
		OperationUnits: p.OperationUnits,
		Description:    p.Description,
		Started:        p.Started,
		Updated:        p.Updated,
	}
}

func fromTime(t *metav1.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.Time
}

func toTime(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	return &metav1.Time{Time: t}
}
