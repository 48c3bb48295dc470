package kv

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/itemops/itemops/internal/seqmerge"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/storage/internal/layout"
	"github.com/itemops/itemops/storage/internal/record"
)

// encodeBatch validates ops as a batch of o and encodes their records. The records are
// the engine's own copies: nothing of ops is kept.
func encodeBatch(o operations.Owner, ops []operations.Operation) ([][]byte, error) {
	if err := operations.ValidateBatch(o, ops); err != nil {
		return nil, err
	}
	// All records are carved from one buffer, each with its own capacity.
	recs := make([][]byte, len(ops))
	var buf []byte
	for i := range ops {
		start := len(buf)
		buf = record.AppendOperation(buf, &ops[i])
		recs[i] = buf[start:len(buf):len(buf)]
		if i == 0 {
			// Room for the others at the first one's size and an eighth more, so that
			// the buffer is seldom copied as it grows.
			buf = slices.Grow(buf[len(buf):], (len(ops)-1)*(len(buf)+len(buf)/8))
		}
	}
	return recs, nil
}

// finished returns how many of recs, records of operations, are of finished ones.
func finished(recs [][]byte) int {
	n := 0
	for _, r := range recs {
		if !record.Unfinished(r[1]) {
			n++
		}
	}
	return n
}

// planNew returns the writes that insert ops, none of them stored yet, numbering them
// from meta.Next, which it advances.
func planNew(prefix []byte, meta *layout.Meta, ops []operations.Operation, recs [][]byte) []Write {
	writes := make([]Write, 0, 2*len(ops))
	for i := range ops {
		e := layout.IDEntry{Seq: meta.Next, Code: recs[i][1]}
		meta.Next++
		writes = append(writes,
			Write{Key: layout.RecordKey(prefix, e.Seq, e.Code), Value: recs[i]},
			Write{Key: layout.IDKey(prefix, ops[i].ID), Value: layout.AppendIDEntry(nil, e)})
	}
	return writes
}

// PutOperations writes ops, all of o, as one atomic batch: new IDs are added after the
// run's other operations, in the order of ops, and known IDs are replaced where they
// stand. A batch larger than one write of the backend is staged and committed whole
// (see the package documentation). It fails, writing nothing, with the error of
// [operations.ValidateBatch], with
// [operations.ErrNotFound] or [operations.ErrUIDMismatch] as [Store.GetRun] does, with
// the error of [operations.ValidateOperationUpdate] when the batch would revive a
// finished operation, with [operations.ErrConflict] when it keeps losing races (see [WithRetries]), and with
// ctx.Err() or the backend's error. An empty batch writes nothing and succeeds when the
// run exists.
func (s *Store) PutOperations(ctx context.Context, o operations.Owner, ops []operations.Operation) error {
	if s == nil {
		return ErrClosed
	}
	recs, err := encodeBatch(o, ops)
	if err != nil {
		return fmt.Errorf("put operations of %s: %w", o, err)
	}
	rk, prefix := layout.RunKey(o), layout.OpsPrefix(o)
	metaKey := layout.OpsKey(prefix, layout.OpsMeta)
	err = s.writeRun(ctx, rk, func() error {
		var runVer, metaVer Version
		var meta layout.Meta
		found := make([]layout.IDEntry, len(ops)) // seq 0: not stored yet
		err := s.b.ReadPartition(ctx, partitionOf(o), func(r Reader) (err error) {
			if _, runVer, err = readRun(ctx, r, o); err != nil {
				return err
			}
			if meta, metaVer, err = readMeta(ctx, r, metaKey); err != nil || meta.Staged != 0 || len(ops) == 0 {
				return err
			}
			return lookupIDs(ctx, r, prefix, ops, meta.Next-1, found)
		})
		if err != nil {
			return err
		}
		if meta.Staged != 0 {
			// Another write's batch is committed but not applied: apply it, and try
			// again. This counts as a lost race, so that a run given one staged batch
			// after another still ends in a bounded number of tries.
			if err := s.rollForward(ctx, partitionOf(o), prefix); err != nil {
				return err
			}
			return errLost
		}
		if len(ops) == 0 {
			return nil
		}
		body, change, err := planBatch(o, prefix, &meta, ops, recs, found)
		if err != nil {
			return err
		}
		conds := []Condition{{Key: rk, Version: runVer}, {Key: metaKey, Version: metaVer}}
		return lost(s.commitBatch(ctx, partitionOf(o), prefix, nil, conds, change, body, meta))
	})
	if err != nil {
		return fmt.Errorf("put operations of %s: %w", o, err)
	}
	return nil
}

// planBatch returns the writes of a batch ops of o, whose records are recs, and what
// they do to the run: found[i] is the ID index entry of ops[i] as stored (seq 0: not
// stored yet, so ops[i] is new and is numbered from meta.Next, which it advances). It
// fails with the error of operations.ValidateOperationUpdate when the batch would revive
// a finished operation.
func planBatch(o operations.Owner, prefix []byte, meta *layout.Meta, ops []operations.Operation, recs [][]byte, found []layout.IDEntry) ([]Write, RunChange, error) {
	// One write per operation in the usual case, a status update; a record that
	// moves between unfinished and finished, or a new one, takes more, and grows it.
	body := make([]Write, 0, len(ops)+2)
	keys := keyArena{buf: make([]byte, 0, len(ops)*(len(prefix)+1+8))}
	var fresh []int
	var change RunChange
	for i := range ops {
		e := found[i]
		if e.Seq == 0 {
			fresh = append(fresh, i)
			continue
		}
		before := operations.Operation{Owner: o, ID: ops[i].ID, Status: operations.Status{Phase: record.CodePhases[e.Code]}}
		if err := operations.ValidateOperationUpdate(before, ops[i]); err != nil {
			return nil, RunChange{}, fmt.Errorf("batch item %d: %w", i, err)
		}
		code := recs[i][1]
		if record.Unfinished(code) != record.Unfinished(e.Code) {
			// The record moves from the unfinished to the finished keys (an update
			// never revives a finished operation).
			body = append(body, Write{Key: keys.record(prefix, e.Seq, e.Code), Delete: true})
			change.Finished++
		}
		body = append(body, Write{Key: keys.record(prefix, e.Seq, code), Value: recs[i]})
		if code != e.Code {
			body = append(body, Write{Key: layout.IDKey(prefix, ops[i].ID), Value: layout.AppendIDEntry(nil, layout.IDEntry{Seq: e.Seq, Code: code})})
		}
	}
	if len(fresh) > 0 {
		newOps, newRecs := make([]operations.Operation, len(fresh)), make([][]byte, len(fresh))
		for j, i := range fresh {
			newOps[j], newRecs[j] = ops[i], recs[i]
		}
		body = append(body, planNew(prefix, meta, newOps, newRecs)...)
		change.Added, change.Finished = len(fresh), change.Finished+finished(newRecs)
	}
	return body, change, nil
}

// lookupIDs finds the ID index entries of ops, of a run whose index holds at most
// stored entries, into found. When the batch names a good part of the index (a quarter
// or more), it reads the whole index in one Scan: one round trip on a remote backend
// and one cursor walk on a local one, instead of a lookup per operation.
func lookupIDs(ctx context.Context, r Reader, prefix []byte, ops []operations.Operation, stored uint64, found []layout.IDEntry) error {
	if stored > 4*uint64(len(ops)) {
		for i := range ops {
			v, _, err := r.Get(ctx, layout.IDKey(prefix, ops[i].ID))
			if err != nil {
				return err
			}
			if v != nil {
				if found[i], err = layout.ParseIDEntry(ops[i].ID, v); err != nil {
					return err
				}
			}
		}
		return nil
	}
	index := make(map[string]int, len(ops))
	for i := range ops {
		index[ops[i].ID] = i
	}
	start := layout.OpsKey(prefix, layout.OpsID)
	return r.Scan(ctx, start, end(start), func(k, v []byte, _ Version) error {
		i, ok := index[string(k[len(start):])]
		if !ok {
			return nil
		}
		var err error
		found[i], err = layout.ParseIDEntry(ops[i].ID, v)
		return err
	})
}

// readMeta reads the operations metadata of a run.
func readMeta(ctx context.Context, r Reader, key []byte) (layout.Meta, Version, error) {
	v, ver, err := r.Get(ctx, key)
	if err != nil {
		return layout.Meta{}, 0, err
	}
	m, err := layout.ParseMeta(v)
	return m, ver, err
}

// readOps runs fn in a snapshot in which o's run exists, has o's UID, and has no staged
// batch left to apply; it applies one first when it finds one.
func (s *Store) readOps(ctx context.Context, o operations.Owner, fn func(r Reader, prefix []byte, meta layout.Meta) error) error {
	if err := notFoundIfInvalid(o); err != nil {
		return err
	}
	prefix := layout.OpsPrefix(o)
	metaKey := layout.OpsKey(prefix, layout.OpsMeta)
	return s.retry(ctx, func() error {
		staged := false
		err := s.b.ReadPartition(ctx, partitionOf(o), func(r Reader) error {
			if _, _, err := readRun(ctx, r, o); err != nil {
				return err
			}
			meta, _, err := readMeta(ctx, r, metaKey)
			if err != nil {
				return err
			}
			if staged = meta.Staged != 0; staged {
				return nil
			}
			return fn(r, prefix, meta)
		})
		if err != nil || !staged {
			return err
		}
		if err := s.rollForward(ctx, partitionOf(o), prefix); err != nil {
			return err
		}
		return errLost // read again, now that the batch is applied
	})
}

// GetOperation returns the operation id of o. It fails with [operations.ErrNotFound]
// when o has no run or the run no such operation, with [operations.ErrUIDMismatch] as
// [Store.GetRun] does, with an error wrapping [operations.ErrCorrupt] when a record does
// not decode, with [operations.ErrConflict] when every read it may make (see
// [WithRetries]) finds a batch of another write staged and not yet applied, and with
// ctx.Err() or the backend's error.
func (s *Store) GetOperation(ctx context.Context, o operations.Owner, id string) (operations.Operation, error) {
	if s == nil {
		return operations.Operation{}, ErrClosed
	}
	var op operations.Operation
	err := s.readOps(ctx, o, func(r Reader, prefix []byte, _ layout.Meta) error {
		v, _, err := r.Get(ctx, layout.IDKey(prefix, id))
		if err != nil {
			return err
		}
		if v == nil {
			return operations.ErrNotFound
		}
		e, err := layout.ParseIDEntry(id, v)
		if err != nil {
			return err
		}
		rec, _, err := r.Get(ctx, layout.RecordKey(prefix, e.Seq, e.Code))
		if err != nil {
			return err
		}
		if rec == nil {
			return fmt.Errorf("indexed but not stored: %w", operations.ErrCorrupt)
		}
		op, err = record.DecodeOperation(o, rec)
		return err
	})
	if err != nil {
		return operations.Operation{}, fmt.Errorf("get operation %q of %s: %w", id, o, err)
	}
	return op, nil
}

// ListOperations returns the operations of o that f selects, in the order their IDs were
// first put. When f names only unfinished phases (New, InProgress) it reads only the
// run's unfinished operations, however many finished ones it holds. It fails as
// [Store.GetOperation] does, but for a missing operation.
func (s *Store) ListOperations(ctx context.Context, o operations.Owner, f operations.OperationFilter) ([]operations.Operation, error) {
	if s == nil {
		return nil, ErrClosed
	}
	ops, err := s.listOps(ctx, o, f, nil)
	if err != nil {
		return nil, fmt.Errorf("list operations of %s: %w", o, err)
	}
	return ops, nil
}

// CountOperations returns the counts of the operations of o by phase, and the
// operations that f selects, from one read (see [operations.OperationCounter]). It
// reads every operation's record but decodes only the phase of those f does not
// select, which the record's first bytes hold: the counts cost a scan of the run's
// records, without the allocations of decoding them. It fails as
// [Store.ListOperations] does.
func (s *Store) CountOperations(ctx context.Context, o operations.Owner, f operations.OperationFilter) (operations.OperationCounts, []operations.Operation, error) {
	if s == nil {
		return operations.OperationCounts{}, nil, ErrClosed
	}
	var c operations.OperationCounts
	ops, err := s.listOps(ctx, o, f, &c)
	if err != nil {
		return operations.OperationCounts{}, nil, fmt.Errorf("count operations of %s: %w", o, err)
	}
	return c, ops, nil
}

var _ operations.OperationCounter = (*Store)(nil)

// listOps returns the operations of o that f selects, in the order their IDs were first
// put, and, when counts is not nil, counts every operation of o into it by phase.
func (s *Store) listOps(ctx context.Context, o operations.Owner, f operations.OperationFilter, counts *operations.OperationCounts) ([]operations.Operation, error) {
	onlyUnfinished := counts == nil && len(f.Phases) > 0 && !slices.ContainsFunc(f.Phases, func(p operations.OperationPhase) bool {
		return p != operations.OperationNew && p != operations.OperationInProgress
	})
	var lists [2]seqmerge.List[operations.Operation]
	err := s.readOps(ctx, o, func(r Reader, prefix []byte, meta layout.Meta) error {
		if counts != nil {
			*counts = operations.OperationCounts{} // a read tried again counts again
		}
		// A list that gets an operation gets room for every operation the run has, up
		// to a bound, which saves the copies of growing it one doubling at a time.
		room := int(min(max(meta.Next, 1)-1, 1024))
		for i, suffix := range []byte{layout.OpsUnfinished, layout.OpsFinished} {
			if i == 1 && onlyUnfinished {
				break
			}
			lists[i] = seqmerge.List[operations.Operation]{}
			start := layout.OpsKey(prefix, suffix)
			err := r.Scan(ctx, start, end(start), func(k, v []byte, _ Version) error {
				if len(k) != len(start)+8 {
					return fmt.Errorf("operation record key %q: %w", k, operations.ErrCorrupt)
				}
				c, err := record.OperationCode(v)
				if err == nil {
					if counts != nil {
						counts.Add(record.CodePhases[c])
					}
					if !f.Match(operations.Operation{Status: operations.Status{Phase: record.CodePhases[c]}}) {
						return nil // not selected: skip it without decoding
					}
				}
				op, err := record.DecodeOperation(o, v)
				if err != nil {
					return fmt.Errorf("operation record %x: %w", k[len(start):], err)
				}
				if lists[i].Items == nil {
					lists[i] = seqmerge.List[operations.Operation]{Items: make([]operations.Operation, 0, room), Seqs: make([]uint64, 0, room)}
				}
				lists[i].Add(binary.BigEndian.Uint64(k[len(start):]), op)
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// Merge the two lists, each in sequence order, into first-put order.
	return seqmerge.Merge(lists[0], lists[1]), nil
}
