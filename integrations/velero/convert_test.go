package velero_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/vmware-tanzu/velero/pkg/itemoperation"
	"github.com/vmware-tanzu/velero/pkg/itemoperationmap"
	vplugin "github.com/vmware-tanzu/velero/pkg/plugin/velero"
	"github.com/vmware-tanzu/velero/pkg/util/encode"

	"github.com/itemops/itemops/integrations/velero"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/opsfile"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/memstore"
)

// corpus makes random Velero records: every field set or empty, strings with what JSON
// escapes, times in several zones.
type corpus struct{ r *rand.Rand }

func newCorpus(seed uint64) corpus { return corpus{rand.New(rand.NewPCG(seed, 15))} }

var pieces = []string{"a", "pod-1", "ns-1", "velero.io", "<", ">", "&", "\u2028", "\u2029", "é", "日本", "\"", "\\", "\n", " ", "\x01"}

func (c corpus) str(empty bool) string {
	n := c.r.IntN(4)
	if !empty {
		n++
	}
	s := ""
	for range n {
		s += pieces[c.r.IntN(len(pieces))]
	}
	return s
}

func (c corpus) id() vplugin.ResourceIdentifier {
	return vplugin.ResourceIdentifier{
		GroupResource: schema.GroupResource{Group: c.str(true), Resource: c.str(true)},
		Namespace:     c.str(true),
		Name:          c.str(true),
	}
}

var zones = []*time.Location{time.UTC, time.FixedZone("east", 5*3600+1800), time.FixedZone("west", -8*3600)}

// time returns nil or a time; precise adds nanoseconds, which Velero's files drop.
func (c corpus) time(precise bool) *metav1.Time {
	if c.r.IntN(4) == 0 {
		return nil
	}
	t := time.Unix(c.r.Int64N(1<<33), 0).In(zones[c.r.IntN(len(zones))])
	if precise {
		t = t.Add(time.Duration(c.r.IntN(1e9)))
	}
	return &metav1.Time{Time: t}
}

var phases = []itemoperation.OperationPhase{
	itemoperation.OperationPhaseNew, itemoperation.OperationPhaseInProgress,
	itemoperation.OperationPhaseCompleted, itemoperation.OperationPhaseFailed,
}

func (c corpus) status(precise bool) itemoperation.OperationStatus {
	return itemoperation.OperationStatus{
		Phase:          phases[c.r.IntN(len(phases))],
		Error:          c.str(true),
		NCompleted:     c.r.Int64N(1 << 40),
		NTotal:         c.r.Int64N(1 << 40),
		OperationUnits: c.str(true),
		Description:    c.str(true),
		Created:        c.time(precise),
		Started:        c.time(precise),
		Updated:        c.time(precise),
	}
}

// backups returns n records of one backup, as a backup's file holds them.
func (c corpus) backups(n int, precise bool) []*itemoperation.BackupOperation {
	name, uid := c.str(false), c.str(true)
	ops := make([]*itemoperation.BackupOperation, n)
	for i := range ops {
		op := &itemoperation.BackupOperation{
			Spec: itemoperation.BackupOperationSpec{
				BackupName: name, BackupUID: uid, BackupItemAction: c.str(true),
				ResourceIdentifier: c.id(), OperationID: fmt.Sprintf("%s-%d", c.str(false), i),
			},
			Status: c.status(precise),
		}
		switch c.r.IntN(3) {
		case 1:
			op.Spec.PostOperationItems = []vplugin.ResourceIdentifier{}
		case 2:
			for range 1 + c.r.IntN(3) {
				op.Spec.PostOperationItems = append(op.Spec.PostOperationItems, c.id())
			}
		}
		ops[i] = op
	}
	return ops
}

func (c corpus) restores(n int, precise bool) []*itemoperation.RestoreOperation {
	name, uid := c.str(false), c.str(true)
	ops := make([]*itemoperation.RestoreOperation, n)
	for i := range ops {
		ops[i] = &itemoperation.RestoreOperation{
			Spec: itemoperation.RestoreOperationSpec{
				RestoreName: name, RestoreUID: uid, RestoreItemAction: c.str(true),
				ResourceIdentifier: c.id(), OperationID: fmt.Sprintf("%s-%d", c.str(false), i),
			},
			Status: c.status(precise),
		}
	}
	return ops
}

// TestConversionRoundTrips converts random Velero records to itemops and back, and
// itemops records to Velero and back: nothing is lost, nanoseconds and zones included.
func TestConversionRoundTrips(t *testing.T) {
	c := newCorpus(1)
	for i := range 200 {
		for _, want := range c.backups(1+i%5, true) {
			op := velero.FromBackupOperation(want)
			got, err := velero.ToBackupOperation(op)
			require.NoError(t, err)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("backup record %d: To(From(x)) differs from x (-want +got):\n%s", i, diff)
			}
			if diff := cmp.Diff(op, velero.FromBackupOperation(got)); diff != "" {
				t.Fatalf("backup record %d: From(To(x)) differs from x (-want +got):\n%s", i, diff)
			}
		}
		for _, want := range c.restores(1+i%5, true) {
			op := velero.FromRestoreOperation(want)
			got, err := velero.ToRestoreOperation(op)
			require.NoError(t, err)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("restore record %d: To(From(x)) differs from x (-want +got):\n%s", i, diff)
			}
			if diff := cmp.Diff(op, velero.FromRestoreOperation(got)); diff != "" {
				t.Fatalf("restore record %d: From(To(x)) differs from x (-want +got):\n%s", i, diff)
			}
		}
		p := vplugin.OperationProgress{
			Completed: c.r.IntN(2) == 0, Err: c.str(true), NCompleted: c.r.Int64N(100), NTotal: c.r.Int64N(100),
			OperationUnits: c.str(true), Description: c.str(true),
		}
		if t := c.time(true); t != nil {
			p.Started = t.Time
		}
		if diff := cmp.Diff(p, velero.ToProgress(velero.FromProgress(p))); diff != "" {
			t.Fatalf("progress %d: To(From(x)) differs from x (-want +got):\n%s", i, diff)
		}
	}
}

func TestConversionRefusesTheWrongKind(t *testing.T) {
	backupOp := operations.Operation{Owner: operations.Owner{Kind: phase.Backup, Name: "b"}, ID: "1"}
	restoreOp := operations.Operation{Owner: operations.Owner{Kind: phase.Restore, Name: "r"}, ID: "1"}
	_, err := velero.ToBackupOperation(restoreOp)
	require.ErrorIs(t, err, operations.ErrInvalid)
	_, err = velero.ToRestoreOperation(backupOp)
	require.ErrorIs(t, err, operations.ErrInvalid)
	restoreOp.PostOperationItems = []operations.ResourceIdentifier{}
	_, err = velero.ToRestoreOperation(restoreOp)
	require.ErrorIs(t, err, operations.ErrInvalid, "a restore record has no post-operation items")
}

// TestOwnKindsAreRefused: Velero knows only backups and restores, so every way into its
// files and plugins refuses an owner of a kind of one's own, saying so.
func TestOwnKindsAreRefused(t *testing.T) {
	own := operations.Owner{Kind: "DatabaseSnapshot", Name: "orders", UID: "u"}
	op := operations.Operation{Owner: own, ID: "1"}
	_, err := velero.ToBackupOperation(op)
	require.ErrorIs(t, err, operations.ErrInvalid)
	_, err = velero.ToRestoreOperation(op)
	require.ErrorIs(t, err, operations.ErrInvalid)
	err = velero.Save(context.Background(), nil, nil, own)
	require.ErrorIs(t, err, operations.ErrInvalid)
	require.ErrorContains(t, err, `kind "DatabaseSnapshot" is not Backup or Restore`)

	h := newHarness(t, phase.Backup, phase.WaitingForPluginOperations, testNow)
	tr, err := h.resolver().Resolve(h.action)
	require.NoError(t, err)
	op.Action = h.action
	_, err = tr.Progress(context.Background(), op)
	require.ErrorIs(t, err, operations.ErrInvalid)
	require.ErrorContains(t, err, `kind "DatabaseSnapshot" is not Backup or Restore`)
	err = tr.Cancel(context.Background(), op)
	require.ErrorIs(t, err, operations.ErrInvalid)
}

// TestVeleroWritesWhatEncodeWrites uploads random records through Velero's own path
// (its item-operations map's upload, encode.ToJSONGzip, the object-store BackupStore),
// and compares the object with what opsfile.Encode writes for the converted
// records, byte for byte, compressed.
func TestVeleroWritesWhatEncodeWrites(t *testing.T) {
	c := newCorpus(2)
	for i := range 50 {
		bs, objects := newBackupStore(t, "prefix")
		name := fmt.Sprintf("backup-%d", i)
		vops := c.backups(1+c.r.IntN(20), false)
		require.NoError(t, itemoperationmap.NewBackupItemOperationsMap().UploadProgressAndPutOperationsForBackup(
			bs, &itemoperationmap.OperationsForBackup{Operations: vops}, name))
		rname := fmt.Sprintf("restore-%d", i)
		rops := c.restores(1+c.r.IntN(20), false)
		require.NoError(t, itemoperationmap.NewRestoreItemOperationsMap().UploadProgressAndPutOperationsForRestore(
			bs, &itemoperationmap.OperationsForRestore{Operations: rops}, rname))

		ops := make([]operations.Operation, len(vops))
		for j, op := range vops {
			ops[j] = velero.FromBackupOperation(op)
		}
		var want bytes.Buffer
		require.NoError(t, opsfile.Encode(&want, ops))
		got, ok := objects.get("prefix/" + opsfile.BackupOperationsKey(name))
		require.True(t, ok, "Velero wrote no object at opsfile.BackupOperationsKey")
		require.Equal(t, want.Bytes(), got, "backup file %d", i)

		ops = ops[:0]
		for _, op := range rops {
			ops = append(ops, velero.FromRestoreOperation(op))
		}
		want.Reset()
		require.NoError(t, opsfile.Encode(&want, ops))
		got, ok = objects.get("prefix/" + opsfile.RestoreOperationsKey(rname))
		require.True(t, ok, "Velero wrote no object at opsfile.RestoreOperationsKey")
		require.Equal(t, want.Bytes(), got, "restore file %d", i)
	}
}

// inFile is what a record's times are once written: Velero's files hold seconds.
func inFile(op operations.Operation) operations.Operation {
	for _, t := range []*time.Time{&op.Status.Created, &op.Status.Started, &op.Status.Updated} {
		if !t.IsZero() {
			*t = t.Truncate(time.Second).UTC()
		}
	}
	return op
}

// TestDecodeReadsWhatVeleroWrites decodes, with opsfile.Decode, the bytes Velero's
// encode.ToJSONGzip writes, and compares with the converted records.
func TestDecodeReadsWhatVeleroWrites(t *testing.T) {
	c := newCorpus(3)
	for i := range 50 {
		vops := c.backups(1+c.r.IntN(20), true)
		buf, errs := encode.ToJSONGzip(vops, "test")
		require.Empty(t, errs)
		got, err := opsfile.Decode(buf)
		require.NoError(t, err)
		want := make([]operations.Operation, len(vops))
		for j, op := range vops {
			want[j] = inFile(velero.FromBackupOperation(op))
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("file %d (-Velero's records +decoded):\n%s", i, diff)
		}
	}
}

// TestVeleroReadsWhatSaveWrites saves runs with velero.Save (opsfile.Encode) and
// reads them with Velero's own BackupStore: the records are the converted ones.
func TestVeleroReadsWhatSaveWrites(t *testing.T) {
	ctx := context.Background()
	c := newCorpus(4)
	for i := range 30 {
		s := memstore.New()
		bs, _ := newBackupStore(t, "")

		vops := c.backups(1+c.r.IntN(20), true)
		owner := velero.FromBackupOperation(vops[0]).Owner
		ops := make([]operations.Operation, len(vops))
		for j, op := range vops {
			ops[j] = velero.FromBackupOperation(op)
		}
		require.NoError(t, s.CreateRun(ctx, operations.Run{Owner: owner, Phase: phase.New}))
		require.NoError(t, s.PutOperations(ctx, owner, ops))
		require.NoError(t, velero.Save(ctx, s, bs, owner))
		read, err := bs.GetBackupItemOperations(owner.Name)
		require.NoError(t, err)
		stored, err := s.ListOperations(ctx, owner, operations.OperationFilter{})
		require.NoError(t, err)
		want := make([]*itemoperation.BackupOperation, len(stored))
		for j, op := range stored {
			want[j], err = velero.ToBackupOperation(inFile(op))
			require.NoError(t, err)
		}
		if diff := cmp.Diff(want, read); diff != "" {
			t.Fatalf("backup file %d (-saved +read by Velero):\n%s", i, diff)
		}

		rops := c.restores(1+c.r.IntN(20), true)
		owner = velero.FromRestoreOperation(rops[0]).Owner
		ops = ops[:0]
		for _, op := range rops {
			ops = append(ops, velero.FromRestoreOperation(op))
		}
		require.NoError(t, s.CreateRun(ctx, operations.Run{Owner: owner, Phase: phase.New}))
		require.NoError(t, s.PutOperations(ctx, owner, ops))
		require.NoError(t, velero.Save(ctx, s, bs, owner))
		rread, err := bs.GetRestoreItemOperations(owner.Name)
		require.NoError(t, err)
		stored, err = s.ListOperations(ctx, owner, operations.OperationFilter{})
		require.NoError(t, err)
		rwant := make([]*itemoperation.RestoreOperation, len(stored))
		for j, op := range stored {
			rwant[j], err = velero.ToRestoreOperation(inFile(op))
			require.NoError(t, err)
		}
		if diff := cmp.Diff(rwant, rread); diff != "" {
			t.Fatalf("restore file %d (-saved +read by Velero):\n%s", i, diff)
		}
	}
}
