package opsfile_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/opsfile"
	"github.com/itemops/itemops/phase"
)

func readGolden(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return b
}

type goldenCase struct {
	name   string
	golden string                 // file in testdata: the exact decompressed text
	ops    []operations.Operation // what is encoded
	// decoded is what decoding the golden file gives, when it differs from ops (times
	// in UTC, to the second).
	decoded []operations.Operation
	kind    phase.Kind // what the decoder reports
}

func goldenCases() []goldenCase {
	cet := time.FixedZone("CET", 3600)
	restoreOwner := operations.Owner{Kind: phase.Restore, Name: "restore-1", UID: "5d1c2b3a-7e8f-4a6b-9c0d-1e2f3a4b5c6d"}
	restoreOps := []operations.Operation{{
		Owner:    restoreOwner,
		Action:   "velero.io/csi-pvc-restorer",
		Resource: operations.ResourceIdentifier{Resource: "persistentvolumeclaims", Namespace: "my-app", Name: "data-0"},
		ID:       "dd-7f3a",
		Status: operations.Status{
			Phase: operations.OperationFailed, Error: "data mover <node-1> failed & gave up",
			NCompleted: 100, NTotal: 4096, OperationUnits: "Bytes", Description: `restoring to "data-0"`,
			// Local times with fractions of a second: written in UTC, to the second.
			Created: time.Date(2022, 12, 14, 13, 0, 0, 999_999_999, cet),
			Started: time.Date(2022, 12, 14, 13, 0, 5, 1, cet),
			Updated: time.Date(2022, 12, 14, 12, 30, 0, 0, time.UTC),
		},
	}, {
		Owner:    restoreOwner,
		Action:   "example.io/snapshot-restorer",
		Resource: operations.ResourceIdentifier{Group: "snapshot.storage.k8s.io", Resource: "volumesnapshots", Namespace: "my-app", Name: "snap-0"},
		ID:       "op-2",
		Status:   operations.Status{Phase: operations.OperationNew},
	}}
	restoreDecoded := []operations.Operation{restoreOps[0].Clone(), restoreOps[1].Clone()}
	restoreDecoded[0].Status.Created = time.Date(2022, 12, 14, 12, 0, 0, 0, time.UTC)
	restoreDecoded[0].Status.Started = time.Date(2022, 12, 14, 12, 0, 5, 0, time.UTC)

	b2 := operations.Owner{Kind: phase.Backup, Name: "backup-2"}
	itemOps := []operations.Operation{{
		Owner: b2, Action: "example.io/a", ID: "nil-items",
		Resource: operations.ResourceIdentifier{Group: "apps", Resource: "deployments", Namespace: "ns", Name: "web"},
		Status:   operations.Status{Phase: operations.OperationCompleted},
	}, {
		Owner: b2, Action: "example.io/a", ID: "empty-items",
		Resource:           operations.ResourceIdentifier{Resource: "namespaces", Name: "ns"},
		PostOperationItems: []operations.ResourceIdentifier{},
		Status:             operations.Status{Phase: operations.OperationCompleted},
	}, {
		Owner: b2, Action: "example.io/a", ID: "two-items",
		Resource: operations.ResourceIdentifier{Resource: "pods", Namespace: "ns", Name: "web-0"},
		PostOperationItems: []operations.ResourceIdentifier{
			{Resource: "persistentvolumeclaims", Namespace: "ns", Name: "data-0"},
			{Group: "velero.io", Resource: "datauploads", Namespace: "velero", Name: "du-1"},
		},
		Status: operations.Status{Phase: operations.OperationNew, NCompleted: 1<<63 - 1, NTotal: 1<<63 - 1},
	}}

	escOps := []operations.Operation{{
		Owner:    operations.Owner{Kind: phase.Backup, Name: "b<script>", UID: "&amp;"},
		Action:   `example.io/"quoted"\back`,
		Resource: operations.ResourceIdentifier{Resource: "configmaps", Namespace: "ns", Name: "a\u2028b\u2029c"},
		ID:       "id\b\f\n\r\t\x00\x1f\x7f",
		Status: operations.Status{
			Phase: operations.OperationFailed,
			Error: "bad byte \xff and \xe2\x80 end", Description: "héllo, 世界 🚀 \u2028",
		},
	}}
	escDecoded := []operations.Operation{escOps[0].Clone()}
	escDecoded[0].Status.Error = "bad byte \ufffd and \ufffd\ufffd end" // invalid UTF-8 does not survive

	return []goldenCase{
		{name: "one backup operation", golden: "backup.json", ops: []operations.Operation{goldenOp()}, kind: phase.Backup},
		{name: "restore with every status field", golden: "restore.json", ops: restoreOps, decoded: restoreDecoded, kind: phase.Restore},
		{name: "nil, empty and listed post-operation items", golden: "backup-items.json", ops: itemOps, kind: phase.Backup},
		{name: "HTML, control characters, U+2028, invalid UTF-8", golden: "escaping.json", ops: escOps, decoded: escDecoded, kind: phase.Backup},
		{name: "empty list", golden: "empty.json", ops: nil, kind: ""},
	}
}

// TestEncodeGolden checks the bytes Encode writes against the golden files, which are
// also checked against what encoding/json writes for Velero's types.
func TestEncodeGolden(t *testing.T) {
	for _, tc := range goldenCases() {
		t.Run(tc.name, func(t *testing.T) {
			want := readGolden(t, tc.golden)
			require.True(t, sameAsEncodingJSON(veleroJSON(t, tc.ops), want), "the golden file is not what encoding/json writes for Velero's types:\n%s\n%s", want, veleroJSON(t, tc.ops))

			got := encode(t, tc.ops)
			if diff := cmp.Diff(string(want), string(gunzip(t, got))); diff != "" {
				t.Errorf("Encode wrote, after gunzip (-want +got):\n%s", diff)
			}
			require.Equal(t, gzipBytes(t, want), got, "compressed bytes differ from Velero's gzip.Writer")
		})
	}
}

// TestEncodeLeavesOutMonitorState checks that a Monitor's state of an operation is not
// in the file: the golden cases, each operation with every field of its MonitorState
// set, encode to the golden bytes, which are Velero's, and decode with a zero state.
func TestEncodeLeavesOutMonitorState(t *testing.T) {
	state := operations.MonitorState{ProgressAt: time.Unix(1700000000, 0).UTC(), Attempts: 2,
		ErrorSince: time.Unix(1700000100, 0).UTC(), NextPoll: time.Unix(1700000200, 0).UTC(), LastError: "unavailable"}
	for _, tc := range goldenCases() {
		t.Run(tc.name, func(t *testing.T) {
			ops := make([]operations.Operation, len(tc.ops))
			for i := range tc.ops {
				ops[i] = tc.ops[i].Clone()
				ops[i].Monitor = state
			}
			got := encode(t, ops)
			require.Equal(t, gzipBytes(t, readGolden(t, tc.golden)), got)
			decoded, err := opsfile.Decode(bytes.NewReader(got))
			require.NoError(t, err)
			for _, op := range decoded {
				require.Zero(t, op.Monitor, op.ID)
			}
		})
	}
}

func TestDecodeGolden(t *testing.T) {
	for _, tc := range goldenCases() {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.decoded
			if want == nil {
				want = tc.ops
			}
			file := gzipBytes(t, readGolden(t, tc.golden))
			got, err := opsfile.Decode(bytes.NewReader(file))
			require.NoError(t, err)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Decode (-want +got):\n%s", diff)
			}
			d, err := opsfile.NewDecoder(bytes.NewReader(file))
			require.NoError(t, err)
			if d.Kind() != tc.kind {
				t.Errorf("Kind() = %q, want %q", d.Kind(), tc.kind)
			}
		})
	}
}

// TestEncodeMatchesEncodingJSON compares Encode with encoding/json writing Velero's
// types, on values chosen to hit every branch of the string escaping and the time and
// number formats.
func TestEncodeMatchesEncodingJSON(t *testing.T) {
	var ascii strings.Builder
	for c := 0; c < 0x80; c++ {
		ascii.WriteByte(byte(c))
	}
	tokyo := time.FixedZone("JST", 9*3600)
	tests := []struct {
		name string
		op   func(*operations.Operation)
	}{
		{"every ASCII byte", func(op *operations.Operation) { op.Status.Description = ascii.String() }},
		{"HTML characters", func(op *operations.Operation) { op.Status.Error = `<a href="x?a=1&b=2">'</a>` }},
		{"line and paragraph separators", func(op *operations.Operation) { op.Action = "\u2028\u2029\u2027\u202a" }},
		{"lone continuation byte", func(op *operations.Operation) { op.Resource.Name = "a\x80b" }},
		{"truncated sequence at end", func(op *operations.Operation) { op.Resource.Namespace = "ab\xe2\x82" }},
		{"overlong encoding", func(op *operations.Operation) { op.ID = "\xc0\xaf" }},
		{"surrogate half", func(op *operations.Operation) { op.Owner.UID = "\xed\xa0\x80" }},
		{"beyond U+10FFFF", func(op *operations.Operation) { op.Status.OperationUnits = "\xf4\x90\x80\x80" }},
		{"four-byte runes", func(op *operations.Operation) { op.Owner.Name = "𝔟𝔞𝔠𝔨𝔲𝔭-🚀" }},
		{"U+FFFD itself", func(op *operations.Operation) { op.Status.Error = "\ufffd" }},
		{"extreme integers (no count is negative)", func(op *operations.Operation) { op.Status.NCompleted, op.Status.NTotal = 1<<63-1, 1<<63-1 }},
		{"zero progress is left out", func(op *operations.Operation) {
			op.Status.NCompleted, op.Status.NTotal, op.Status.OperationUnits = 0, 0, ""
		}},
		{"times in another zone with nanoseconds", func(op *operations.Operation) {
			op.Status.Created = time.Date(2023, 3, 26, 1, 59, 59, 999_999_999, tokyo)
			op.Status.Started = time.Date(2023, 3, 26, 2, 0, 0, 1, tokyo)
			op.Status.Updated = time.Date(2023, 3, 26, 2, 0, 0, 0, time.Local)
		}},
		{"first and last years RFC 3339 allows", func(op *operations.Operation) {
			op.Status.Created = time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)
			op.Status.Updated = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
		}},
		{"zero times are left out", func(op *operations.Operation) { op.Status.Created = time.Time{} }},
		{"every status field", func(op *operations.Operation) {
			op.Status = operations.Status{Phase: operations.OperationFailed, Error: "e", NCompleted: 1, NTotal: 2, OperationUnits: "u", Description: "d",
				Created: time.Unix(1, 0), Started: time.Unix(2, 0), Updated: time.Unix(3, 0)}
		}},
		{"post-operation items with escapes", func(op *operations.Operation) {
			op.PostOperationItems = []operations.ResourceIdentifier{{Group: "<g>", Resource: "r&", Namespace: "\n", Name: "\u2029"}}
		}},
	}
	for _, tc := range tests {
		for _, kind := range []phase.Kind{phase.Backup, phase.Restore} {
			t.Run(tc.name+"/"+string(kind), func(t *testing.T) {
				op := goldenOp()
				tc.op(&op)
				op.Owner.Kind = kind
				if kind == phase.Restore {
					op.PostOperationItems = nil
				}
				ops := []operations.Operation{op, goldenOp()}
				ops[1].Owner.Kind = kind
				want, got := veleroJSON(t, ops), gunzip(t, encode(t, ops))
				if !sameAsEncodingJSON(want, got) {
					t.Errorf("Encode differs from encoding/json (-want +got):\n%s", cmp.Diff(string(want), string(got)))
				}
			})
		}
	}
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ops  []operations.Operation
	}{
		{"one backup operation", []operations.Operation{goldenOp()}},
		{"16 operations, one full chunk", manyOps(phase.Backup, 16)},
		{"17 operations, one more than a chunk", manyOps(phase.Backup, 17)},
		{"1,000 backup operations", manyOps(phase.Backup, 1000)},
		{"5,000 operations, past a chunk of 4096", manyOps(phase.Backup, 5000)},
		{"1,000 restore operations", manyOps(phase.Restore, 1000)},
		{"post-operation items nil, empty and listed", goldenCases()[2].ops},
		{"progress beyond its total", func() []operations.Operation {
			op := goldenOp()
			op.Status.NCompleted, op.Status.NTotal = 1<<63-1, 1
			return []operations.Operation{op}
		}()},
		{"quotes, backslash runs and brackets inside strings", func() []operations.Operation {
			op := goldenOp()
			op.Status.Error = `x\"}]{[\\`
			op.Status.Description = `"\\\"` + "\\"
			op.Action = `}}]]"`
			op.Resource.Name = `\`
			return []operations.Operation{op, goldenOp()}
		}()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := opsfile.Decode(bytes.NewReader(encode(t, tc.ops)))
			require.NoError(t, err)
			// cmp tells a nil slice from an empty one, so this also checks that the
			// distinction survives.
			if diff := cmp.Diff(tc.ops, got); diff != "" {
				t.Errorf("Decode(Encode(ops)) (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecodeTimes(t *testing.T) {
	text := `[{"spec":{"backupName":"b","operationID":"op"},"status":{"phase":"New",` +
		`"created":"2022-12-14T13:00:00.999+01:00","started":"2022-12-14T11:30:05-00:30","updated":null}}]`
	got, err := opsfile.Decode(bytes.NewReader(gzipBytes(t, []byte(text))))
	require.NoError(t, err)
	require.Len(t, got, 1)
	s := got[0].Status
	for _, tc := range []struct {
		name      string
		got, want time.Time
	}{
		{"created", s.Created, time.Date(2022, 12, 14, 12, 0, 0, 0, time.UTC)},
		{"started", s.Started, time.Date(2022, 12, 14, 12, 0, 5, 0, time.UTC)},
		{"updated", s.Updated, time.Time{}},
	} {
		if !tc.got.Equal(tc.want) || tc.got.Nanosecond() != 0 {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
		}
		if !tc.got.IsZero() && tc.got.Location() != time.UTC {
			t.Errorf("%s is in %v, want UTC", tc.name, tc.got.Location())
		}
	}
}

// record is a well-formed backup record for building test files.
const record = `{"spec":{"backupName":"b","backupUID":"u","backupItemAction":"p","resourceIdentifier":{"Group":"","Resource":"pods","Namespace":"ns","Name":"n"},"operationID":"op-1","postOperationItems":null},"status":{"phase":"New"}}`

// recordAt returns the offset of record i in "[" + record + "," + record + ... .
func recordAt(i int) int64 { return int64(1 + i*(len(record)+1)) }

func TestDecodeErrors(t *testing.T) {
	const any = -2 // the record or offset of a case is not checked
	golden := gzipBytes(t, readGolden(t, "backup.json"))
	goldenLen := int64(len(readGolden(t, "backup.json")))
	badCRC := bytes.Clone(golden)
	badCRC[len(badCRC)-8] ^= 0xff
	badSize := bytes.Clone(golden)
	badSize[len(badSize)-1] ^= 0xff
	big := encode(t, manyOps(phase.Backup, 300))
	readFailure := errors.New("connection reset")

	gz := func(s string) []byte { return gzipBytes(t, []byte(s)) }
	twoRecords := "[" + record + "," + record
	restoreRecord := strings.NewReplacer("backupName", "restoreName", "backupUID", "restoreUID", "backupItemAction", "restoreItemAction", `,"postOperationItems":null`, "").Replace(record)
	withStatus := func(status string) string {
		return "[" + strings.Replace(record, `"status":{"phase":"New"}`, `"status":`+status, 1) + "]"
	}
	withSpec := func(from, to string) string { return "[" + strings.Replace(record, from, to, 1) + "]" }

	tests := []struct {
		name    string
		input   io.Reader
		opts    []opsfile.DecodeOption
		want    []error // errors.Is each
		notWant error   // !errors.Is
		record  int
		offset  int64
		msg     string // in the error's text
	}{
		// The gzip layer.
		{name: "empty input", input: bytes.NewReader(nil), want: []error{opsfile.ErrMalformed}, record: -1, offset: 0, msg: "empty input, want gzip data"},
		{name: "not gzip", input: strings.NewReader("[" + record + "]"), want: []error{opsfile.ErrMalformed, gzip.ErrHeader}, record: -1, offset: 0, msg: "not gzip data"},
		{name: "a short file, not gzip", input: strings.NewReader("[]\n"), want: []error{opsfile.ErrMalformed, gzip.ErrHeader}, record: -1, offset: 0, msg: "not gzip data"},
		{name: "truncated gzip header", input: bytes.NewReader(golden[:5]), want: []error{opsfile.ErrMalformed, io.ErrUnexpectedEOF}, record: -1, offset: 0, msg: "gzip header is truncated"},
		{name: "gzip trailer cut off", input: bytes.NewReader(golden[:len(golden)-8]), want: []error{opsfile.ErrMalformed, io.ErrUnexpectedEOF}, record: -1, offset: goldenLen, msg: "gzip data is truncated"},
		{name: "gzip trailer cut short", input: bytes.NewReader(golden[:len(golden)-3]), want: []error{opsfile.ErrMalformed, io.ErrUnexpectedEOF}, record: -1, offset: goldenLen, msg: "gzip data is truncated"},
		{name: "gzip data cut in the middle", input: bytes.NewReader(big[:len(big)/2]), want: []error{opsfile.ErrMalformed, io.ErrUnexpectedEOF}, record: any, offset: any, msg: "gzip data is truncated"},
		{name: "bad checksum", input: bytes.NewReader(badCRC), want: []error{opsfile.ErrMalformed, gzip.ErrChecksum}, record: -1, offset: goldenLen, msg: "corrupt gzip data"},
		{name: "bad size in trailer", input: bytes.NewReader(badSize), want: []error{opsfile.ErrMalformed, gzip.ErrChecksum}, record: -1, offset: goldenLen, msg: "corrupt gzip data"},
		{name: "read error", input: io.MultiReader(bytes.NewReader(big[:len(big)/2]), iotest.ErrReader(readFailure)), want: []error{readFailure}, notWant: opsfile.ErrMalformed, record: any, offset: any, msg: "read: connection reset"},
		{name: "read error in the header", input: iotest.ErrReader(readFailure), want: []error{readFailure}, notWant: opsfile.ErrMalformed, record: -1, offset: 0, msg: "read: connection reset"},

		// The JSON text.
		{name: "empty JSON text", input: bytes.NewReader(gz("")), want: []error{opsfile.ErrMalformed, io.ErrUnexpectedEOF}, record: -1, offset: 0, msg: "the JSON text is empty"},
		{name: "white space only", input: bytes.NewReader(gz(" \n\t ")), want: []error{opsfile.ErrMalformed}, record: -1, offset: 4, msg: "the JSON text is empty"},
		{name: "an object, not an array", input: bytes.NewReader(gz(record)), want: []error{opsfile.ErrMalformed}, record: -1, offset: 0, msg: "the file holds a JSON object, want a JSON array"},
		{name: "null, then more", input: bytes.NewReader(gz(" null []")), want: []error{opsfile.ErrMalformed}, record: -1, offset: 6, msg: "another JSON array follows null"},
		{name: "null, then a comma", input: bytes.NewReader(gz("null,")), want: []error{opsfile.ErrMalformed}, record: -1, offset: 4, msg: "invalid character ',' follows null"},
		{name: "not quite null", input: bytes.NewReader(gz(" nul")), want: []error{opsfile.ErrMalformed}, record: -1, offset: 1, msg: "invalid JSON starting with 'n'"},
		{name: "more than null", input: bytes.NewReader(gz("nullnull")), want: []error{opsfile.ErrMalformed}, record: -1, offset: 0, msg: "invalid JSON starting with 'n'"},
		{name: "null, gzip data cut", input: bytes.NewReader(gzipBytes(t, []byte("null"))[:20]), want: []error{opsfile.ErrMalformed, io.ErrUnexpectedEOF}, record: any, offset: any, msg: "gzip data is truncated"},
		{name: "garbage", input: bytes.NewReader(gz("\x01")), want: []error{opsfile.ErrMalformed}, record: -1, offset: 0, msg: "invalid character byte 0x01"},
		{name: "array never closed", input: bytes.NewReader(gz("[" + record)), want: []error{opsfile.ErrMalformed, io.ErrUnexpectedEOF}, record: -1, offset: recordAt(1) - 1, msg: "the JSON text ends inside the array, after 1 records"},
		{name: "ends after a comma", input: bytes.NewReader(gz(twoRecords + ",")), want: []error{opsfile.ErrMalformed, io.ErrUnexpectedEOF}, record: 2, offset: recordAt(2), msg: "the JSON text ends after a comma"},
		{name: "ends inside a record", input: bytes.NewReader(gz(twoRecords[:recordAt(1)+20])), want: []error{opsfile.ErrMalformed, io.ErrUnexpectedEOF}, record: 1, offset: recordAt(1) + 20, msg: "the JSON text ends inside the record"},
		{name: "cut record with an earlier syntax error", input: bytes.NewReader(gz("[" + record + `,{"spec":{"backupName":@"b","backupUID`)), want: []error{opsfile.ErrMalformed}, record: 1, offset: recordAt(1) + 22, msg: "invalid character '@'"},
		{name: "invalid JSON inside record 1", input: bytes.NewReader(gz(twoRecords[:recordAt(1)+8] + "}" + twoRecords[recordAt(1)+8:] + "]")), want: []error{opsfile.ErrMalformed}, record: 1, offset: recordAt(1) + 8, msg: `invalid JSON: invalid character '}' looking for beginning of value`},
		{name: "missing comma", input: bytes.NewReader(gz("[" + record + " " + record + "]")), want: []error{opsfile.ErrMalformed}, record: 1, offset: recordAt(1), msg: "invalid character '{' after record 0, want , or ]"},
		{name: "trailing comma", input: bytes.NewReader(gz("[" + record + ",]")), want: []error{opsfile.ErrMalformed}, record: 1, offset: recordAt(1), msg: "invalid character ']' after a comma"},
		{name: "data after the array", input: bytes.NewReader(gz("[" + record + "]\n[]")), want: []error{opsfile.ErrMalformed}, record: -1, offset: recordAt(1) + 1, msg: "another JSON array follows the array"},
		{name: "a null record", input: bytes.NewReader(gz("[" + record + `, null]`)), want: []error{opsfile.ErrMalformed}, record: 1, offset: recordAt(1) + 1, msg: "the record is JSON null, want an object"},
		{name: "a record that is not an object", input: bytes.NewReader(gz("[" + record + `,"op"]`)), want: []error{opsfile.ErrMalformed}, record: 1, offset: recordAt(1) + 4, msg: "the record: found JSON string, want an object"},
		{name: "a number where a string belongs", input: bytes.NewReader(gz(withSpec(`"backupName":"b"`, `"backupName":7`))), want: []error{opsfile.ErrMalformed}, record: 0, offset: int64(len(`[{"spec":{"backupName":7`)), msg: "spec.backupName: found JSON number, want a string"},
		{name: "a fraction where an integer belongs", input: bytes.NewReader(gz(withStatus(`{"phase":"New","nTotal":1.5}`))), want: []error{opsfile.ErrMalformed}, record: 0, offset: int64(strings.Index(withStatus(`{"phase":"New","nTotal":1.5}`), "1.5") + 3), msg: "status.nTotal: found JSON number 1.5, want an integer"},
		{name: "post-operation items not a list", input: bytes.NewReader(gz(withSpec(`"postOperationItems":null`, `"postOperationItems":{}`))), want: []error{opsfile.ErrMalformed}, record: 0, offset: any, msg: "spec.postOperationItems: found JSON object, want an array"},
		{name: "time not RFC 3339", input: bytes.NewReader(gz(withStatus(`{"phase":"New","started":"yesterday"}`))), want: []error{opsfile.ErrMalformed}, record: 0, offset: 1, msg: `status.started: "yesterday" is not an RFC 3339 time`},
		{name: "time not a string", input: bytes.NewReader(gz(withStatus(`{"phase":"New","updated":12}`))), want: []error{opsfile.ErrMalformed}, record: 0, offset: 1, msg: "status.updated: found 12, want an RFC 3339 time string"},

		// Records refused.
		{name: "unknown phase", input: bytes.NewReader(gz(twoRecords + "," + strings.Replace(record, `"New"`, `"Running"`, 1) + "]")), want: []error{operations.ErrInvalid}, notWant: opsfile.ErrMalformed, record: 2, offset: recordAt(2), msg: `unknown phase "Running"`},
		{name: "no phase", input: bytes.NewReader(gz(withStatus(`{}`))), want: []error{operations.ErrInvalid}, record: 0, offset: 1, msg: `unknown phase ""`},
		{name: "time past year 9999 in UTC", input: bytes.NewReader(gz(withStatus(`{"phase":"New","created":"9999-12-31T23:00:00-02:00"}`))), want: []error{operations.ErrInvalid}, notWant: opsfile.ErrMalformed, record: 0, offset: 1, msg: "created time 10000-01-01T01:00:00Z outside years 0000 to 9999 in UTC"},
		{name: "time before year 0000 in UTC", input: bytes.NewReader(gz(withStatus(`{"phase":"New","updated":"0000-01-01T00:59:59+01:00"}`))), want: []error{operations.ErrInvalid}, notWant: opsfile.ErrMalformed, record: 0, offset: 1, msg: "updated time -0001-12-31T23:59:59Z outside years 0000 to 9999 in UTC"},
		{name: "no operation ID", input: bytes.NewReader(gz(withSpec(`"operationID":"op-1"`, `"operationID":""`))), want: []error{operations.ErrInvalid}, record: 0, offset: 1, msg: "empty ID"},
		{name: "empty spec", input: bytes.NewReader(gz(`[{"spec":{},"status":{"phase":"New"}}]`)), want: []error{opsfile.ErrMalformed}, record: 0, offset: 1, msg: "the record has no backupName or restoreName"},
		{name: "backup and restore keys in one record", input: bytes.NewReader(gz(withSpec(`"backupUID":"u"`, `"backupUID":"u","restoreName":"r"`))), want: []error{opsfile.ErrMalformed}, record: 0, offset: 1, msg: "the record has both backup keys"},
		{name: "a restore record with post-operation items", input: bytes.NewReader(gz("[" + strings.Replace(restoreRecord, `"operationID":"op-1"`, `"operationID":"op-1","postOperationItems":[]`, 1) + "]")), want: []error{opsfile.ErrMalformed}, record: 0, offset: 1, msg: "has both backup keys"},
		{name: "a restore record in a backup file", input: bytes.NewReader(gz(twoRecords + "," + restoreRecord + "]")), want: []error{operations.ErrInvalid}, record: 2, offset: recordAt(2), msg: "a Restore operation in a file of Backup operations"},
		{name: "a backup record where restores are expected", input: bytes.NewReader(gz("[" + record + "]")), opts: []opsfile.DecodeOption{opsfile.ExpectKind(phase.Restore)}, want: []error{operations.ErrInvalid}, record: 0, offset: 1, msg: "a Backup operation, want Restore operations"},

		// Limits.
		{name: "file larger than the size limit", input: bytes.NewReader(gz(twoRecords + "]")), opts: []opsfile.DecodeOption{opsfile.WithSizeLimit(recordAt(2) - 1)}, want: []error{opsfile.ErrTooLarge}, notWant: opsfile.ErrMalformed, record: -1, offset: recordAt(2), msg: fmt.Sprintf("larger than the size limit of %d bytes", recordAt(2)-1)},
		{name: "record larger than the record limit", input: bytes.NewReader(gz(twoRecords + "]")), opts: []opsfile.DecodeOption{opsfile.WithRecordSizeLimit(int64(len(record)) - 1)}, want: []error{opsfile.ErrTooLarge}, record: 0, offset: any, msg: fmt.Sprintf("larger than the record size limit of %d bytes", len(record)-1)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ops, err := opsfile.Decode(tc.input, tc.opts...)
			require.Error(t, err)
			require.Nil(t, ops)
			for _, w := range tc.want {
				require.ErrorIs(t, err, w)
			}
			if tc.notWant != nil {
				require.NotErrorIs(t, err, tc.notWant)
			}
			var de *opsfile.DecodeError
			require.ErrorAs(t, err, &de)
			if tc.record != any && de.Record != tc.record {
				t.Errorf("Record = %d, want %d (%v)", de.Record, tc.record, err)
			}
			if tc.offset != any && de.Offset != tc.offset {
				t.Errorf("Offset = %d, want %d (%v)", de.Offset, tc.offset, err)
			}
			require.ErrorContains(t, err, tc.msg)
		})
	}
}

// TestDecodeNull reads a file that holds JSON null, which encoding/json reads into
// Velero's slice of operations as a nil slice: an empty file, of no kind unless
// ExpectKind names one.
func TestDecodeNull(t *testing.T) {
	for _, text := range []string{"null", " null\n", "\t\r\nnull \n\n"} {
		t.Run(fmt.Sprintf("%q", text), func(t *testing.T) {
			var velero []*veleroBackupOperation
			velero = append(velero, nil) // encoding/json must set it to nil
			require.NoError(t, json.Unmarshal([]byte(text), &velero))
			require.Nil(t, velero)

			file := gzipBytes(t, []byte(text))
			ops, err := opsfile.Decode(bytes.NewReader(file))
			require.NoError(t, err)
			require.Nil(t, ops)

			dec, err := opsfile.NewDecoder(bytes.NewReader(file), opsfile.ExpectKind(phase.Restore))
			require.NoError(t, err)
			require.Equal(t, phase.Restore, dec.Kind())
			for range 2 {
				_, err = dec.Next()
				require.Equal(t, io.EOF, err)
			}
			dec, err = opsfile.NewDecoder(bytes.NewReader(file))
			require.NoError(t, err)
			require.Empty(t, dec.Kind())
			for op, err := range dec.All() {
				t.Fatalf("All yielded %v, %v", op, err)
			}
		})
	}
}

func TestDecodeSizeLimitBoundary(t *testing.T) {
	text := "[" + record + "," + record + "]\n"
	file := gzipBytes(t, []byte(text))
	n := int64(len(text))
	tests := []struct {
		name               string
		limit, recordLimit int64
		wantErr            bool
	}{
		{name: "size limit equal to the file", limit: n},
		{name: "size limit one byte short", limit: n - 1, wantErr: true},
		{name: "record limit equal to a record", recordLimit: int64(len(record))},
		{name: "record limit one byte short", recordLimit: int64(len(record)) - 1, wantErr: true},
		{name: "zero means the defaults", limit: 0, recordLimit: 0},
		{name: "the largest limits", limit: math.MaxInt64, recordLimit: math.MaxInt64},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ops, err := opsfile.Decode(bytes.NewReader(file), opsfile.WithSizeLimit(tc.limit), opsfile.WithRecordSizeLimit(tc.recordLimit))
			if tc.wantErr {
				require.ErrorIs(t, err, opsfile.ErrTooLarge)
				return
			}
			require.NoError(t, err)
			require.Len(t, ops, 2)
		})
	}
}

// bomb returns a gzip file that decompresses to prefix followed by size bytes of fill:
// gzip members, each a mebibyte of fill, concatenated (gzip readers read a concatenation
// as one stream), so a gibibyte costs a megabyte.
func bomb(t *testing.T, prefix string, fill byte, size int64) []byte {
	t.Helper()
	member := gzipBytes(t, bytes.Repeat([]byte{fill}, 1<<20))
	out := gzipBytes(t, []byte(prefix))
	for i := int64(0); i < size>>20; i++ {
		out = append(out, member...)
	}
	return out
}

// TestDecodeGzipBomb reads files that decompress to a gibibyte, with the default limits
// and with a size limit, and checks that the decoder stops early with ErrTooLarge, having
// allocated little: the memory it uses is bounded by the limits, not by the input.
func TestDecodeGzipBomb(t *testing.T) {
	if testing.Short() {
		t.Skip("decompresses up to a GiB; runs without -short")
	}
	const gib = 1 << 30
	records := strings.Repeat(record+",", (1<<20)/(len(record)+1))
	tests := []struct {
		name     string
		file     []byte
		opts     []opsfile.DecodeOption
		msg      string
		maxAlloc uint64
	}{
		{
			name: "one endless string, default limits", file: bomb(t, `[{"spec":{"backupName":"`, 'a', gib),
			msg: "record size limit of 8388608 bytes", maxAlloc: 32 << 20,
		},
		{
			name: "endless white space, size limit", file: bomb(t, "[", ' ', gib),
			opts: []opsfile.DecodeOption{opsfile.WithSizeLimit(32 << 20)},
			msg:  "size limit of 33554432 bytes", maxAlloc: 1 << 20,
		},
		{
			name: "endless nesting, default limits", file: bomb(t, "[", '[', gib),
			msg: "record size limit of 8388608 bytes", maxAlloc: 32 << 20,
		},
		{
			name: "valid records past the size limit", file: append(gzipBytes(t, []byte("[")), bytes.Repeat(gzipBytes(t, []byte(records)), 1024)...),
			opts: []opsfile.DecodeOption{opsfile.WithSizeLimit(4 << 20)},
			msg:  "size limit of 4194304 bytes", maxAlloc: 16 << 20,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			d, err := opsfile.NewDecoder(bytes.NewReader(tc.file), tc.opts...)
			for err == nil {
				_, err = d.Next()
			}
			runtime.ReadMemStats(&after)
			require.ErrorIs(t, err, opsfile.ErrTooLarge)
			require.ErrorContains(t, err, tc.msg)
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("allocated %d bytes to refuse a %d-byte file", alloc, len(tc.file))
			if alloc > tc.maxAlloc {
				t.Errorf("decoding allocated %d bytes, want at most %d", alloc, tc.maxAlloc)
			}
		})
	}
}

// TestDecoderHoldsOneRecord decodes 100,000 records with a record size limit of 1 KiB:
// the decoder never holds more than one record and its read-ahead, whatever the size of
// the file.
func TestDecoderHoldsOneRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("encodes and decodes 100,000 records")
	}
	ops := manyOps(phase.Backup, 100_000)
	file := encode(t, ops)
	d, err := opsfile.NewDecoder(bytes.NewReader(file), opsfile.WithRecordSizeLimit(1<<10))
	require.NoError(t, err)
	n := 0
	for op, err := range d.All() {
		require.NoError(t, err)
		if op.ID != ops[n].ID {
			t.Fatalf("record %d has ID %q, want %q", n, op.ID, ops[n].ID)
		}
		n++
	}
	require.Equal(t, len(ops), n)
}

// countingWriter counts what it is given.
type countingWriter struct{ n int }

func (w *countingWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }

// TestEncoderStreams checks that an Encoder hands compressed data to its writer as it
// goes, rather than at Close.
func TestEncoderStreams(t *testing.T) {
	t.Parallel()
	n := 20_000
	if testing.Short() {
		n = 4_000
	}
	ops := manyOps(phase.Backup, n)
	var w countingWriter
	e := opsfile.NewEncoder(&w, phase.Backup)
	for _, op := range ops {
		require.NoError(t, e.Encode(op))
	}
	beforeClose := w.n
	require.NoError(t, e.Close())
	if beforeClose < w.n*9/10 {
		t.Errorf("before Close the writer had %d of %d bytes, want at least 90%%", beforeClose, w.n)
	}
}

// TestEncoderMatchesEncode checks that the streaming Encoder writes what Encode writes.
func TestEncoderMatchesEncode(t *testing.T) {
	t.Parallel()
	ops := manyOps(phase.Restore, 5000)
	var buf bytes.Buffer
	e := opsfile.NewEncoder(&buf, phase.Restore)
	for _, op := range ops {
		require.NoError(t, e.Encode(op))
	}
	require.NoError(t, e.Close())
	require.Equal(t, encode(t, ops), buf.Bytes())
}

func TestEncodeRejects(t *testing.T) {
	restore := goldenOp()
	restore.Owner.Kind = phase.Restore
	tests := []struct {
		name string
		op   func(*operations.Operation) // applied to the second of two golden operations
		msg  string
	}{
		{"another kind", func(op *operations.Operation) { op.Owner.Kind = phase.Restore }, `operation "op-1" belongs to Restore/backup-1, not to a Backup`},
		{"an unknown kind", func(op *operations.Operation) { op.Owner.Kind = "Snapshot" }, `kind "Snapshot" is not Backup or Restore`},
		{"an unknown phase", func(op *operations.Operation) { op.Status.Phase = "Running" }, `unknown phase "Running"`},
		{"no ID", func(op *operations.Operation) { op.ID = "" }, "empty ID"},
		{"no owner name", func(op *operations.Operation) { op.Owner.Name = "" }, "empty name"},
		{"a year past 9999", func(op *operations.Operation) { op.Status.Started = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }, "started time"},
		{"a year before 0000 in UTC", func(op *operations.Operation) {
			op.Status.Updated = time.Date(0, 1, 1, 0, 30, 0, 0, time.FixedZone("", 3600))
		}, "outside years 0000 to 9999"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ops := []operations.Operation{goldenOp(), goldenOp()}
			tc.op(&ops[1])
			var buf bytes.Buffer
			err := opsfile.Encode(&buf, ops)
			require.ErrorIs(t, err, operations.ErrInvalid)
			require.ErrorContains(t, err, "record 1")
			require.ErrorContains(t, err, tc.msg)
			require.Zero(t, buf.Len(), "Encode wrote before it refused")

			// The streaming Encoder refuses the same operation, writes nothing for it and
			// stays usable.
			buf.Reset()
			e := opsfile.NewEncoder(&buf, phase.Backup)
			require.NoError(t, e.Encode(ops[0]))
			err = e.Encode(ops[1])
			require.ErrorIs(t, err, operations.ErrInvalid)
			require.ErrorContains(t, err, tc.msg)
			require.NoError(t, e.Encode(ops[0]))
			require.NoError(t, e.Close())
			require.Equal(t, encode(t, []operations.Operation{ops[0], ops[0]}), buf.Bytes())
		})
	}
	t.Run("a restore operation with post-operation items", func(t *testing.T) {
		op := restore
		op.PostOperationItems = []operations.ResourceIdentifier{{Resource: "pods", Name: "p"}}
		err := opsfile.Encode(io.Discard, []operations.Operation{op})
		require.ErrorIs(t, err, operations.ErrInvalid)
		require.ErrorContains(t, err, "cannot have post-operation items")
	})
	t.Run("an encoder of an unknown kind", func(t *testing.T) {
		var buf bytes.Buffer
		e := opsfile.NewEncoder(&buf, "")
		err := e.Encode(goldenOp())
		require.ErrorIs(t, err, operations.ErrInvalid)
		require.ErrorContains(t, err, `encoder kind "" is not Backup or Restore`)
		require.NoError(t, e.Close())
		require.Equal(t, "[]\n", string(gunzip(t, buf.Bytes())))
	})
}

// failingWriter fails once it has been given more than n bytes.
type failingWriter struct{ n int }

var errDiskFull = errors.New("disk full")

func (w *failingWriter) Write(p []byte) (int, error) {
	if len(p) > w.n {
		return 0, errDiskFull
	}
	w.n -= len(p)
	return len(p), nil
}

func TestEncoderWriteErrors(t *testing.T) {
	t.Parallel()
	ops := manyOps(phase.Backup, 2000)
	tests := []struct {
		name   string
		budget int
	}{
		{"fails while encoding", 1 << 10},
		{"fails at Close", len(encode(t, ops)) - 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := opsfile.NewEncoder(&failingWriter{n: tc.budget}, phase.Backup)
			var err error
			for _, op := range ops {
				if err = e.Encode(op); err != nil {
					break
				}
			}
			closeErr := e.Close()
			require.ErrorIs(t, closeErr, errDiskFull)
			if err != nil {
				require.ErrorIs(t, err, errDiskFull)
				require.ErrorIs(t, e.Encode(ops[0]), errDiskFull, "a write error is sticky")
			}
			require.ErrorIs(t, e.Close(), errDiskFull, "Close again returns the same error")
		})
	}
}

func TestEncoderClose(t *testing.T) {
	var buf bytes.Buffer
	e := opsfile.NewEncoder(&buf, phase.Backup)
	require.NoError(t, e.Encode(goldenOp()))
	require.NoError(t, e.Close())
	n := buf.Len()
	require.NoError(t, e.Close(), "a second Close")
	require.Equal(t, n, buf.Len(), "a second Close wrote")
	require.ErrorContains(t, e.Encode(goldenOp()), "encoder is closed")
	require.Equal(t, gzipBytes(t, readGolden(t, "backup.json")), buf.Bytes())
}

func TestDecoder(t *testing.T) {
	ops := manyOps(phase.Restore, 3)
	file := encode(t, ops)

	t.Run("Next until io.EOF, which is sticky", func(t *testing.T) {
		d, err := opsfile.NewDecoder(bytes.NewReader(file))
		require.NoError(t, err)
		require.Equal(t, phase.Restore, d.Kind())
		var got []operations.Operation
		for {
			op, err := d.Next()
			if err == io.EOF {
				break
			}
			require.NoError(t, err)
			got = append(got, op)
		}
		if diff := cmp.Diff(ops, got); diff != "" {
			t.Errorf("records (-want +got):\n%s", diff)
		}
		_, err = d.Next()
		require.Equal(t, io.EOF, err)
	})
	t.Run("All stops when the loop breaks", func(t *testing.T) {
		d, err := opsfile.NewDecoder(bytes.NewReader(file))
		require.NoError(t, err)
		for op, err := range d.All() {
			require.NoError(t, err)
			require.Equal(t, ops[0].ID, op.ID)
			break
		}
		op, err := d.Next()
		require.NoError(t, err)
		require.Equal(t, ops[1].ID, op.ID, "the record after the break")
	})
	t.Run("All yields records, then the error", func(t *testing.T) {
		text := "[" + record + "," + record + ",{]"
		d, err := opsfile.NewDecoder(bytes.NewReader(gzipBytes(t, []byte(text))))
		require.NoError(t, err)
		var ids []string
		var last error
		for op, err := range d.All() {
			if err != nil {
				last = err
				continue
			}
			ids = append(ids, op.ID)
		}
		require.Equal(t, []string{"op-1", "op-1"}, ids)
		require.ErrorIs(t, last, opsfile.ErrMalformed)
		_, err = d.Next()
		require.Equal(t, last, err, "the error is sticky")
	})
	t.Run("empty file", func(t *testing.T) {
		empty := encode(t, nil)
		d, err := opsfile.NewDecoder(bytes.NewReader(empty))
		require.NoError(t, err)
		require.Equal(t, phase.Kind(""), d.Kind())
		_, err = d.Next()
		require.Equal(t, io.EOF, err)

		d, err = opsfile.NewDecoder(bytes.NewReader(empty), opsfile.ExpectKind(phase.Backup))
		require.NoError(t, err)
		require.Equal(t, phase.Backup, d.Kind())

		got, err := opsfile.Decode(bytes.NewReader(empty))
		require.NoError(t, err)
		require.Nil(t, got)
	})
	t.Run("NewDecoder reports a bad first record", func(t *testing.T) {
		_, err := opsfile.NewDecoder(bytes.NewReader(gzipBytes(t, []byte(`[{"spec":{}}]`))))
		require.ErrorIs(t, err, opsfile.ErrMalformed)
	})
	t.Run("nil options are ignored", func(t *testing.T) {
		got, err := opsfile.Decode(bytes.NewReader(file), nil, opsfile.ExpectKind(phase.Restore), nil)
		require.NoError(t, err)
		require.Len(t, got, len(ops))
	})
	t.Run("ExpectKind with an unknown kind", func(t *testing.T) {
		_, err := opsfile.NewDecoder(bytes.NewReader(file), opsfile.ExpectKind("Snapshot"))
		require.ErrorIs(t, err, phase.ErrUnknownKind)
	})
	t.Run("unknown keys and white space are accepted", func(t *testing.T) {
		text := " \n[ \n" + strings.Replace(record, `"status":{`, `"extra":[1,{"x":"]"}],"status":{"future":true,`, 1) + " ,\r\n\t" + record + " ] \n\n"
		got, err := opsfile.Decode(bytes.NewReader(gzipBytes(t, []byte(text))))
		require.NoError(t, err)
		require.Len(t, got, 2)
	})
}

func TestDecodeErrorMessage(t *testing.T) {
	tests := []struct {
		err  *opsfile.DecodeError
		want string
	}{
		{&opsfile.DecodeError{Record: 3, Offset: 1234, Err: opsfile.ErrMalformed}, "decode operations: record 3 at json offset 1234: malformed operations file"},
		{&opsfile.DecodeError{Record: -1, Offset: 7, Err: opsfile.ErrTooLarge}, "decode operations: json offset 7: input too large"},
	}
	for _, tc := range tests {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
}

func TestKeys(t *testing.T) {
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"backup", opsfile.BackupOperationsKey("backup-1"), "backups/backup-1/backup-1-itemoperations.json.gz"},
		{"restore", opsfile.RestoreOperationsKey("restore-1"), "restores/restore-1/restore-restore-1-itemoperations.json.gz"},
		{"restore named like a backup", opsfile.RestoreOperationsKey("backup-1-20240101"), "restores/backup-1-20240101/restore-backup-1-20240101-itemoperations.json.gz"},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, tc.got, tc.want)
		}
	}
}
