package kv

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// TestKeysOfOwnKinds checks the keys of kinds of one's own against the layout of the
// package documentation, and that Backup's and Restore's keys are the bytes they were.
func TestKeysOfOwnKinds(t *testing.T) {
	db := operations.Owner{Kind: "DB", Name: "a"}
	for _, tc := range []struct{ got, want []byte }{
		{runKey(operations.Owner{Kind: phase.Backup, Name: "a"}), []byte("rBa")},
		{runKey(operations.Owner{Kind: phase.Restore, Name: "a"}), []byte("rRa")},
		{idxKey(operations.Owner{Kind: phase.Backup, Name: "a"}, phase.New), []byte("pBNew\x00a")},
		{opsPrefix(operations.Owner{Kind: phase.Restore, Name: "a"}), []byte("oR\x01a")},
		{runKey(db), []byte("rXDB\x00a")},
		{idxKey(db, phase.New), []byte("pXNew\x00DB\x00a")},
		{idxPrefix("", phase.New), []byte("pXNew\x00")},
		{opsPrefix(db), []byte("oXDB\x00\x01a")},
		{runPrefix(""), []byte("rX")},
		{runPrefix("DB"), []byte("rXDB\x00")},
	} {
		require.Equal(t, string(tc.want), string(tc.got))
	}

	for _, o := range []operations.Owner{db, {Kind: "B", Name: "x\x00y"}, {Kind: phase.Backup, Name: "X"}} {
		got, err := ownerOfRunKey(runKey(o))
		require.NoError(t, err)
		require.Empty(t, cmp.Diff(o, got))
	}
	for _, k := range []string{"rXDB", "rXDB\x00", "rXBackup\x00a", "rX1a\x00b", "rX\x00a", "rZa", "rB"} {
		_, err := ownerOfRunKey([]byte(k))
		require.ErrorIs(t, err, operations.ErrCorrupt, "%q", k)
	}
	start := idxPrefix("", phase.New)
	got, err := ownerOfOwnIdxKey(start, idxKey(db, phase.New))
	require.NoError(t, err)
	require.Empty(t, cmp.Diff(db, got))
	for _, k := range []string{"pXNew\x00DB", "pXNew\x00DB\x00", "pXNew\x00Restore\x00a", "pXNew\x00\x00a"} {
		_, err := ownerOfOwnIdxKey(start, []byte(k))
		require.ErrorIs(t, err, operations.ErrCorrupt, "%q", k)
	}
}

// The operations metadata of format 1, which ended with a chunk count, still reads.
func TestOpsMetaFormat1(t *testing.T) {
	old := []byte{opsMetaFormat1, 7, 3, 5, 2} // next 7, batches 3, staged 5, 2 chunks
	got, err := parseOpsMeta(old)
	require.NoError(t, err)
	want := opsMetaValue{next: 7, batches: 3, staged: 5}
	if d := cmp.Diff(want, got, cmp.AllowUnexported(opsMetaValue{})); d != "" {
		t.Errorf("format 1 metadata (-want +got):\n%s", d)
	}
	again, err := parseOpsMeta(got.append(nil))
	require.NoError(t, err)
	if d := cmp.Diff(want, again, cmp.AllowUnexported(opsMetaValue{})); d != "" {
		t.Errorf("metadata written again (-want +got):\n%s", d)
	}
}

// FuzzDecode feeds the parsers of the engine's values other than records (a run's
// operations metadata and a staged chunk) what a damaged backend might hold: they must
// return a value or an error wrapping operations.ErrCorrupt, never panic, and a value
// they return must encode back to the same bytes. The records have their own fuzz test
// in storage/internal/record.
func FuzzDecode(f *testing.F) {
	f.Add(opsMetaValue{next: 7, batches: 3, staged: 5}.append(nil))
	f.Add([]byte{opsMetaFormat1, 7, 3, 5, 2})
	chunks, err := (&Store{}).chunks(nil, 1, []Write{{Key: []byte("k"), Value: []byte("v")}, {Key: []byte("d"), Delete: true}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(chunks[0])
	f.Fuzz(func(t *testing.T, b []byte) {
		if m, err := parseOpsMeta(b); err != nil {
			if !errors.Is(err, operations.ErrCorrupt) {
				t.Fatalf("parseOpsMeta error %v does not wrap ErrCorrupt", err)
			}
		} else if b != nil && b[0] == opsMetaFormat2 && string(m.append(nil)) != string(b) {
			t.Fatalf("operations metadata %x parses to %+v, which encodes to %x", b, m, m.append(nil))
		}
		if _, err := parseChunk(b); err != nil && !errors.Is(err, operations.ErrCorrupt) {
			t.Fatalf("parseChunk error %v does not wrap ErrCorrupt", err)
		}
	})
}
