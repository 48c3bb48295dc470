package kv_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/kv"
	"github.com/itemops/itemops/storage/kv/kvtest"
	"github.com/itemops/itemops/storage/memstore"
	"github.com/itemops/itemops/storage/storetest"
)

// partitionedStore opens the engine over a partitioned backend of kvtest, which fails
// every commit that spans two partitions.
func partitionedStore(t *testing.T, limits kv.Limits) *kv.Store {
	t.Helper()
	s, err := kv.OpenPartitioned(context.Background(), kvtest.NewPartitionedBackend(limits))
	require.NoError(t, err)
	return s
}

// The whole contract holds on a partitioned backend, with no limit and with limits
// small enough that batches are staged: the engine needs no commit across runs, and
// lists runs from ScanRuns alone.
func TestPartitionedConformance(t *testing.T) {
	for _, c := range []struct {
		name   string
		limits kv.Limits
	}{
		{"NoLimits", kv.Limits{}},
		{"Staged", kv.Limits{MaxOps: 8, MaxBytes: 512 << 10}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			storetest.Run(t, func(t *testing.T) operations.Store { return partitionedStore(t, c.limits) })
		})
	}
}

func TestPartitionedCancel(t *testing.T) {
	storetest.RunCancel(t, func(t *testing.T) operations.Store { return partitionedStore(t, kv.Limits{}) })
}

// The workload of TestLayoutGolden leaves the same runs and operations on a
// partitioned backend as on a flat one.
func TestPartitionedWorkload(t *testing.T) {
	flat := goldenStore(t, memstore.NewBackend(goldenLimits))
	goldenWorkload(t, flat)
	part := partitionedStore(t, goldenLimits)
	goldenWorkload(t, part)
	contents := func(s *kv.Store) map[string][]operations.Operation {
		ctx := context.Background()
		runs, err := s.ListRuns(ctx, operations.RunFilter{})
		require.NoError(t, err)
		out := map[string][]operations.Operation{}
		for _, r := range runs {
			ops, err := s.ListOperations(ctx, r.Owner, operations.OperationFilter{})
			require.NoError(t, err)
			out[r.Owner.String()] = ops
		}
		return out
	}
	want := contents(flat)
	require.Len(t, want, 2)
	if diff := cmp.Diff(want, contents(part)); diff != "" {
		t.Errorf("operations on a partitioned backend (-flat +partitioned):\n%s", diff)
	}
	for _, f := range []operations.RunFilter{
		{},
		{Kind: "Snapshot"},
		{Kind: "snapshot"},
		{Phases: []phase.Phase{phase.WaitingForPluginOperations, phase.InProgress}},
	} {
		want, err := flat.ListRuns(context.Background(), f)
		require.NoError(t, err)
		got, err := part.ListRuns(context.Background(), f)
		require.NoError(t, err)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("ListRuns(%+v) on a partitioned backend (-flat +partitioned):\n%s", f, diff)
		}
	}
}

// The partitioned backend of kvtest refuses a commit that names, or range-deletes, a
// key of another partition, and a RunChange that does not fit the run, writing nothing,
// so the tests above would fail on an engine that made such commits.
func TestNoCommitSpansPartitions(t *testing.T) {
	ctx := context.Background()
	a, b := kv.Partition{Kind: phase.Backup, Name: "a"}, kv.Partition{Kind: phase.Backup, Name: "b"}
	put := func(k string) []kv.Write { return []kv.Write{{Key: []byte(k), Value: []byte("v")}} }
	for _, c := range []struct {
		name   string
		p      kv.Partition
		run    kv.RunChange
		conds  []kv.Condition
		writes []kv.Write
		want   error
	}{
		{name: "WriteOfAnother", p: a, writes: put("b1"), want: kvtest.ErrSpansPartitions},
		{name: "ConditionOfAnother", p: a, conds: []kv.Condition{{Key: []byte("b1"), Version: 1}}, writes: put("a2"), want: kvtest.ErrSpansPartitions},
		{name: "RangeDeleteOverAnother", p: a, writes: []kv.Write{{Key: []byte("a"), End: []byte("c"), Delete: true}}, want: kvtest.ErrSpansPartitions},
		{name: "GlobalChangesARun", p: kv.Partition{}, run: kv.RunChange{Record: []byte("r"), Phase: phase.New}, writes: put("g"), want: kvtest.ErrRunChange},
		{name: "WrongFrom", p: b, run: kv.RunChange{Record: []byte("r"), Phase: phase.InProgress, From: phase.Queued}, writes: put("b1"), want: kvtest.ErrRunChange},
		{name: "DeleteAbsentRun", p: a, run: kv.RunChange{From: phase.New, Delete: true}, writes: []kv.Write{{Key: []byte("a1"), Delete: true}}, want: kvtest.ErrRunChange},
	} {
		t.Run(c.name, func(t *testing.T) {
			pb := kvtest.NewPartitionedBackend(kv.Limits{})
			require.NoError(t, pb.CommitPartition(ctx, a, kv.RunChange{}, nil, put("a1")))
			require.NoError(t, pb.CommitPartition(ctx, b, kv.RunChange{Record: []byte("r"), Phase: phase.New}, nil, put("b1")))
			before := partitionedKeys(t, pb)
			err := pb.CommitPartition(ctx, c.p, c.run, c.conds, c.writes)
			require.ErrorIs(t, err, c.want)
			if diff := cmp.Diff(before, partitionedKeys(t, pb)); diff != "" {
				t.Errorf("a refused commit wrote (-before +after):\n%s", diff)
			}
		})
	}
}

// partitionedKeys returns every key of pb with its value, and the runs it lists.
func partitionedKeys(t *testing.T, pb kv.PartitionedBackend) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	require.NoError(t, pb.ReadPartition(ctx, kv.Partition{}, func(r kv.Reader) error {
		return r.Scan(ctx, nil, nil, func(k, v []byte, _ kv.Version) error {
			out[string(k)] = string(v)
			return nil
		})
	}))
	require.NoError(t, pb.ScanRuns(ctx, operations.RunFilter{}, func(p kv.Partition, _ phase.Phase, rec []byte) error {
		out["run "+string(p.Kind)+"/"+p.Name] = string(rec)
		return nil
	}))
	return out
}

// lyingScan is a partitioned backend whose ScanRuns passes each run's record through
// damage and reports phase under indexed, when phase is set.
type lyingScan struct {
	kv.PartitionedBackend
	damage func([]byte) []byte
	phase  phase.Phase
}

func (l lyingScan) ScanRuns(ctx context.Context, f operations.RunFilter, fn func(kv.Partition, phase.Phase, []byte) error) error {
	return l.PartitionedBackend.ScanRuns(ctx, f, func(p kv.Partition, indexed phase.Phase, rec []byte) error {
		if l.phase != "" {
			indexed = l.phase
		}
		return fn(p, indexed, l.damage(rec))
	})
}

// ListRuns refuses what a partitioned backend's ScanRuns gives when it is damaged: a
// record listed under a phase other than its own, and a record cut at any byte, is
// operations.ErrCorrupt. (A byte changed within a record's text still decodes; telling
// it is the driver's part, as boltstore's checksums are.)
func TestListRunsRefusesDamagedScan(t *testing.T) {
	ctx := context.Background()
	pb := kvtest.NewPartitionedBackend(kv.Limits{})
	s, err := kv.OpenPartitioned(ctx, pb)
	require.NoError(t, err)
	o := operations.Owner{Kind: phase.Backup, Name: "nightly", UID: "u"}
	r := operations.Run{Owner: o, Phase: phase.New, Created: goldenBase, Updated: goldenBase, OperationTimeout: time.Hour}
	require.NoError(t, r.SetPhase(phase.InProgress, "started", goldenBase.Add(time.Minute)))
	require.NoError(t, s.CreateRun(ctx, r))
	inProgress := operations.RunFilter{Phases: []phase.Phase{phase.InProgress, phase.Completed}}
	want, err := s.ListRuns(ctx, inProgress)
	require.NoError(t, err)
	require.Len(t, want, 1)

	open := func(l lyingScan) *kv.Store {
		l.PartitionedBackend = pb
		if l.damage == nil {
			l.damage = func(b []byte) []byte { return b }
		}
		s, err := kv.OpenPartitioned(ctx, l)
		require.NoError(t, err)
		return s
	}
	_, err = open(lyingScan{phase: phase.Completed}).ListRuns(ctx, inProgress)
	require.ErrorIs(t, err, operations.ErrCorrupt)

	var rec []byte
	require.NoError(t, pb.ScanRuns(ctx, operations.RunFilter{}, func(_ kv.Partition, _ phase.Phase, b []byte) error {
		rec = bytes.Clone(b)
		return nil
	}))
	check := func(what string, damaged []byte) {
		t.Helper()
		got, err := open(lyingScan{damage: func([]byte) []byte { return damaged }}).ListRuns(ctx, inProgress)
		require.ErrorIs(t, err, operations.ErrCorrupt, "%s: ListRuns gave %+v", what, got)
	}
	for n := range len(rec) {
		check(fmt.Sprintf("record cut to %d bytes", n), rec[:n:n])
	}
}

// summing is a partitioned backend that adds up, for each run, the operations that the
// RunChanges of its successful commits add and finish, and keeps the History of the
// last one that wrote its record.
type summing struct {
	kv.PartitionedBackend
	mu      sync.Mutex // guards the fields below
	added   map[kv.Partition]int
	done    map[kv.Partition]int
	history map[kv.Partition][]operations.Transition
}

func (s *summing) CommitPartition(ctx context.Context, p kv.Partition, run kv.RunChange, conds []kv.Condition, writes []kv.Write) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.PartitionedBackend.CommitPartition(ctx, p, run, conds, writes); err != nil {
		return err
	}
	switch {
	case run.Delete:
		delete(s.added, p)
		delete(s.done, p)
		delete(s.history, p)
	case run.Record != nil:
		s.history[p] = slices.Clone(run.History)
	}
	s.added[p] += run.Added
	s.done[p] += run.Finished
	return nil
}

// TestRunChangeCounts runs random workloads of runs created with and without
// operations, batches that add operations, move them on and finish them (in any phase,
// new ones included), updates of runs and deletions, with and without staged batches:
// after each call, the sums of each run's RunChange.Added and Finished are its number of
// operations and of finished ones, and the History of the last RunChange with a record
// is the run's.
func TestRunChangeCounts(t *testing.T) {
	phases := []operations.OperationPhase{operations.OperationNew, operations.OperationInProgress, operations.OperationCompleted, operations.OperationFailed}
	for _, limits := range []kv.Limits{{}, {MaxOps: 8, MaxBytes: 64 << 10}} {
		for seed := range uint64(20) {
			t.Run(fmt.Sprintf("Limits%d/Seed%d", limits.MaxOps, seed), func(t *testing.T) {
				ctx := context.Background()
				rng := rand.New(rand.NewPCG(seed, 38))
				b := &summing{PartitionedBackend: kvtest.NewPartitionedBackend(limits),
					added: map[kv.Partition]int{}, done: map[kv.Partition]int{}, history: map[kv.Partition][]operations.Transition{}}
				s, err := kv.OpenPartitioned(ctx, b)
				require.NoError(t, err)
				t0 := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
				owners := []operations.Owner{
					{Kind: phase.Backup, Name: "a", UID: "ua"}, {Kind: phase.Restore, Name: "b", UID: "ub"},
				}
				// ops holds the phase every stored operation reached, by owner and ID.
				ops := map[operations.Owner]map[string]operations.OperationPhase{}
				batch := func(o operations.Owner) []operations.Operation {
					var out []operations.Operation
					for i := range rng.IntN(20) {
						id := fmt.Sprintf("op-%d", rng.IntN(30))
						if slices.ContainsFunc(out, func(op operations.Operation) bool { return op.ID == id }) {
							continue
						}
						ph := phases[rng.IntN(len(phases))]
						if was, ok := ops[o][id]; ok && was.Finished() {
							ph = was // a finished operation stays finished
						}
						out = append(out, operations.Operation{Owner: o, Action: "x.io/a", ID: id,
							Status: operations.Status{Phase: ph, Created: t0, NCompleted: int64(i)}})
					}
					return out
				}
				stored := func(o operations.Owner, batch []operations.Operation) {
					for _, op := range batch {
						ops[o][op.ID] = op.Status.Phase
					}
				}
				for step := range 60 {
					o := owners[rng.IntN(len(owners))]
					_, exists := ops[o]
					switch k := rng.IntN(10); {
					case !exists:
						r := operations.Run{Owner: o, Phase: phase.New, Created: t0, Updated: t0}
						require.NoError(t, r.SetPhase(phase.InProgress, "start", t0))
						ops[o] = map[string]operations.OperationPhase{}
						bt := batch(o)
						require.NoError(t, s.CreateRunWithOperations(ctx, r, bt), "step %d", step)
						stored(o, bt)
					case k < 6:
						bt := batch(o)
						require.NoError(t, s.PutOperations(ctx, o, bt), "step %d", step)
						stored(o, bt)
					case k < 9:
						_, err := s.UpdateRun(ctx, o, func(r *operations.Run) error {
							if r.Phase == phase.InProgress {
								return r.SetPhase(phase.WaitingForPluginOperations, fmt.Sprintf("step %d", step), t0)
							}
							r.ItemsDone++
							return nil
						})
						require.NoError(t, err, "step %d", step)
					default:
						require.NoError(t, s.DeleteRun(ctx, o), "step %d", step)
						delete(ops, o)
					}
					for _, o := range owners {
						p := kv.Partition{Kind: o.Kind, Name: o.Name}
						if _, ok := ops[o]; !ok {
							require.Zero(t, b.added[p], "step %d: the sums of a deleted run", step)
							continue
						}
						list, err := s.ListOperations(ctx, o, operations.OperationFilter{})
						require.NoError(t, err)
						finished := 0
						for _, op := range list {
							if op.Status.Phase.Finished() {
								finished++
							}
						}
						if got, want := [2]int{b.added[p], b.done[p]}, [2]int{len(list), finished}; got != want {
							t.Fatalf("step %d: %s: RunChanges add up to %d operations, %d finished; the run has %v", step, o, got[0], got[1], want)
						}
						r, err := s.GetRun(ctx, o)
						require.NoError(t, err)
						if diff := cmp.Diff(r.History, b.history[p]); diff != "" {
							t.Fatalf("step %d: %s: the last RunChange's History (-run +RunChange):\n%s", step, o, diff)
						}
					}
				}
			})
		}
	}
}
