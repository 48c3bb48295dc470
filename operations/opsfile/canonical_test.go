package opsfile

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// records returns the JSON text of each record of an itemoperations file's text, cut by
// the decoder's own framing.
func records(t testing.TB, text []byte) [][]byte {
	t.Helper()
	f := frames{r: bytes.NewReader(text), buf: make([]byte, 1024), limit: math.MaxInt64, recordLimit: math.MaxInt64}
	var out [][]byte
	c, err := f.peek()
	if err != nil || c != '[' {
		t.Fatalf("not an array: %q %v", c, err)
	}
	f.lo++
	for {
		c, err := f.peek()
		if err != nil {
			t.Fatal(err)
		}
		if c == ']' {
			return out
		}
		if c == ',' {
			f.lo++
			f.peek()
		}
		b, complete, err := f.value()
		if err != nil || !complete {
			t.Fatalf("record %d: complete %v, %v", len(out), complete, err)
		}
		out = append(out, bytes.Clone(b))
	}
}

// encodedText returns the decompressed text Encode writes for ops.
func encodedText(t testing.TB, ops []operations.Operation) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Encode(&buf, ops); err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	text, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return text
}

// checkCanonical checks that whenever parseCanonical reads a record, encoding/json reads
// it too, to the same values; and reports whether parseCanonical read it.
func checkCanonical(t *testing.T, b []byte) bool {
	t.Helper()
	var fast, slow wireRecord
	var in interner
	if !parseCanonical(b, &fast, &in) {
		return false
	}
	if err := json.Unmarshal(b, &slow); err != nil {
		t.Fatalf("parseCanonical read %q, encoding/json refuses it: %v", b, err)
	}
	if diff := cmp.Diff(slow, fast, cmp.AllowUnexported(wireTime{})); diff != "" {
		t.Fatalf("parseCanonical(%q) differs from encoding/json (-json +fast):\n%s", b, diff)
	}
	return true
}

// TestCanonicalReadsWhatEncodeWrites checks that the records Encode writes take the fast
// path, and give what encoding/json gives, except those with a string that needs an
// escape, which encoding/json reads.
func TestCanonicalReadsWhatEncodeWrites(t *testing.T) {
	owner := operations.Owner{Kind: phase.Backup, Name: "backup-1", UID: "f8c72709"}
	full := operations.Operation{
		Owner: owner, Action: "velero.io/csi-pvc-backupper", ID: "op-1",
		Resource: operations.ResourceIdentifier{Group: "g", Resource: "persistentvolumeclaims", Namespace: "ns", Name: "data-0"},
		Status: operations.Status{Phase: operations.OperationFailed, Error: "ünïcödé 🚀", NCompleted: math.MaxInt64, NTotal: math.MaxInt64,
			OperationUnits: "Bytes", Description: "d",
			Created: time.Date(2022, 12, 14, 12, 0, 0, 0, time.UTC), Started: time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC),
			Updated: time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)},
	}
	bare := operations.Operation{Owner: operations.Owner{Kind: phase.Backup, Name: "b"}, ID: "x", Status: operations.Status{Phase: operations.OperationNew}}
	items := full
	items.PostOperationItems = []operations.ResourceIdentifier{{Resource: "pods", Name: "a"}, {Group: "velero.io", Resource: "datauploads", Namespace: "velero", Name: "b"}}
	empty := bare
	empty.PostOperationItems = []operations.ResourceIdentifier{}
	restore := full
	restore.Owner.Kind = phase.Restore
	escaped := full
	escaped.Status.Error = "a <b> & \"c\"\n"

	tests := []struct {
		name string
		ops  []operations.Operation
		fast bool
	}{
		{"every status field", []operations.Operation{full}, true},
		{"only a phase", []operations.Operation{bare}, true},
		{"post-operation items", []operations.Operation{items}, true},
		{"empty post-operation items", []operations.Operation{empty}, true},
		{"a restore", []operations.Operation{restore}, true},
		{"a string with escapes", []operations.Operation{escaped}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for i, b := range records(t, encodedText(t, tc.ops)) {
				if got := checkCanonical(t, b); got != tc.fast {
					t.Errorf("record %d: fast path taken = %v, want %v: %s", i, got, tc.fast, b)
				}
			}
		})
	}
}

func TestCanonicalInterns(t *testing.T) {
	ops := make([]operations.Operation, 3)
	for i := range ops {
		ops[i] = operations.Operation{Owner: operations.Owner{Kind: phase.Backup, Name: "backup-1", UID: "u"}, Action: "p", ID: strings.Repeat("x", i+1),
			Resource: operations.ResourceIdentifier{Resource: "pods", Namespace: "ns", Name: "n"}, Status: operations.Status{Phase: operations.OperationNew, OperationUnits: "Bytes"}}
	}
	var in interner
	for i, b := range records(t, encodedText(t, ops)) {
		var rec wireRecord
		if !parseCanonical(b, &rec, &in) {
			t.Fatalf("record %d not canonical", i)
		}
	}
	want := []string{"backup-1", "u", "p", "", "pods", "ns", "New", "Bytes"}
	if len(in.m) != len(want) {
		t.Errorf("interned %d strings %v, want %v", len(in.m), in.m, want)
	}
	for _, s := range want {
		if _, ok := in.m[s]; !ok {
			t.Errorf("%q is not interned", s)
		}
	}
}

func TestInternerBounds(t *testing.T) {
	var in interner
	for i := 0; i < 2*maxInterned; i++ {
		in.get([]byte(strings.Repeat("a", i%7) + string(rune('A'+i%26)) + strings.Repeat("b", i)))
	}
	long := bytes.Repeat([]byte("z"), maxInternedLen+1)
	in.get(long)
	if len(in.m) > maxInterned {
		t.Errorf("interner holds %d strings, want at most %d", len(in.m), maxInterned)
	}
	if _, ok := in.m[string(long)]; ok {
		t.Errorf("interner kept a string of %d bytes", len(long))
	}
}

// FuzzCanonical checks the fast path against encoding/json on any record: whatever the
// fast path reads, encoding/json reads to the same values.
func FuzzCanonical(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	for _, name := range files {
		text, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		for _, b := range records(f, text) {
			f.Add(b)
		}
	}
	for _, s := range []string{
		`{"spec":{"backupName":"b","backupUID":"","backupItemAction":"","resourceIdentifier":{"Group":"","Resource":"","Namespace":"","Name":""},"operationID":"o","postOperationItems":null},"status":{"nCompleted":-0,"nTotal":00}}`,
		`{"spec":{"restoreName":"r","restoreUID":"","restoreItemAction":"","resourceIdentifier":{"Group":"","Resource":"","Namespace":"","Name":""},"operationID":"o"},"status":{"nCompleted":-9223372036854775808,"nTotal":9223372036854775808}}`,
		`{"spec":{"restoreName":"r","restoreUID":"","restoreItemAction":"","resourceIdentifier":{"Group":"","Resource":"","Namespace":"","Name":""},"operationID":"o"},"status":{"phase":"New","created":"2023-02-29T00:00:00Z","nTotal":1e3}}`,
		`{"spec":{"backupName":"\xff","backupUID":"","backupItemAction":"","resourceIdentifier":{"Group":"","Resource":"","Namespace":"","Name":""},"operationID":"o","postOperationItems":[{"Group":"","Resource":"","Namespace":"","Name":""},]},"status":{}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkCanonical(t, b)
	})
}
