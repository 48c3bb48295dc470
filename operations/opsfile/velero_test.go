package opsfile_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/opsfile"
	"github.com/itemops/itemops/phase"
)

// The reference for byte compatibility: the shapes of Velero's BackupOperation and
// RestoreOperation, with Kubernetes' GroupResource embedded in ResourceIdentifier and
// metav1.Time's JSON methods, written out here so that encoding/json can say what
// Velero writes and reads.

type veleroGroupResource struct {
	Group    string
	Resource string
}

type veleroResourceIdentifier struct {
	veleroGroupResource
	Namespace string
	Name      string
}

type veleroBackupOperation struct {
	Spec   veleroBackupSpec      `json:"spec"`
	Status veleroOperationStatus `json:"status"`
}

type veleroBackupSpec struct {
	BackupName         string                     `json:"backupName"`
	BackupUID          string                     `json:"backupUID"`
	BackupItemAction   string                     `json:"backupItemAction"`
	ResourceIdentifier veleroResourceIdentifier   `json:"resourceIdentifier"`
	OperationID        string                     `json:"operationID"`
	PostOperationItems []veleroResourceIdentifier `json:"postOperationItems"`
}

type veleroRestoreOperation struct {
	Spec   veleroRestoreSpec     `json:"spec"`
	Status veleroOperationStatus `json:"status"`
}

type veleroRestoreSpec struct {
	RestoreName        string                   `json:"restoreName"`
	RestoreUID         string                   `json:"restoreUID"`
	RestoreItemAction  string                   `json:"restoreItemAction"`
	ResourceIdentifier veleroResourceIdentifier `json:"resourceIdentifier"`
	OperationID        string                   `json:"operationID"`
}

type veleroOperationStatus struct {
	Phase          string    `json:"phase,omitempty"`
	Error          string    `json:"error,omitempty"`
	NCompleted     int64     `json:"nCompleted,omitempty"`
	NTotal         int64     `json:"nTotal,omitempty"`
	OperationUnits string    `json:"operationUnits,omitempty"`
	Description    string    `json:"description,omitempty"`
	Created        *metaTime `json:"created,omitempty"`
	Started        *metaTime `json:"started,omitempty"`
	Updated        *metaTime `json:"updated,omitempty"`
}

// metaTime has metav1.Time's JSON methods.
type metaTime struct{ time.Time }

func (t metaTime) MarshalJSON() ([]byte, error) {
	if t.IsZero() {
		return []byte("null"), nil
	}
	b := []byte{'"'}
	b = t.UTC().AppendFormat(b, time.RFC3339)
	return append(b, '"'), nil
}

func (t *metaTime) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		t.Time = time.Time{}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	pt, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return err
	}
	t.Time = pt.Local()
	return nil
}

func veleroTime(t time.Time) *metaTime {
	if t.IsZero() {
		return nil
	}
	return &metaTime{t}
}

func veleroResource(r operations.ResourceIdentifier) veleroResourceIdentifier {
	return veleroResourceIdentifier{veleroGroupResource{r.Group, r.Resource}, r.Namespace, r.Name}
}

func veleroStatus(s operations.Status) veleroOperationStatus {
	return veleroOperationStatus{
		Phase: string(s.Phase), Error: s.Error, NCompleted: s.NCompleted, NTotal: s.NTotal,
		OperationUnits: s.OperationUnits, Description: s.Description,
		Created: veleroTime(s.Created), Started: veleroTime(s.Started), Updated: veleroTime(s.Updated),
	}
}

// veleroSlice returns ops as the slice Velero would hold: []veleroBackupOperation or
// []veleroRestoreOperation, by the kind of the first.
func veleroSlice(ops []operations.Operation) any {
	if len(ops) > 0 && ops[0].Owner.Kind == phase.Restore {
		out := make([]veleroRestoreOperation, len(ops))
		for i, op := range ops {
			out[i] = veleroRestoreOperation{
				Spec: veleroRestoreSpec{
					RestoreName: op.Owner.Name, RestoreUID: op.Owner.UID, RestoreItemAction: op.Action,
					ResourceIdentifier: veleroResource(op.Resource), OperationID: op.ID,
				},
				Status: veleroStatus(op.Status),
			}
		}
		return out
	}
	out := make([]veleroBackupOperation, len(ops))
	for i, op := range ops {
		var post []veleroResourceIdentifier
		if op.PostOperationItems != nil {
			post = make([]veleroResourceIdentifier, len(op.PostOperationItems))
			for j, r := range op.PostOperationItems {
				post[j] = veleroResource(r)
			}
		}
		out[i] = veleroBackupOperation{
			Spec: veleroBackupSpec{
				BackupName: op.Owner.Name, BackupUID: op.Owner.UID, BackupItemAction: op.Action,
				ResourceIdentifier: veleroResource(op.Resource), OperationID: op.ID, PostOperationItems: post,
			},
			Status: veleroStatus(op.Status),
		}
	}
	return out
}

// veleroJSON returns what Velero's writer puts in the gzip stream for ops.
func veleroJSON(t testing.TB, ops []operations.Operation) []byte {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, json.NewEncoder(&buf).Encode(veleroSlice(ops)))
	return buf.Bytes()
}

// jsonWritesInvalidUTF8Raw reports whether this toolchain's encoding/json writes invalid
// UTF-8 as a raw U+FFFD (Go 1.27 on) rather than as the escape \ufffd (Go 1.26 and before,
// with which Velero v1.16 to v1.18 are built). The codec writes the escape, as those
// releases do; both forms decode to the same string.
var jsonWritesInvalidUTF8Raw = func() bool {
	b, err := json.Marshal("\xff")
	return err == nil && string(b) != `"\ufffd"`
}()

// sameAsEncodingJSON reports whether got, what the codec wrote, is what encoding/json
// wrote (want): byte for byte, or, on a toolchain that writes invalid UTF-8 raw, as the
// same decoded values.
func sameAsEncodingJSON(want, got []byte) bool {
	if bytes.Equal(want, got) {
		return true
	}
	if !jsonWritesInvalidUTF8Raw {
		return false
	}
	var w, g any
	return json.Unmarshal(want, &w) == nil && json.Unmarshal(got, &g) == nil && cmp.Equal(w, g)
}

// gzipBytes compresses b as Velero does: a default gzip.Writer, one Write.
func gzipBytes(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, err := zw.Write(b)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

func gunzip(t testing.TB, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	require.NoError(t, err)
	out, err := io.ReadAll(zr)
	require.NoError(t, err)
	return out
}

func encode(t testing.TB, ops []operations.Operation) []byte {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, opsfile.Encode(&buf, ops))
	return buf.Bytes()
}

// goldenOp is the backup operation of the golden file testdata/backup.json.
func goldenOp() operations.Operation {
	return operations.Operation{
		Owner:    operations.Owner{Kind: phase.Backup, Name: "backup-1", UID: "f8c72709-0f73-46e1-a071-116bc4a76b07"},
		Action:   "velero.io/csi-pvc-backupper",
		Resource: operations.ResourceIdentifier{Resource: "persistentvolumeclaims", Namespace: "my-app", Name: "data-0"},
		ID:       "op-1",
		Status: operations.Status{
			Phase: operations.OperationInProgress, NCompleted: 12345, NTotal: 99999, OperationUnits: "Bytes",
			Created: time.Date(2022, 12, 14, 12, 0, 0, 0, time.UTC),
		},
	}
}

// manyOps returns n operations of one owner of kind, as a data mover would record them:
// varied names and IDs, most in progress, some with post-operation items. The same n
// and kind always give the same operations, with times in UTC to the second.
func manyOps(kind phase.Kind, n int) []operations.Operation {
	rng := rand.New(rand.NewSource(int64(n)))
	owner := operations.Owner{Kind: kind, Name: "nightly-20240101", UID: "0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0"}
	base := time.Date(2024, 1, 1, 2, 0, 0, 0, time.UTC)
	phases := []operations.OperationPhase{operations.OperationNew, operations.OperationInProgress, operations.OperationInProgress, operations.OperationCompleted, operations.OperationFailed}
	ops := make([]operations.Operation, n)
	for i := range ops {
		ns := fmt.Sprintf("team-%03d", rng.Intn(200))
		op := operations.Operation{
			Owner:    owner,
			Action:   "velero.io/csi-pvc-backupper",
			Resource: operations.ResourceIdentifier{Resource: "persistentvolumeclaims", Namespace: ns, Name: fmt.Sprintf("data-%d", i)},
			ID:       fmt.Sprintf("du-%08x-%04x", rng.Uint32(), i%0x10000),
			Status: operations.Status{
				Phase:          phases[rng.Intn(len(phases))],
				NCompleted:     rng.Int63n(1 << 30),
				NTotal:         1<<30 + rng.Int63n(1<<30),
				OperationUnits: "Bytes",
				Created:        base.Add(time.Duration(i) * time.Second),
				Started:        base.Add(time.Duration(i)*time.Second + 5*time.Second),
				Updated:        base.Add(time.Duration(i)*time.Second + time.Duration(rng.Intn(3600))*time.Second),
			},
		}
		if kind == phase.Restore {
			op.Action = "velero.io/csi-pvc-restorer"
		} else if i%10 == 0 {
			op.PostOperationItems = []operations.ResourceIdentifier{{Group: "velero.io", Resource: "datauploads", Namespace: "velero", Name: op.ID}}
		}
		if op.Status.Phase == operations.OperationFailed {
			op.Status.Error = "data path error: connection reset by peer"
		}
		ops[i] = op
	}
	return ops
}
