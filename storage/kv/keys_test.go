package kv

import (
	"encoding/binary"
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

// TestRunRecordKeepsTheBase: a run record keeps the base of its kind's profile, and one
// whose base does not fit the kind its key names does not decode.
func TestRunRecordKeepsTheBase(t *testing.T) {
	for _, base := range []phase.Kind{phase.Backup, phase.Restore} {
		p, err := phase.Declare("DB", base, phase.WithQueue(), phase.WithRestoreFinalizing())
		require.NoError(t, err)
		r := operations.Run{Owner: operations.Owner{Kind: "DB", Name: "a", UID: "u"}, Phase: phase.New, Profile: p}
		got, err := decodeRun(r.Owner, appendRun(nil, &r))
		require.NoError(t, err)
		require.Empty(t, cmp.Diff(r, got))

		// The same record under Backup's or Restore's key, or a kind's without a base.
		for _, o := range []operations.Owner{{Kind: phase.Backup, Name: "a"}, {Kind: phase.Restore, Name: "a"}} {
			if o.Kind == base {
				continue
			}
			_, err = decodeRun(o, appendRun(nil, &r))
			require.ErrorIs(t, err, operations.ErrCorrupt, "%s following %s", o.Kind, base)
		}
	}
	plain := operations.Run{Owner: operations.Owner{Kind: "DB", Name: "a"}, Phase: phase.New}
	_, err := decodeRun(plain.Owner, appendRun(nil, &plain))
	require.ErrorIs(t, err, operations.ErrCorrupt)
	require.ErrorIs(t, err, phase.ErrUnknownKind)

	// Both bases at once is no profile.
	rec := appendRun(nil, &operations.Run{Owner: operations.Owner{Kind: phase.Backup, Name: "a"}, Phase: phase.New})
	flags := len(appendString(appendString([]byte{runFormat1}, ""), "New")) // after format, UID and phase
	require.Zero(t, rec[flags])
	rec[flags] = profileBaseBackup | profileBaseRestore
	_, err = decodeRun(plain.Owner, rec)
	require.ErrorIs(t, err, operations.ErrCorrupt)

	// A kind declared with its phases keeps them; a set that is empty or that no
	// declaration gives is refused.
	few := []phase.Phase{phase.New, phase.InProgress, phase.WaitingForPluginOperations,
		phase.WaitingForPluginOperationsPartiallyFailed, phase.Completed, phase.PartiallyFailed, phase.Failed}
	p, err := phase.Declare("DB", phase.Backup, phase.WithPhases(few...))
	require.NoError(t, err)
	r := operations.Run{Owner: operations.Owner{Kind: "DB", Name: "a", UID: "u"}, Phase: phase.New, Profile: p}
	got, err := decodeRun(r.Owner, appendRun(nil, &r))
	require.NoError(t, err)
	require.Empty(t, cmp.Diff(r, got))
	for _, set := range []phase.Set{0, phase.SetOf(phase.New, phase.Completed)} {
		rec := appendRun(nil, &operations.Run{Owner: r.Owner, Phase: phase.New, Profile: phase.Profile{Base: phase.Backup, Phases: phase.SetOf(few...)}})
		flags := len(appendString(appendString([]byte{runFormat1}, "u"), "New"))
		require.Equal(t, byte(profileBaseBackup|profilePhases), rec[flags])
		n := len(binary.AppendUvarint(nil, uint64(phase.SetOf(few...))))
		rec = append(append(rec[:flags+1:flags+1], binary.AppendUvarint(nil, uint64(set))...), rec[flags+1+n:]...)
		_, err = decodeRun(r.Owner, rec)
		require.ErrorIs(t, err, operations.ErrCorrupt, "phases %s", set)
	}
}
