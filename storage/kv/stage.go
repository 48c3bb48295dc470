package kv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/storage/internal/layout"
)

// fits reports whether one commit of p of conds and writes, which makes run, is within
// the backend's limits, counted as [PartitionedBackend.Limits] says: with the phase
// index entries that run makes on a Backend.
func (s *Store) fits(p Partition, run RunChange, conds []Condition, writes []Write) bool {
	flat, err := flatWrites(p, run, writes)
	return err == nil && s.limits.allows(commitSize(conds, flat))
}

// commitBatch writes a batch of the operations of the run of partition p, whose
// operations prefix is prefix: the run's record, when run gives one, body (operation
// records and index entries) and the run's operations metadata meta, with its batch
// counter raised, if conds hold.
// When all of it fits one Commit, it is one Commit. Otherwise body is staged in chunks,
// each its own Commit under the run's staged/ keys that no reader looks at; then one
// Commit of the run's record and of meta, naming the batch, commits it; then the chunks are applied
// (see rollForward). A reader never sees
// part of the batch: before the commit none of it counts, and after it every reader
// applies the rest before it reads. An error wrapping ErrConditionFailed means a
// condition did not hold and the batch was not committed; its staged chunks, if any,
// are left for the run's next staged batch or its deletion to remove.
//
// via, when not nil, is the Reader of a [PassBackend]'s ScanPartitions that the batch
// was planned on: a batch that fits one commit is then committed with CommitRead.
func (s *Store) commitBatch(ctx context.Context, p Partition, prefix []byte, via Reader, conds []Condition, run RunChange, body []Write, meta layout.Meta) error {
	var head []Write
	if run.Record != nil {
		head = []Write{{Key: layout.RunKey(p.owner()), Value: run.Record}}
	}
	metaKey := layout.OpsKey(prefix, layout.OpsMeta)
	meta.Batches++
	all := append(body, Write{Key: metaKey, Value: meta.Append(nil)}) // body's spare room, if any
	if len(head) > 0 {
		all = append(head[:len(head):len(head)], all...)
	}
	if s.fits(p, run, conds, all) {
		if pb, ok := s.b.(PassBackend); ok && via != nil {
			return pb.CommitRead(ctx, p, via, run, conds, all)
		}
		return s.b.CommitPartition(ctx, p, run, conds, all)
	}
	batch := s.batchNumber()
	chunks, err := s.chunks(prefix, batch, body)
	if err != nil {
		return err
	}
	for i, c := range chunks {
		if err := s.b.CommitPartition(ctx, p, RunChange{}, nil, []Write{{Key: layout.StagedKey(prefix, batch, i), Value: c}}); err != nil {
			return fmt.Errorf("stage chunk %d of %d: %w", i+1, len(chunks), err)
		}
	}
	meta.Staged = batch
	commit := append(head[:len(head):len(head)], Write{Key: metaKey, Value: meta.Append(nil)})
	if !s.fits(p, run, conds, commit) {
		return fmt.Errorf("the run's records alone exceed one write of the backend (%+v): %w", s.limits, errors.Join(ErrTooLarge, operations.ErrInvalid))
	}
	if err := s.b.CommitPartition(ctx, p, run, conds, commit); err != nil {
		return err
	}
	return s.rollForward(ctx, p, prefix)
}

// batchNumber returns the number of a new staged batch: random, so that the chunks of
// two writers that stage batches of one run at once never share keys, and never 0,
// which means none.
func (s *Store) batchNumber() uint64 {
	if s.nextBatch != nil {
		return s.nextBatch()
	}
	return rand.Uint64() | 1
}

// chunks encodes writes, puts and single-key deletes, into chunks that each fit one
// Commit when applied with a condition and the deletion of the chunk itself.
func (s *Store) chunks(prefix []byte, batch uint64, writes []Write) ([][]byte, error) {
	overhead := 2*len(layout.StagedKey(prefix, batch, 0)) + len(layout.OpsKey(prefix, layout.OpsMeta)) + 64
	maxOps, maxBytes := s.limits.MaxOps-2, s.limits.MaxBytes-overhead
	if s.limits.MaxOps <= 0 {
		maxOps = len(writes)
	}
	if s.limits.MaxBytes <= 0 {
		maxBytes = int(^uint(0) >> 1)
	}
	if maxOps < 1 || maxBytes < 1 {
		return nil, fmt.Errorf("backend limits %+v leave no room to stage a batch: %w", s.limits, ErrTooLarge)
	}
	var out [][]byte
	var cur []byte
	n := 0
	for _, w := range writes {
		size := layout.ChunkWriteSize(len(w.Key), len(w.Value))
		if size > maxBytes {
			return nil, fmt.Errorf("a record of %d bytes exceeds one write of the backend (%+v): %w", len(w.Value), s.limits, errors.Join(ErrTooLarge, operations.ErrInvalid))
		}
		if n == maxOps || len(cur)+size > maxBytes {
			out, cur, n = append(out, cur), nil, 0
		}
		cur = layout.AppendChunkWrite(cur, layout.ChunkWrite{Key: w.Key, Value: w.Value, Delete: w.Delete})
		n++
	}
	if n > 0 {
		out = append(out, cur)
	}
	return out, nil
}

// parseChunk decodes a staged chunk into the writes it holds.
func parseChunk(b []byte) ([]Write, error) {
	cws, err := layout.ParseChunk(b)
	if err != nil {
		return nil, err
	}
	out := make([]Write, len(cws))
	for i, w := range cws {
		out[i] = Write{Key: w.Key, Value: w.Value, Delete: w.Delete}
	}
	return out, nil
}

// rollForward applies the staged batch that the operations metadata of the run of p,
// under prefix, names,
// if any: each chunk is applied, and deleted, by one Commit on condition that the
// metadata has not changed, and a last such Commit clears the metadata's batch and
// deletes every staged chunk of the run (those of batches that never committed too).
// Because no other batch of the run can commit while one is staged, two callers that
// apply the same chunk write the same values; a caller that finds the metadata changed
// starts over.
func (s *Store) rollForward(ctx context.Context, p Partition, prefix []byte) error {
	metaKey := layout.OpsKey(prefix, layout.OpsMeta)
	err := s.retry(ctx, func() error {
		var meta layout.Meta
		var ver Version
		type chunk struct {
			key    []byte
			writes []Write
		}
		var chunks []chunk
		// Chunks are decoded within the Read, so that the backend sees a damaged one
		// (see Backend.Read).
		err := s.b.ReadPartition(ctx, p, func(r Reader) (err error) {
			if meta, ver, err = readMeta(ctx, r, metaKey); err != nil || meta.Staged == 0 {
				return err
			}
			start := layout.StagedPrefix(prefix, meta.Staged)
			return r.Scan(ctx, start, end(start), func(k, v []byte, _ Version) error {
				writes, err := parseChunk(v) // it copies what it keeps
				if err != nil {
					return fmt.Errorf("chunk %x: %w", k, err)
				}
				chunks = append(chunks, chunk{bytes.Clone(k), writes})
				return nil
			})
		})
		if err != nil || meta.Staged == 0 {
			return err
		}
		cond := []Condition{{Key: metaKey, Version: ver}}
		for _, c := range chunks {
			if err := lost(s.b.CommitPartition(ctx, p, RunChange{}, cond, append(c.writes, Write{Key: c.key, Delete: true}))); err != nil {
				return err
			}
		}
		meta.Staged = 0
		staged := layout.OpsKey(prefix, layout.OpsStaged)
		return lost(s.b.CommitPartition(ctx, p, RunChange{}, cond, []Write{
			{Key: metaKey, Value: meta.Append(nil)},
			{Key: staged, End: end(staged), Delete: true},
		}))
	})
	if err != nil {
		return fmt.Errorf("apply a staged batch: %w", err)
	}
	return nil
}
