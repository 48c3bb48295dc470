package kv_test

import (
	"bytes"
	"context"
	"fmt"
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
