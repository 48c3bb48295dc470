package salvage_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/internal/layout"
	"github.com/itemops/itemops/storage/internal/salvage"
	"github.com/itemops/itemops/storage/kv"
	"github.com/itemops/itemops/storage/memstore"
)

var bg = context.Background()

// open opens the engine on b.
func open(t *testing.T, b kv.Backend) *kv.Store {
	t.Helper()
	s, err := kv.Open(bg, b)
	require.NoError(t, err)
	return s
}

// owner is the restore whose run the tests create with createRun.
var owner = operations.Owner{Kind: phase.Restore, Name: "r", UID: "u"}

func createRun(t *testing.T, s *kv.Store) {
	t.Helper()
	require.NoError(t, s.CreateRun(bg, operations.Run{Owner: owner, Phase: phase.WaitingForPluginOperations}))
}

// ops returns n new operations of owner, whose IDs are prefix and a number.
func ops(prefix string, n int) []operations.Operation {
	out := make([]operations.Operation, n)
	for i := range out {
		out[i] = operations.Operation{Owner: owner, ID: fmt.Sprintf("%s%03d", prefix, i), Status: operations.Status{Phase: operations.OperationNew}}
	}
	return out
}

// readSnapshot runs Read on a snapshot of b.
func readSnapshot(t *testing.T, b kv.Backend) ([]salvage.Run, []salvage.Loss) {
	t.Helper()
	all := map[string][]byte{}
	require.NoError(t, b.Read(bg, func(r kv.Reader) error {
		return r.Scan(bg, nil, nil, func(k, v []byte, _ kv.Version) error {
			all[string(k)] = bytes.Clone(v)
			return nil
		})
	}))
	runs, lost := salvage.Read(all)
	return runs, lost
}

// idsOf returns the IDs of ops.
func idsOf(ops []operations.Operation) []string {
	var ids []string
	for _, op := range ops {
		ids = append(ids, op.ID)
	}
	return ids
}

// stopAfterMeta is a Backend whose commits all fail, once armed, after the first that
// writes the key meta: a writer that dies just after a batch's commit point.
type stopAfterMeta struct {
	kv.Backend
	meta    []byte
	armed   atomic.Bool
	stopped atomic.Bool
}

var errStopped = errors.New("the writer died")

func (b *stopAfterMeta) Commit(ctx context.Context, conds []kv.Condition, writes []kv.Write) error {
	if b.stopped.Load() {
		return errStopped
	}
	err := b.Backend.Commit(ctx, conds, writes)
	for _, w := range writes {
		if err == nil && b.armed.Load() && bytes.Equal(w.Key, b.meta) {
			b.stopped.Store(true)
		}
	}
	return err
}

// TestSalvageAppliesStagedBatch leaves a batch of operations committed but not applied
// (its writer died after the commit point): Read reads its operations, as a reader of
// the store would after applying it.
func TestSalvageAppliesStagedBatch(t *testing.T) {
	metaKey := layout.OpsKey(layout.OpsPrefix(owner), layout.OpsMeta)
	b := &stopAfterMeta{Backend: memstore.NewBackend(kv.Limits{MaxOps: 8}), meta: metaKey}
	s := open(t, b)
	createRun(t, s)
	b.armed.Store(true)
	batch := ops("op", 40)
	require.ErrorIs(t, s.PutOperations(bg, owner, batch), errStopped)
	require.True(t, b.stopped.Load(), "the batch reached its commit point")

	runs, lost := readSnapshot(t, b)
	require.Empty(t, lost)
	require.Len(t, runs, 1)
	if diff := cmp.Diff(idsOf(batch), idsOf(runs[0].Operations)); diff != "" {
		t.Errorf("operations of the staged batch (-want +got):\n%s", diff)
	}
}

// dropRunRecords deletes the record of o's run and its copy in the phase index (the
// only key that starts with 'p' and ends with a zero byte and o's name).
func dropRunRecords(t *testing.T, b kv.Backend, o operations.Owner) {
	t.Helper()
	writes := []kv.Write{{Key: layout.RunKey(o), Delete: true}}
	require.NoError(t, b.Read(bg, func(r kv.Reader) error {
		return r.Scan(bg, []byte("p"), []byte("q"), func(k, _ []byte, _ kv.Version) error {
			if bytes.HasSuffix(k, append([]byte{0}, o.Name...)) {
				writes = append(writes, kv.Write{Key: bytes.Clone(k), Delete: true})
			}
			return nil
		})
	}))
	require.Len(t, writes, 2, "the run's record and its copy")
	require.NoError(t, b.Commit(bg, nil, writes))
}

// timedOps returns n operations of o, created a minute apart from t0 and updated a
// second after they were created.
func timedOps(o operations.Owner, n int) []operations.Operation {
	t0 := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	out := make([]operations.Operation, n)
	for i := range out {
		created := t0.Add(time.Duration(i) * time.Minute)
		out[i] = operations.Operation{Owner: o, ID: fmt.Sprintf("op%03d", i), Status: operations.Status{
			Phase: operations.OperationInProgress, Created: created, Updated: created.Add(time.Second)}}
	}
	return out
}

// TestSalvageRunFromIndexCopy deletes a run's record: Read reads the run from its
// copy in the phase index, with its operations.
func TestSalvageRunFromIndexCopy(t *testing.T) {
	b := memstore.NewBackend(kv.Limits{})
	s := open(t, b)
	createRun(t, s)
	batch := ops("op", 3)
	require.NoError(t, s.PutOperations(bg, owner, batch))
	want, err := s.GetRun(bg, owner)
	require.NoError(t, err)
	require.NoError(t, b.Commit(bg, nil, []kv.Write{{Key: layout.RunKey(owner), Delete: true}}))

	runs, lost := readSnapshot(t, b)
	require.Empty(t, lost)
	require.Len(t, runs, 1)
	require.False(t, runs[0].Rebuilt)
	if diff := cmp.Diff(want, runs[0].Run); diff != "" {
		t.Errorf("run read from its copy (-want +got):\n%s", diff)
	}
	require.Equal(t, idsOf(batch), idsOf(runs[0].Operations))
}

// TestSalvageRebuildsRun deletes a run's record and its copy, of a restore and of a
// kind of one's own beside a run of that kind that remains: each run is rebuilt from its
// operations, Failed with a reason that says so, with every operation as it was stored,
// and nothing is named lost. The rebuilt run can be stored.
func TestSalvageRebuildsRun(t *testing.T) {
	profile, err := phase.Declare("Snapshot", phase.Backup, phase.WithQueue())
	require.NoError(t, err)
	own := operations.Owner{Kind: "Snapshot", Name: "s", UID: "uid-s"}
	sibling := operations.Owner{Kind: "Snapshot", Name: "t", UID: "uid-t"}
	b := memstore.NewBackend(kv.Limits{})
	s := open(t, b)
	createRun(t, s)
	for _, o := range []operations.Owner{own, sibling} {
		require.NoError(t, s.CreateRun(bg, operations.Run{Owner: o, Phase: phase.InProgress, Profile: profile}))
	}
	stored := map[operations.Owner][]operations.Operation{}
	for _, o := range []operations.Owner{owner, own, sibling} {
		require.NoError(t, s.PutOperations(bg, o, timedOps(o, 5)))
		var err error
		stored[o], err = s.ListOperations(bg, o, operations.OperationFilter{})
		require.NoError(t, err)
	}
	dropRunRecords(t, b, owner)
	dropRunRecords(t, b, own)

	runs, lost := readSnapshot(t, b)
	require.Empty(t, lost)
	require.Len(t, runs, 3)
	reason := "salvage: the run's record was lost; its phase, counts and history are unknown; 5 of its operations were saved"
	for _, r := range runs {
		o := operations.Owner{Kind: r.Run.Owner.Kind, Name: r.Run.Owner.Name, UID: r.Run.Owner.UID}
		if diff := cmp.Diff(stored[o], r.Operations); diff != "" {
			t.Errorf("operations of %s (-stored +salvaged):\n%s", o, diff)
		}
		require.Equal(t, o != sibling, r.Rebuilt, "%s", o)
		if !r.Rebuilt {
			continue
		}
		want := operations.Run{Owner: o, Phase: phase.New, Created: stored[o][0].Status.Created}
		if o == own {
			want.Profile = profile
		}
		require.NoError(t, want.SetPhase(phase.Failed, reason, stored[o][4].Status.Updated))
		want.FailureReason = reason
		if diff := cmp.Diff(want, r.Run); diff != "" {
			t.Errorf("rebuilt run of %s (-want +got):\n%s", o, diff)
		}
		require.Equal(t, phase.Failed, r.Run.Phase)
		dst := open(t, memstore.NewBackend(kv.Limits{}))
		require.NoError(t, dst.CreateRunWithOperations(bg, r.Run, r.Operations), "%s", o)
	}
}

// TestSalvageCannotRebuildOwnKind deletes the record and copy of the only run of a kind
// of one's own: its machine is unknown, so the run is not rebuilt, and each of its
// operations is named lost, with why.
func TestSalvageCannotRebuildOwnKind(t *testing.T) {
	profile, err := phase.Declare("Snapshot", phase.Restore)
	require.NoError(t, err)
	own := operations.Owner{Kind: "Snapshot", Name: "s", UID: "uid-s"}
	b := memstore.NewBackend(kv.Limits{})
	s := open(t, b)
	require.NoError(t, s.CreateRun(bg, operations.Run{Owner: own, Phase: phase.InProgress, Profile: profile}))
	batch := timedOps(own, 3)
	require.NoError(t, s.PutOperations(bg, own, batch))
	dropRunRecords(t, b, own)

	runs, lost := readSnapshot(t, b)
	require.Empty(t, runs)
	require.Len(t, lost, 3)
	for i, l := range lost {
		require.Equal(t, operations.Owner{Kind: own.Kind, Name: own.Name}, l.Owner)
		require.Equal(t, batch[i].ID, l.ID)
		require.Contains(t, l.Why, "cannot be rebuilt: its kind is one of one's own, and 0 profiles of it were read")
	}
}
