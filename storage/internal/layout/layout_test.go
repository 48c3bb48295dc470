package layout

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
		{RunKey(operations.Owner{Kind: phase.Backup, Name: "a"}), []byte("rBa")},
		{RunKey(operations.Owner{Kind: phase.Restore, Name: "a"}), []byte("rRa")},
		{IdxKey(operations.Owner{Kind: phase.Backup, Name: "a"}, phase.New), []byte("pBNew\x00a")},
		{OpsPrefix(operations.Owner{Kind: phase.Restore, Name: "a"}), []byte("oR\x01a")},
		{RunKey(db), []byte("rXDB\x00a")},
		{IdxKey(db, phase.New), []byte("pXNew\x00DB\x00a")},
		{IdxPrefix("", phase.New), []byte("pXNew\x00")},
		{OpsPrefix(db), []byte("oXDB\x00\x01a")},
		{RunPrefix(""), []byte("rX")},
		{RunPrefix("DB"), []byte("rXDB\x00")},
	} {
		require.Equal(t, string(tc.want), string(tc.got))
	}

	for _, o := range []operations.Owner{db, {Kind: "B", Name: "x\x00y"}, {Kind: phase.Backup, Name: "X"}} {
		got, err := OwnerOfRunKey(RunKey(o))
		require.NoError(t, err)
		require.Empty(t, cmp.Diff(o, got))
	}
	for _, k := range []string{"rXDB", "rXDB\x00", "rXBackup\x00a", "rX1a\x00b", "rX\x00a", "rZa", "rB"} {
		_, err := OwnerOfRunKey([]byte(k))
		require.ErrorIs(t, err, operations.ErrCorrupt, "%q", k)
	}
	start := IdxPrefix("", phase.New)
	got, err := OwnerOfOwnIdxKey(start, IdxKey(db, phase.New))
	require.NoError(t, err)
	require.Empty(t, cmp.Diff(db, got))
	for _, k := range []string{"pXNew\x00DB", "pXNew\x00DB\x00", "pXNew\x00Restore\x00a", "pXNew\x00\x00a"} {
		_, err := OwnerOfOwnIdxKey(start, []byte(k))
		require.ErrorIs(t, err, operations.ErrCorrupt, "%q", k)
	}
}

// The operations metadata of format 1, which ended with a chunk count, still reads.
func TestOpsMetaFormat1(t *testing.T) {
	old := []byte{MetaFormat1, 7, 3, 5, 2} // next 7, batches 3, staged 5, 2 chunks
	got, err := ParseMeta(old)
	require.NoError(t, err)
	want := Meta{Next: 7, Batches: 3, Staged: 5}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("format 1 metadata (-want +got):\n%s", d)
	}
	again, err := ParseMeta(got.Append(nil))
	require.NoError(t, err)
	if d := cmp.Diff(want, again); d != "" {
		t.Errorf("metadata written again (-want +got):\n%s", d)
	}
}

// FuzzDecode feeds the parsers of the engine's values other than records (a run's
// operations metadata and a staged chunk) what a damaged backend might hold: they must
// return a value or an error wrapping operations.ErrCorrupt, never panic, and a value
// they return must encode back to the same bytes. The records have their own fuzz test
// in storage/internal/record.
func FuzzDecode(f *testing.F) {
	f.Add(Meta{Next: 7, Batches: 3, Staged: 5}.Append(nil))
	f.Add([]byte{MetaFormat1, 7, 3, 5, 2})
	f.Add(AppendChunkWrite(AppendChunkWrite(nil, ChunkWrite{Key: []byte("k"), Value: []byte("v")}), ChunkWrite{Key: []byte("d"), Delete: true}))
	f.Fuzz(func(t *testing.T, b []byte) {
		if m, err := ParseMeta(b); err != nil {
			if !errors.Is(err, operations.ErrCorrupt) {
				t.Fatalf("ParseMeta error %v does not wrap ErrCorrupt", err)
			}
		} else if b != nil && b[0] == MetaFormat2 && string(m.Append(nil)) != string(b) {
			t.Fatalf("operations metadata %x parses to %+v, which encodes to %x", b, m, m.Append(nil))
		}
		if _, err := ParseChunk(b); err != nil && !errors.Is(err, operations.ErrCorrupt) {
			t.Fatalf("ParseChunk error %v does not wrap ErrCorrupt", err)
		}
	})
}
