package kv_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/kv"
	"github.com/itemops/itemops/storage/memstore"
)

// watching is a backend that counts the Reads that returned an error wrapping
// operations.ErrCorrupt.
type watching struct {
	kv.Backend
	corrupt atomic.Int64
}

func (w *watching) Read(ctx context.Context, fn func(kv.Reader) error) error {
	err := w.Backend.Read(ctx, fn)
	if errors.Is(err, operations.ErrCorrupt) {
		w.corrupt.Add(1)
	}
	return err
}

var (
	damageT0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	// damageRuns are the runs of filledStore: one of each kind with operations, and a
	// run with a staged batch not yet applied.
	damageRuns = []operations.Owner{
		{Kind: phase.Backup, Name: "b-1", UID: "u1"},
		{Kind: phase.Restore, Name: "r-1", UID: "u2"},
		{Kind: phase.Backup, Name: "staged", UID: "u3"},
	}
)

// filledStore returns a memory backend holding damageRuns: one run of each kind with
// operations, and a run whose operations metadata names a staged batch of one chunk
// (it writes a key of no run), which the next read of the run's operations applies.
func filledStore(t *testing.T) kv.Backend {
	t.Helper()
	ctx := context.Background()
	b := memstore.NewBackend(kv.Limits{})
	s, err := kv.Open(ctx, b)
	require.NoError(t, err)
	for i, o := range damageRuns {
		r := operations.Run{Owner: o, Phase: phase.New, Created: damageT0}
		require.NoError(t, r.SetPhase(phase.WaitingForPluginOperations, "main run ended", damageT0))
		var ops []operations.Operation
		if i < 2 {
			for j, p := range []operations.OperationPhase{operations.OperationInProgress, operations.OperationCompleted, operations.OperationNew} {
				ops = append(ops, operations.Operation{Owner: o, Action: "p", ID: fmt.Sprint("op-", j+1),
					Status: operations.Status{Phase: p, NTotal: 10, Created: damageT0}})
			}
		}
		require.NoError(t, s.CreateRunWithOperations(ctx, r, ops))
	}
	metaKey, metaValue := kv.StagedMeta(damageRuns[2])
	chunk := []byte{0, 3, 'z', 'z', 'z', 1, 'x'} // put "zzz" = "x"
	require.NoError(t, b.Commit(ctx, nil, []kv.Write{{Key: metaKey, Value: metaValue}, {Key: kv.StagedChunkKey(damageRuns[2], 0), Value: chunk}}))
	return b
}

// entries returns the keys and values of b, in key order.
func entries(t *testing.T, b kv.Backend) (keys, values [][]byte) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, b.Read(ctx, func(r kv.Reader) error {
		return r.Scan(ctx, nil, nil, func(k, v []byte, _ kv.Version) error {
			keys, values = append(keys, bytes.Clone(k)), append(values, bytes.Clone(v))
			return nil
		})
	}))
	return keys, values
}

// TestDamageIsFoundWithinRead damages each value of a store, cut at every length and
// with every byte changed, and asserts that every call of the engine that reports it
// (an error wrapping operations.ErrCorrupt) found it within a Read of the backend, as
// Backend.Read promises, so that a driver that stops writing once its data is found
// damaged (storage/boltstore) sees every such finding; and that CreateRun over a run
// whose record does not decode reports the damage, not ErrExists. In -short mode it
// cuts and changes every fifth byte.
func TestDamageIsFoundWithinRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	stride := 1
	if testing.Short() {
		stride = 5
	}
	keys, values := entries(t, filledStore(t))
	tried, found := 0, 0
	for key := range keys {
		// Each value cut at every length and with every byte changed.
		var damaged [][]byte
		for i := 0; i < len(values[key]); i += stride {
			flipped := bytes.Clone(values[key])
			flipped[i] ^= 0x5a
			damaged = append(damaged, values[key][:i], flipped)
		}
		for d, value := range damaged {
			b := filledStore(t)
			require.NoError(t, b.Commit(ctx, nil, []kv.Write{{Key: keys[key], Value: value}}))
			tried++
			what := fmt.Sprintf("key %q, damaged value %d", keys[key], d)
			w := &watching{Backend: b}
			s, err := kv.Open(ctx, w)
			if err != nil {
				require.ErrorIsf(t, err, kv.ErrFormat, "%s: Open", what)
				continue
			}
			check := func(name string, f func() error) error {
				t.Helper()
				before := w.corrupt.Load()
				err := f()
				if errors.Is(err, operations.ErrCorrupt) {
					found++
					require.Greaterf(t, w.corrupt.Load(), before, "%s: %s reported damage (%v) that no Read of the backend returned", what, name, err)
				}
				return err
			}
			check("ListRuns", func() error { _, err := s.ListRuns(ctx, operations.RunFilter{}); return err })
			check("ListRuns waiting", func() error {
				_, err := s.ListRuns(ctx, operations.RunFilter{Phases: []phase.Phase{phase.WaitingForPluginOperations}})
				return err
			})
			for _, o := range damageRuns {
				getErr := check("GetRun "+o.Name, func() error { _, err := s.GetRun(ctx, o); return err })
				createErr := check("CreateRun "+o.Name, func() error {
					return s.CreateRun(ctx, operations.Run{Owner: o, Phase: phase.New, Created: damageT0})
				})
				if errors.Is(getErr, operations.ErrCorrupt) {
					require.ErrorIsf(t, createErr, operations.ErrCorrupt, "%s: CreateRun %s over a run that GetRun finds damaged", what, o.Name)
				}
				check("ListOperations "+o.Name, func() error {
					_, err := s.ListOperations(ctx, o, operations.OperationFilter{})
					return err
				})
				for j := 1; j <= 3; j++ {
					check(fmt.Sprintf("GetOperation %s op-%d", o.Name, j), func() error {
						_, err := s.GetOperation(ctx, o, fmt.Sprint("op-", j))
						return err
					})
				}
				check("PutOperations "+o.Name, func() error {
					return s.PutOperations(ctx, o, []operations.Operation{{Owner: o, Action: "p", ID: "op-1",
						Status: operations.Status{Phase: operations.OperationInProgress, NTotal: 10, NCompleted: 5, Created: damageT0}}})
				})
				check("UpdateRun "+o.Name, func() error {
					_, err := s.UpdateRun(ctx, o, func(r *operations.Run) error { r.Warnings++; return nil })
					return err
				})
				check("DeleteRun "+o.Name, func() error { return s.DeleteRun(ctx, o) })
			}
		}
	}
	require.Positive(t, found, "damage reported")
	t.Logf("%d damaged values tried; %d calls reported damage, each within a Read", tried, found)
}
