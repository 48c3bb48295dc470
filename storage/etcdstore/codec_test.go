package etcdstore

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// fill sets every field of v (a pointer to a struct, recursively) to a value that is not
// its zero value and differs from field to field, so that a field added to Run or
// Operation later, and forgotten by the codec, fails the round trips below.
func fill(v reflect.Value, n *int) {
	*n++
	zone := time.FixedZone("UTC+5:30", 5*3600+1800)
	switch v.Kind() {
	case reflect.Pointer:
		fill(v.Elem(), n)
	case reflect.Struct:
		if v.Type() == reflect.TypeOf(time.Time{}) {
			v.Set(reflect.ValueOf(t0.Add(time.Duration(*n)*time.Hour + time.Duration(*n)).In(zone)))
			return
		}
		for i := range v.NumField() {
			fill(v.Field(i), n)
		}
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range 2 {
			fill(s.Index(i), n)
		}
		v.Set(s)
	case reflect.String:
		v.SetString(fmt.Sprintf("s%d <&> \u2028 \"q\"", *n))
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(*n) * 1_000_003)
	case reflect.Bool:
		v.SetBool(true)
	default:
		panic("fill: no value for " + v.Type().String())
	}
}

func TestRunRecordKeepsEveryField(t *testing.T) {
	var r operations.Run
	n := 0
	fill(reflect.ValueOf(&r), &n)
	r.Owner.Kind, r.Owner.Name = phase.Restore, "r" // from the key
	b, err := encodeRun(&r)
	require.NoError(t, err)
	got, err := decodeRun(operations.Owner{Kind: phase.Restore, Name: "r"}, b)
	require.NoError(t, err)
	if d := cmp.Diff(r, got); d != "" {
		t.Errorf("decodeRun(encodeRun(r)) (-want +got):\n%s", d)
	}
	for i := range got.History {
		require.Equal(t, r.History[i].Time.Format(time.RFC3339Nano), got.History[i].Time.Format(time.RFC3339Nano), "history time keeps its offset")
	}
}

func TestOperationRecordKeepsEveryField(t *testing.T) {
	var op operations.Operation
	n := 0
	fill(reflect.ValueOf(&op), &n)
	op.Owner.Kind, op.Owner.Name = phase.Backup, "b"
	op.Status.Phase = operations.OperationInProgress
	b, err := encodeOperation(&op)
	require.NoError(t, err)
	got, err := decodeOperation(operations.Owner{Kind: phase.Backup, Name: "b"}, b)
	require.NoError(t, err)
	if d := cmp.Diff(op, got); d != "" {
		t.Errorf("decodeOperation(encodeOperation(op)) (-want +got):\n%s", d)
	}

	// The least operation: empty slices come back nil, zero times zero.
	least := operations.Operation{Owner: operations.Owner{Kind: phase.Backup, Name: "b"}, ID: "x", Status: operations.Status{Phase: operations.OperationNew}, PostOperationItems: []operations.ResourceIdentifier{}}
	b, err = encodeOperation(&least)
	require.NoError(t, err)
	require.Equal(t, `{"v":1,"id":"x","resource":{},"phase":"New","created":"0001-01-01T00:00:00Z","started":"0001-01-01T00:00:00Z","updated":"0001-01-01T00:00:00Z"}`, string(b))
	got, err = decodeOperation(least.Owner, b)
	require.NoError(t, err)
	if d := cmp.Diff(least, got, cmpopts.EquateEmpty()); d != "" {
		t.Errorf("the least operation (-want +got):\n%s", d)
	}
}

func TestCorruptRecords(t *testing.T) {
	o := operations.Owner{Kind: phase.Backup, Name: "b"}
	tests := []struct {
		name   string
		decode func() error
	}{
		{"run not JSON", func() error { _, err := decodeRun(o, []byte("{")); return err }},
		{"run of another version", func() error { _, err := decodeRun(o, []byte(`{"v":2}`)); return err }},
		{"operation not JSON", func() error { _, err := decodeOperation(o, []byte("x")); return err }},
		{"operation of another version", func() error { _, err := decodeOperation(o, []byte(`{"v":0,"phase":"New"}`)); return err }},
		{"operation of an unknown phase", func() error { _, err := decodeOperation(o, []byte(`{"v":1,"phase":"Running"}`)); return err }},
		{"metadata without a next number", func() error { _, err := decodeMeta([]byte(`{"v":1}`)); return err }},
		{"metadata with a batch and no chunks", func() error { _, err := decodeMeta([]byte(`{"v":1,"next":1,"batch":"x"}`)); return err }},
		{"ID index value too short", func() error { _, _, err := parseIDValue("x", []byte("0001:N")); return err }},
		{"ID index value of an unknown phase", func() error { _, _, err := parseIDValue("x", []byte("0000000000000001:Z")); return err }},
		{"ID index value not hexadecimal", func() error { _, _, err := parseIDValue("x", []byte("000000000000000g:N")); return err }},
		{"chunk of another version", func() error { _, err := decodeChunk([]byte{2}); return err }},
		{"chunk with a truncated key", func() error { _, err := decodeChunk([]byte{chunkVersion, 'P', 5, 'a'}); return err }},
		{"chunk with a truncated value", func() error { _, err := decodeChunk([]byte{chunkVersion, 'P', 1, 'a', 3, 'b'}); return err }},
		{"chunk with an unknown mutation", func() error { _, err := decodeChunk([]byte{chunkVersion, 'X', 1, 'a'}); return err }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorIs(t, tc.decode(), ErrCorrupt)
		})
	}
}

// TestCorruptStore damages records in etcd: the store reports ErrCorrupt, never panics.
func TestCorruptStore(t *testing.T) {
	c := newClient(t, testServer)
	prefix := newPrefix()
	s := openStore(t, c, prefix, nil)
	o := backup("b")
	createWaiting(t, s, o)
	require.NoError(t, s.PutOperations(bg, o, newOps(o, "op-", 2, operations.OperationNew)))
	put := func(k, v string) {
		_, err := c.Put(bg, prefix+k, v)
		require.NoError(t, err)
	}
	put("ops/Bb/open/0000000000000002", `{"v":1,"id":"op-0001","phase":"Completed"}`) // under the wrong directory
	put("ops/Bb/ids/op-0000", `0000000000000009:N`)                                   // names a missing record
	_, err := s.ListOperations(bg, o, operations.OperationFilter{})
	require.ErrorIs(t, err, ErrCorrupt, "ListOperations with a finished record under open/")
	_, err = s.GetOperation(bg, o, "op-0000")
	require.ErrorIs(t, err, ErrCorrupt, "GetOperation whose index entry names a missing record")
	put("runs/Bb", "not json")
	_, err = s.GetRun(bg, o)
	require.ErrorIs(t, err, ErrCorrupt, "GetRun of a damaged record")
	put("ops/Bb/meta", `{"v":1,"next":3,"count":2,"batch":"gone","chunks":1}`)
	err = s.PutOperations(bg, o, newOps(o, "new-", 1, operations.OperationNew))
	require.ErrorIs(t, err, ErrCorrupt, "PutOperations with a committed batch whose chunk is missing")
}

// FuzzChunk checks that decoding a chunk never panics, and that encoding mutations and
// decoding them gives them back.
func FuzzChunk(f *testing.F) {
	f.Add([]byte{chunkVersion, 'P', 1, 'k', 1, 'v', 'D', 2, 'k', 'k'}, "key", []byte("value"), true)
	f.Add([]byte{chunkVersion}, "", []byte{}, false)
	f.Fuzz(func(t *testing.T, raw []byte, key string, val []byte, del bool) {
		_, _ = decodeChunk(raw)
		m := mutation{del: del, key: key, val: val}
		if del {
			m.val = nil
		}
		b := appendMutation([]byte{chunkVersion}, m)
		b = appendMutation(b, mutation{key: "next", val: []byte("x")})
		require.LessOrEqual(t, len(b), 1+m.encodedSize()+mutation{key: "next", val: []byte("x")}.encodedSize())
		got, err := decodeChunk(b)
		require.NoError(t, err)
		require.Len(t, got, 2)
		require.Equal(t, m.del, got[0].del)
		require.Equal(t, m.key, got[0].key)
		require.True(t, bytes.Equal(m.val, got[0].val), "value")
		require.Equal(t, "next", got[1].key)
	})
}
