package kv

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/internal/layout"
)

// flat is the partitioned view of a [Backend] that [Open] gives the engine: every
// partition is a part of the one key space, a commit of a partition is a Commit
// (through the committer, so that a GroupCommitter gets groups), and the phase index
// (the p keys) is kept by adding its writes to each commit that changes a run's record.
type flat struct {
	b       Backend
	commits *committer // every commit goes through it
}

var _ PartitionedBackend = (*flat)(nil)

func newFlat(b Backend) *flat { return &flat{b: b, commits: newCommitter(b)} }

func (f *flat) ReadPartition(ctx context.Context, _ Partition, fn func(Reader) error) error {
	return f.b.Read(ctx, fn)
}

func (f *flat) CommitPartition(ctx context.Context, p Partition, run RunChange, conds []Condition, writes []Write) error {
	writes, err := flatWrites(p, run, writes)
	if err != nil {
		return err
	}
	return f.commits.commit(ctx, conds, writes)
}

func (f *flat) Limits() Limits { return f.b.Limits() }

// flatWrites returns the writes of a commit of p with the phase index entries that
// run makes: the entry of run.Phase holding run.Record, and the deletion of the entry of
// run.From when the phase changes or the run is deleted. They follow the write of the
// run's key, which is the first of every commit of the engine that changes a run's
// record. It fails when that write is not first, which the engine never does.
func flatWrites(p Partition, run RunChange, writes []Write) ([]Write, error) {
	if run.Record == nil && !run.Delete {
		return writes, nil
	}
	o := p.owner()
	if len(writes) == 0 || !bytes.Equal(writes[0].Key, layout.RunKey(o)) {
		return nil, fmt.Errorf("kv: a commit that changes the run %s does not write its key first", o)
	}
	out := make([]Write, 0, len(writes)+2)
	out = append(out, writes[0])
	if run.Record != nil {
		out = append(out, Write{Key: layout.IdxKey(o, run.Phase), Value: run.Record})
	}
	if run.From != "" && (run.Delete || run.From != run.Phase) {
		out = append(out, Write{Key: layout.IdxKey(o, run.From), Delete: true})
	}
	return append(out, writes[1:]...), nil
}

// ScanRuns reads, in one Read, the run keys of the kinds f selects when f names no
// phase, and otherwise the phase index entries of the phases f names, each phase once.
func (f *flat) ScanRuns(ctx context.Context, q operations.RunFilter, fn func(p Partition, indexed phase.Phase, record []byte) error) error {
	return f.b.Read(ctx, func(r Reader) error {
		for _, sc := range f.scans(q) {
			err := r.Scan(ctx, sc.start, sc.end, func(k, v []byte, _ Version) error {
				p, err := sc.partition(k)
				if err != nil {
					return err
				}
				return fn(p, sc.phase, v)
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// A runScan is one range of keys that lists runs: the run keys of a kind, or the phase
// index entries of a kind (or of every kind of one's own) in one phase.
type runScan struct {
	start, end []byte
	phase      phase.Phase // the phase of the index entries; empty for run keys
	kind       phase.Kind  // empty: every kind of one's own
}

// scans returns the ranges that list the runs q selects: the run keys of the kinds q
// selects when q names no phase, and otherwise the phase index entries of the phases q
// names, each phase once.
func (f *flat) scans(q operations.RunFilter) []runScan {
	// The kinds to read; "" stands for every kind of one's own.
	kinds := []phase.Kind{phase.Backup, phase.Restore, ""}
	if q.Kind != "" {
		kinds = nil // no run has a kind that is no name
		if q.Kind.Validate() == nil {
			kinds = []phase.Kind{q.Kind}
		}
	}
	var out []runScan
	for _, kind := range kinds {
		if len(q.Phases) == 0 {
			start := layout.RunPrefix(kind)
			out = append(out, runScan{start: start, end: end(start), kind: kind})
			continue
		}
		for i, p := range q.Phases {
			if !slices.Contains(q.Phases[:i], p) {
				start := layout.IdxPrefix(kind, p)
				out = append(out, runScan{start: start, end: end(start), phase: p, kind: kind})
			}
		}
	}
	return out
}

// partition returns the partition of the run whose key (a run key or a phase index
// entry's) sc found.
func (sc runScan) partition(k []byte) (Partition, error) {
	if sc.phase == "" {
		o, err := layout.OwnerOfRunKey(k)
		return partitionOf(o), err
	}
	if sc.kind == "" {
		o, err := layout.OwnerOfOwnIdxKey(sc.start, k)
		return partitionOf(o), err
	}
	return Partition{Kind: sc.kind, Name: string(k[len(sc.start):])}, nil
}
