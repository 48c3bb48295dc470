package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/itemops/itemops/operations"
)

// runOps is the operations bucket of one run and the buckets inside it. The bucket's own
// sequence numbers the run's operation IDs in first-put order.
type runOps struct {
	bucket               *bolt.Bucket
	unfinished, finished *bolt.Bucket // records by sequence number, split by phase
	ids                  *bolt.Bucket // ID → sequence number and phase code
}

// records returns the bucket that holds records of phase code c.
func (b runOps) records(c byte) *bolt.Bucket {
	if unfinishedCode(c) {
		return b.unfinished
	}
	return b.finished
}

// openRunOps returns the operations buckets of the run under rk; ok is false when the run
// has never had an operation.
func openRunOps(tx *bolt.Tx, rk []byte) (b runOps, ok bool, err error) {
	rb := tx.Bucket(bucketOps).Bucket(rk)
	if rb == nil {
		return runOps{}, false, nil
	}
	b = runOps{bucket: rb, unfinished: rb.Bucket(bucketUnfinished), finished: rb.Bucket(bucketFinished), ids: rb.Bucket(bucketIDs)}
	if b.unfinished == nil || b.finished == nil || b.ids == nil {
		return runOps{}, false, fmt.Errorf("operations bucket of run %q is incomplete: %w", rk, ErrCorrupt)
	}
	return b, true, nil
}

// createRunOps returns the operations buckets of the run under rk, creating them.
func createRunOps(tx *bolt.Tx, rk []byte) (runOps, error) {
	if b, ok, err := openRunOps(tx, rk); ok || err != nil {
		return b, err
	}
	rb, err := tx.Bucket(bucketOps).CreateBucket(rk)
	if err != nil {
		return runOps{}, err
	}
	b := runOps{bucket: rb}
	for _, x := range []struct {
		dst  **bolt.Bucket
		name []byte
	}{{&b.unfinished, bucketUnfinished}, {&b.finished, bucketFinished}, {&b.ids, bucketIDs}} {
		if *x.dst, err = rb.CreateBucket(x.name); err != nil {
			return runOps{}, err
		}
	}
	return b, nil
}

// appendIDValue appends the value of the ids bucket for an operation with sequence number
// seq and phase code code.
func appendIDValue(b []byte, seq uint64, code byte) []byte {
	return append(binary.BigEndian.AppendUint64(b, seq), code)
}

// parseIDValue decodes a value of the ids bucket of operation id.
func parseIDValue(id string, v []byte) (seq uint64, code byte, err error) {
	if len(v) != 9 || v[8] == 0 || int(v[8]) >= len(codePhases) {
		return 0, 0, fmt.Errorf("operation %q: ID index value %x: %w", id, v, ErrCorrupt)
	}
	return binary.BigEndian.Uint64(v), v[8], nil
}

// A slot is what PutOperations learns of one operation before it writes: its sequence
// number and the phase code it had, or 0 for a new operation.
type slot struct {
	seq uint64
	old byte
}

// PutOperations writes ops, all of o, in one write transaction: every operation or none.
// New IDs are appended in the order of ops; known IDs are replaced where they stand.
//
// It fails, writing nothing, with the error of [operations.ValidateBatch] (wrapping
// [operations.ErrInvalid]; an operation ID longer than 16 KiB is refused the same way),
// with an error wrapping [operations.ErrNotFound] when o has no run, with the error of
// [operations.ValidateOperationUpdate] (wrapping [operations.ErrConflict]) when the batch
// would revive a finished operation, or with ctx.Err() when ctx is done before the
// transaction commits. Validation against the stored operations happens before the first
// write. An empty batch writes nothing and succeeds when the run exists.
func (s *Store) PutOperations(ctx context.Context, o operations.Owner, ops []operations.Operation) error {
	if err := operations.ValidateBatch(o, ops); err != nil {
		return fmt.Errorf("put operations of %s: %w", o, err)
	}
	if err := checkOwnerKey(o); err != nil {
		return fmt.Errorf("put operations: %w", err)
	}
	for i := range ops {
		if len(ops[i].ID) > maxIDLen {
			return fmt.Errorf("put operations of %s: batch item %d: ID of %d bytes exceeds the store's limit of %d: %w", o, i, len(ops[i].ID), maxIDLen, operations.ErrInvalid)
		}
	}
	rk := runKey(o)
	var err error
	if len(ops) == 0 {
		err = s.view(ctx, func(tx *bolt.Tx) error {
			if tx.Bucket(bucketRuns).Get(rk) == nil {
				return fmt.Errorf("run %w", operations.ErrNotFound)
			}
			return nil
		})
	} else {
		err = s.update(ctx, func(tx *bolt.Tx) error { return putOperations(ctx, tx, o, rk, ops) })
	}
	if err != nil {
		return fmt.Errorf("put operations of %s: %w", o, err)
	}
	return nil
}

// putOperations is the transaction of PutOperations, for a batch that passed ValidateBatch.
func putOperations(ctx context.Context, tx *bolt.Tx, o operations.Owner, rk []byte, ops []operations.Operation) error {
	if tx.Bucket(bucketRuns).Get(rk) == nil {
		return fmt.Errorf("run %w", operations.ErrNotFound)
	}
	b, err := createRunOps(tx, rk)
	if err != nil {
		return err
	}
	// First pass: read what is stored and validate every replacement. The ID index holds
	// each operation's sequence number and phase, so no record is read. One cursor and
	// one key buffer serve every lookup.
	slots := make([]slot, len(ops))
	ids := b.ids.Cursor()
	var kb []byte
	for i := range ops {
		if i%checkEvery == checkEvery-1 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		op := &ops[i]
		kb = append(kb[:0], op.ID...)
		k, v := ids.Seek(kb)
		if !bytes.Equal(k, kb) {
			continue
		}
		seq, old, err := parseIDValue(op.ID, v)
		if err != nil {
			return err
		}
		before := operations.Operation{Owner: ownerKey(o), ID: op.ID, Status: operations.Status{Phase: codePhases[old]}}
		if err := operations.ValidateOperationUpdate(before, *op); err != nil {
			return fmt.Errorf("batch item %d: %w", i, err)
		}
		slots[i] = slot{seq: seq, old: old}
	}
	// Second pass: write. bbolt keeps value slices until commit without copying them,
	// so values are carved from one arena that is only ever appended to.
	arena := make([]byte, 0, 160*len(ops))
	for i := range ops {
		if i%checkEvery == checkEvery-1 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		op := &ops[i]
		sl := slots[i]
		code := phaseCode(op.Status.Phase)
		if sl.old == 0 {
			if sl.seq, err = b.bucket.NextSequence(); err != nil {
				return err
			}
		}
		k := seqKey(sl.seq)
		if code != sl.old {
			start := len(arena)
			arena = appendIDValue(arena, sl.seq, code)
			kb = append(kb[:0], op.ID...) // Put copies the key, not the value
			if err := b.ids.Put(kb, arena[start:len(arena):len(arena)]); err != nil {
				return err
			}
			// Validation allows only unfinished → finished across the two buckets.
			if unfinishedCode(sl.old) && !unfinishedCode(code) {
				if err := b.unfinished.Delete(k[:]); err != nil {
					return err
				}
			}
		}
		start := len(arena)
		arena = appendOperation(arena, op)
		if err := b.records(code).Put(k[:], arena[start:len(arena):len(arena)]); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// GetOperation returns the operation id of o, or fails with an error wrapping
// [operations.ErrNotFound] (when o has no run or no such operation) or [ErrCorrupt]. When
// ctx is done first it returns ctx.Err().
func (s *Store) GetOperation(ctx context.Context, o operations.Owner, id string) (operations.Operation, error) {
	rk, ok := lookupKey(o)
	if !ok || id == "" || len(id) > maxIDLen {
		return operations.Operation{}, fmt.Errorf("get operation %q of %s: %w", id, o, operations.ErrNotFound)
	}
	var op operations.Operation
	err := s.view(ctx, func(tx *bolt.Tx) error {
		b, ok, err := openRunOps(tx, rk)
		if err != nil {
			return err
		}
		if !ok {
			return operations.ErrNotFound
		}
		v := b.ids.Get([]byte(id))
		if v == nil {
			return operations.ErrNotFound
		}
		seq, code, err := parseIDValue(id, v)
		if err != nil {
			return err
		}
		k := seqKey(seq)
		rec := b.records(code).Get(k[:])
		if rec == nil {
			return fmt.Errorf("ID index names %s operation %q at sequence %d, which is missing: %w", codePhases[code], id, seq, ErrCorrupt)
		}
		if op, err = decodeOperation(ownerKey(o), rec); err != nil {
			return err
		}
		if op.ID != id || phaseCode(op.Status.Phase) != code {
			return fmt.Errorf("ID index has %q as %s at sequence %d, the record there is %q as %s: %w", id, codePhases[code], seq, op.ID, op.Status.Phase, ErrCorrupt)
		}
		return nil
	})
	if err != nil {
		return operations.Operation{}, fmt.Errorf("get operation %q of %s: %w", id, o, err)
	}
	return op, nil
}

// ListOperations returns the operations of o that f selects, in the order their IDs were
// first put. Unfinished (New, InProgress) and finished operations are kept apart, so when
// f names only unfinished phases the cost follows the run's unfinished operations, not
// its finished ones.
//
// It fails with an error wrapping [operations.ErrNotFound] when o has no run, or
// [ErrCorrupt] when a record is damaged or kept with the wrong phase, and returns
// ctx.Err() when ctx is done first or while it reads.
func (s *Store) ListOperations(ctx context.Context, o operations.Owner, f operations.OperationFilter) ([]operations.Operation, error) {
	rk, ok := lookupKey(o)
	if !ok {
		return nil, fmt.Errorf("list operations of %s: run %w", o, operations.ErrNotFound)
	}
	var want [len(codePhases)]bool
	if len(f.Phases) == 0 {
		want = [len(codePhases)]bool{false, true, true, true, true}
	}
	for _, p := range f.Phases {
		want[phaseCode(p)] = true
	}
	owner := ownerKey(o)
	var out []operations.Operation
	err := s.view(ctx, func(tx *bolt.Tx) error {
		if tx.Bucket(bucketRuns).Get(rk) == nil {
			return fmt.Errorf("run %w", operations.ErrNotFound)
		}
		b, ok, err := openRunOps(tx, rk)
		if err != nil || !ok {
			return err
		}
		// Walk the buckets that can hold what f wants, merging them by sequence number.
		var u, d cursor
		if want[codeNew] || want[codeInProgress] {
			u.init(b.unfinished, true)
		}
		if want[codeCompleted] || want[codeFailed] {
			d.init(b.finished, false)
		}
		for n := 1; u.k != nil || d.k != nil; n++ {
			if n%checkEvery == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			c := &u
			if u.k == nil || (d.k != nil && bytes.Compare(d.k, u.k) < 0) {
				c = &d
			}
			code, err := recordCode(c.v)
			if err == nil && unfinishedCode(code) != c.unfinished {
				err = fmt.Errorf("%s operation kept with the wrong phase: %w", codePhases[code], ErrCorrupt)
			}
			if err != nil {
				return fmt.Errorf("sequence %x: %w", c.k, err)
			}
			if want[code] {
				op, err := decodeOperation(owner, c.v)
				if err != nil {
					return fmt.Errorf("sequence %x: %w", c.k, err)
				}
				out = append(out, op)
			}
			c.next()
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list operations of %s: %w", o, err)
	}
	return out, nil
}

// A cursor walks one records bucket; k is nil once it is done, or when it was never
// started.
type cursor struct {
	c          *bolt.Cursor
	k, v       []byte
	unfinished bool // it walks the unfinished bucket
}

func (c *cursor) init(b *bolt.Bucket, unfinished bool) {
	c.c, c.unfinished = b.Cursor(), unfinished
	c.k, c.v = c.c.First()
}

func (c *cursor) next() { c.k, c.v = c.c.Next() }
