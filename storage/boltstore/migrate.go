package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/itemops/itemops/internal/seqmerge"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/internal/record"
	"github.com/itemops/itemops/storage/kv"
)

// migrate1 rewrites a file of schema 1 in the engine's layout (schema 3), inside tx. Schema 1 kept
// run records under runs/<kind byte><name> and each run's operation records under
// operations/<run key>/{unfinished,finished}/<8-byte sequence number>, in the record
// encoding the engine still uses (storage/internal/record decodes them); the engine
// writes them again, in first-put order, through a kv.Backend over tx, and the old
// buckets are deleted.
func migrate1(tx *bolt.Tx) error {
	if _, err := tx.CreateBucket(bucketKV); err != nil {
		return err
	}
	ctx := context.Background()
	eng, err := kv.Open(ctx, txBackend{tx})
	if err != nil {
		return err
	}
	runs, opsBuckets := tx.Bucket([]byte("runs")), tx.Bucket([]byte("operations"))
	if runs == nil || opsBuckets == nil {
		return fmt.Errorf("schema 1 buckets are missing: %w", ErrCorrupt)
	}
	err = runs.ForEach(func(k, v []byte) error {
		o, err := schema1Owner(k)
		if err != nil {
			return err
		}
		run, err := record.DecodeRun(o, v)
		if err != nil {
			return fmt.Errorf("run %s: %w", o, err)
		}
		var ops []operations.Operation
		if rb := opsBuckets.Bucket(k); rb != nil {
			if ops, err = schema1Operations(o, rb); err != nil {
				return fmt.Errorf("operations of %s: %w", o, err)
			}
		}
		// The writes stay in tx until it commits, so an error here comes from the
		// records themselves: records that decode but do not make a valid run.
		err = eng.CreateRunWithOperations(ctx, run, ops)
		if err != nil && !errors.Is(err, ErrCorrupt) {
			err = fmt.Errorf("run %s: %w: %w", o, ErrCorrupt, err)
		}
		return err
	})
	if err != nil {
		return err
	}
	for _, name := range []string{"runs", "run-phases", "operations"} {
		if err := tx.DeleteBucket([]byte(name)); err != nil {
			return fmt.Errorf("delete bucket %s: %w", name, err)
		}
	}
	return nil
}

// migrate2 gives every entry of a file of schema 2, whose kv bucket holds the same keys
// and values without their checksums, its checksum, inside tx. It rewrites the entries
// 1024 at a time, in key order: bbolt's cursors do not survive a Put.
func migrate2(tx *bolt.Tx) error {
	b := tx.Bucket(bucketKV)
	if b == nil {
		return fmt.Errorf("bucket %q is missing: %w", bucketKV, ErrCorrupt)
	}
	var (
		after []byte // the smallest key not yet rewritten; nil before the first
		keys  [][]byte
		vals  [][]byte
	)
	for {
		keys, vals = keys[:0], vals[:0]
		c := b.Cursor()
		k, v := c.First()
		if after != nil {
			k, v = c.Seek(after)
		}
		for ; k != nil && len(keys) < checkEvery; k, v = c.Next() {
			if len(v) < versionSize { // a nested bucket has a nil value
				return fmt.Errorf("key %q holds %d bytes, less than a version, or a bucket: %w", k, len(v), ErrCorrupt)
			}
			keys = append(keys, bytes.Clone(k))
			vals = append(vals, binary.BigEndian.AppendUint32(bytes.Clone(v), entrySum(k, v)))
		}
		for i := range keys {
			if err := b.Put(keys[i], vals[i]); err != nil {
				return err
			}
		}
		if len(keys) < checkEvery {
			return nil
		}
		after = append(bytes.Clone(keys[len(keys)-1]), 0)
	}
}

func schema1Owner(k []byte) (operations.Owner, error) {
	if len(k) >= 2 {
		switch k[0] {
		case 'B':
			return operations.Owner{Kind: phase.Backup, Name: string(k[1:])}, nil
		case 'R':
			return operations.Owner{Kind: phase.Restore, Name: string(k[1:])}, nil
		}
	}
	return operations.Owner{}, fmt.Errorf("schema 1 run key %q: %w", k, ErrCorrupt)
}

// schema1Operations reads a run's operations, merging its unfinished and finished
// buckets, each in sequence order, into first-put order.
func schema1Operations(o operations.Owner, rb *bolt.Bucket) ([]operations.Operation, error) {
	var lists [2]seqmerge.List[operations.Operation]
	for i, name := range []string{"unfinished", "finished"} {
		b := rb.Bucket([]byte(name))
		if b == nil {
			return nil, fmt.Errorf("bucket %s is missing: %w", name, ErrCorrupt)
		}
		err := b.ForEach(func(k, v []byte) error {
			if len(k) != 8 {
				return fmt.Errorf("sequence key %x: %w", k, ErrCorrupt)
			}
			op, err := record.DecodeOperation(o, v)
			lists[i].Add(binary.BigEndian.Uint64(k), op)
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	return seqmerge.Merge(lists[0], lists[1]), nil
}

// txBackend is a kv.Backend over one open write transaction, for migrations: every Read
// and Commit happens in tx, and nothing is durable before tx commits.
type txBackend struct{ tx *bolt.Tx }

func (b txBackend) Read(ctx context.Context, fn func(kv.Reader) error) error {
	return readTx(b.tx, fn)
}

func (b txBackend) Commit(ctx context.Context, conds []kv.Condition, writes []kv.Write) error {
	return commitTx(b.tx, conds, writes)
}

func (txBackend) Limits() kv.Limits { return kv.Limits{} }
