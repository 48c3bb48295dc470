package kv

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
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
	if len(writes) == 0 || !bytes.Equal(writes[0].Key, runKey(o)) {
		return nil, fmt.Errorf("kv: a commit that changes the run %s does not write its key first", o)
	}
	out := make([]Write, 0, len(writes)+2)
	out = append(out, writes[0])
	if run.Record != nil {
		out = append(out, Write{Key: idxKey(o, run.Phase), Value: run.Record})
	}
	if run.From != "" && (run.Delete || run.From != run.Phase) {
		out = append(out, Write{Key: idxKey(o, run.From), Delete: true})
	}
	return append(out, writes[1:]...), nil
}

// ScanRuns reads, in one Read, the run keys of the kinds f selects when f names no
// phase, and otherwise the phase index entries of the phases f names, each phase once.
func (f *flat) ScanRuns(ctx context.Context, q operations.RunFilter, fn func(p Partition, indexed phase.Phase, record []byte) error) error {
	// The kinds to read; "" stands for every kind of one's own.
	kinds := []phase.Kind{phase.Backup, phase.Restore, ""}
	if q.Kind != "" {
		kinds = nil // no run has a kind that is no name
		if q.Kind.Validate() == nil {
			kinds = []phase.Kind{q.Kind}
		}
	}
	return f.b.Read(ctx, func(r Reader) error {
		for _, kind := range kinds {
			if len(q.Phases) == 0 {
				start := runPrefix(kind)
				err := r.Scan(ctx, start, end(start), func(k, v []byte, _ Version) error {
					o, err := ownerOfRunKey(k)
					if err != nil {
						return err
					}
					return fn(partitionOf(o), "", v)
				})
				if err != nil {
					return err
				}
				continue
			}
			for i, p := range q.Phases {
				if slices.Contains(q.Phases[:i], p) {
					continue
				}
				start := idxPrefix(kind, p)
				err := r.Scan(ctx, start, end(start), func(k, v []byte, _ Version) error {
					part := Partition{Kind: kind, Name: string(k[len(start):])}
					if kind == "" {
						o, err := ownerOfOwnIdxKey(start, k)
						if err != nil {
							return err
						}
						part = partitionOf(o)
					}
					return fn(part, p, v)
				})
				if err != nil {
					return err
				}
			}
		}
		return nil
	})
}
