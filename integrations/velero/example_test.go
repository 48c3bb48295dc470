package velero_test

import (
	"context"
	"fmt"
	"time"

	velerov1api "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"
	"github.com/vmware-tanzu/velero/pkg/itemoperation"
	"github.com/vmware-tanzu/velero/pkg/kuberesource"
	"github.com/vmware-tanzu/velero/pkg/persistence"
	"github.com/vmware-tanzu/velero/pkg/plugin/clientmgmt"
	vplugin "github.com/vmware-tanzu/velero/pkg/plugin/velero"

	itemvelero "github.com/itemops/itemops/integrations/velero"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/phase"
)

func ExampleFromBackupOperation() {
	op := itemvelero.FromBackupOperation(&itemoperation.BackupOperation{
		Spec: itemoperation.BackupOperationSpec{
			BackupName: "nightly", BackupUID: "3f2a", BackupItemAction: "velero.io/csi-pvc-backupper",
			ResourceIdentifier: vplugin.ResourceIdentifier{GroupResource: kuberesource.PersistentVolumeClaims, Namespace: "shop", Name: "data"},
			OperationID:        "snap-1",
		},
		Status: itemoperation.OperationStatus{Phase: itemoperation.OperationPhaseInProgress, NCompleted: 2, NTotal: 8},
	})
	fmt.Println(op.Owner, op.Action, op.Resource.Resource, op.ID, op.Status.Phase, op.Status.NCompleted, op.Status.NTotal)

	back, err := itemvelero.ToBackupOperation(op)
	fmt.Println(back.Spec.BackupName, back.Spec.OperationID, err)
	// Output:
	// Backup/nightly velero.io/csi-pvc-backupper persistentvolumeclaims snap-1 InProgress 2 8
	// nightly snap-1 <nil>
}

// A fork's server: load the runs still waiting, poll them with the fork's plugins, and
// upload each run's file after a pass.
func ExampleNewResolver() {
	var (
		ctx         context.Context
		store       operations.Store
		plugins     clientmgmt.Manager      // the server's plugin manager
		backupStore persistence.BackupStore // the backup storage location's
		waiting     []*velerov1api.Backup   // backups in a waiting or finalizing phase
		getBackup   func(ctx context.Context, o operations.Owner) (*velerov1api.Backup, error)
	)
	for _, b := range waiting {
		if _, err := itemvelero.LoadBackup(ctx, store, backupStore, b); err != nil {
			fmt.Println(err)
		}
	}
	resolver := itemvelero.NewResolver(plugins, itemvelero.Objects{Backup: getBackup})
	monitor := monitor.New(store, resolver, monitor.WithDefaultOperationTimeout(4*time.Hour))
	for _, b := range waiting {
		owner := operations.Owner{Kind: phase.Backup, Name: b.Name, UID: string(b.UID)}
		if _, err := monitor.Poll(ctx, owner); err != nil {
			fmt.Println(err)
		}
		if err := itemvelero.Save(ctx, store, backupStore, owner); err != nil {
			fmt.Println(err)
		}
	}
}
