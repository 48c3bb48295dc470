package opsfile_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/opsfile"
	"github.com/itemops/itemops/phase"
)

// FuzzDecode feeds the decoder JSON text, gzip'd by the harness (raw false), or bytes
// taken as the compressed file itself (raw true). Whatever happens it must not panic,
// and must fail with a *DecodeError wrapping one of the codec's sentinels. Whatever it
// accepts must encode again, and decode to the same records, which encode to the same
// bytes.
func FuzzDecode(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no golden files: %v", err)
	}
	for _, name := range files {
		text, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(text, false)
		f.Add(gzipBytes(f, text), true)
	}
	for _, text := range []string{
		"", "[", "[]", " [ ] ", "[]\n[]", "{}", "null", " null \n", "null[]", "nul", "[null]", "[" + record + ",null]", `["x"]`, "[" + record + ",]",
		"[" + record + " " + record + "]",
		`[{"spec":{}}]`,
		`[{"spec":{"backupName":"b","operationID":"o","postOperationItems":[]},"status":{"phase":"New"}}]`,
		`[{"spec":{"restoreName":"r","operationID":"o"},"status":{"phase":"Completed","created":"2022-12-14T13:00:00.5+01:00"}}]`,
		`[{"spec":{"BACKUPNAME":"b","operationid":"o","extra":{"a":[1,2]}},"status":{"phase":"Failed","error":"\u003c\u2028\ud800"}}]`,
		`[{"spec":{"backupName":"b","operationID":"o"},"status":{"phase":"New","nTotal":1e3}}]`,
		`[{"spec":{"backupName":"b","operationID":"o"},"status":{"phase":"New","updated":"0000-01-01T00:00:00Z"}}]`,
		`[{"spec":{"backupName":"b","operationID":"o"},"status":{"phase":"Running"}}]`,
		`[{"spec":{"backupName":"b","restoreName":"r","operationID":"o"},"status":{"phase":"New"}}]`,
	} {
		f.Add([]byte(text), false)
	}
	f.Fuzz(func(t *testing.T, data []byte, raw bool) {
		file := data
		if !raw {
			file = gzipBytes(t, data)
		}
		opts := []opsfile.DecodeOption{opsfile.WithSizeLimit(1 << 20), opsfile.WithRecordSizeLimit(64 << 10)}
		ops, err := opsfile.Decode(bytes.NewReader(file), opts...)
		if err != nil {
			var de *opsfile.DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("Decode error %v (%T) is not a *DecodeError", err, err)
			}
			if !errors.Is(err, opsfile.ErrMalformed) && !errors.Is(err, opsfile.ErrTooLarge) && !errors.Is(err, operations.ErrInvalid) {
				t.Fatalf("Decode error %v wraps none of ErrMalformed, ErrTooLarge, ErrInvalid", err)
			}
			if ops != nil {
				t.Fatalf("Decode returned %d operations with error %v", len(ops), err)
			}
			return
		}
		for i, op := range ops {
			for _, tm := range []time.Time{op.Status.Created, op.Status.Started, op.Status.Updated} {
				if !tm.IsZero() && (tm.Location() != time.UTC || tm.Nanosecond() != 0) {
					t.Fatalf("record %d: time %v is not UTC to the second", i, tm)
				}
			}
		}
		var again bytes.Buffer
		if err := opsfile.Encode(&again, ops); err != nil {
			t.Fatalf("Encode of decoded records: %v", err)
		}
		ops2, err := opsfile.Decode(bytes.NewReader(again.Bytes()), opts...)
		if err != nil {
			t.Fatalf("Decode of re-encoded records: %v", err)
		}
		if diff := cmp.Diff(ops, ops2); diff != "" {
			t.Fatalf("records changed in a round trip (-first +second):\n%s", diff)
		}
		var third bytes.Buffer
		if err := opsfile.Encode(&third, ops2); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again.Bytes(), third.Bytes()) {
			t.Fatal("encoding the same records twice gave different bytes")
		}
	})
}

// FuzzEncode checks the hand-written encoder against encoding/json writing Velero's
// types, for any strings, numbers and times, and that what it writes decodes back.
func FuzzEncode(f *testing.F) {
	f.Add(true, "backup-1", "f8c72709", "velero.io/csi-pvc-backupper", "persistentvolumeclaims", "my-app", "data-0", "op-1",
		"", "Bytes", "", int64(12345), int64(99999), int64(1671019200), int64(0), 0)
	f.Add(false, "r<1>", "&", "\u2028", "\x00\x1f\x7f", "\xff\xfe", "日本", "\"\\/", "\b\f\n\r\t", "\ufffd", "🚀",
		int64(-1), int64(-1<<63), int64(-62135596800), int64(253402300799), 3)
	f.Fuzz(func(t *testing.T, backup bool, name, uid, action, resource, namespace, item, id, errText, units, description string,
		done, total, created, started int64, phaseIndex int) {
		kind := phase.Restore
		if backup {
			kind = phase.Backup
		}
		phases := []operations.OperationPhase{operations.OperationNew, operations.OperationInProgress, operations.OperationCompleted, operations.OperationFailed}
		op := operations.Operation{
			Owner:    operations.Owner{Kind: kind, Name: name, UID: uid},
			Action:   action,
			Resource: operations.ResourceIdentifier{Group: namespace, Resource: resource, Namespace: namespace, Name: item},
			ID:       id,
			Status: operations.Status{
				Phase: phases[uint(phaseIndex)%uint(len(phases))], Error: errText,
				NCompleted: done, NTotal: total, OperationUnits: units, Description: description,
				Created: time.Unix(created, 0), Started: time.Unix(started, done%1e9),
			},
		}
		if backup && phaseIndex%2 == 0 {
			op.PostOperationItems = []operations.ResourceIdentifier{op.Resource, {Name: errText}}
		}
		ops := []operations.Operation{op}
		var buf bytes.Buffer
		err := opsfile.Encode(&buf, ops)
		if err != nil {
			if !errors.Is(err, operations.ErrInvalid) {
				t.Fatalf("Encode error %v does not wrap ErrInvalid", err)
			}
			if buf.Len() != 0 {
				t.Fatal("Encode wrote before refusing")
			}
			return
		}
		if want, got := veleroJSON(t, ops), gunzip(t, buf.Bytes()); !sameAsEncodingJSON(want, got) {
			t.Fatalf("Encode differs from encoding/json:\nwant %q\n got %q", want, got)
		}
		// Invalid UTF-8 is written as the escape \ufffd and decodes to U+FFFD, which is
		// written as itself: the first round trip may change the bytes, but from then on
		// records and bytes are stable.
		decoded, err := opsfile.Decode(bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatalf("Decode of encoded record: %v", err)
		}
		var again bytes.Buffer
		if err := opsfile.Encode(&again, decoded); err != nil {
			t.Fatal(err)
		}
		decoded2, err := opsfile.Decode(bytes.NewReader(again.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(decoded, decoded2); diff != "" {
			t.Fatalf("records changed in a round trip (-first +second):\n%s", diff)
		}
		if !bytes.Equal(buf.Bytes(), again.Bytes()) && validUTF8(op) {
			t.Fatal("decoding and encoding again changed the file of valid UTF-8")
		}
	})
}

// validUTF8 reports whether every string of op is valid UTF-8.
func validUTF8(op operations.Operation) bool {
	for _, s := range []string{op.Owner.Name, op.Owner.UID, op.Action, op.ID, op.Resource.Group, op.Resource.Resource,
		op.Resource.Namespace, op.Resource.Name, string(op.Status.Phase), op.Status.Error, op.Status.OperationUnits, op.Status.Description} {
		if !utf8.ValidString(s) {
			return false
		}
	}
	for _, r := range op.PostOperationItems {
		if !validUTF8(operations.Operation{Resource: r}) {
			return false
		}
	}
	return true
}
