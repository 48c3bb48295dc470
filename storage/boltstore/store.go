package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// A Store is an [operations.Store] kept in one bbolt file. It is safe for concurrent use:
// reads run in parallel, writes one at a time, each in its own transaction. Its zero value
// is not usable; get one from [Open] and release it with [Store.Close].
type Store struct {
	db *bolt.DB

	closeOnce sync.Once
	closeErr  error
}

var _ operations.Store = (*Store)(nil)

// checkEvery is how many records a long loop handles between two checks of its context.
const checkEvery = 1024

// Open opens the store in the file at path, creating the file (with [Options.Mode]) and its
// buckets when it does not exist or is empty. A nil o means the defaults of [Options].
//
// Open fails with an error wrapping [ErrLocked] when another Store holds the file for
// longer than [Options.Timeout], [ErrNotStore] when the file is not an itemops store, and
// [ErrSchemaVersion] when its schema version is not the one this package reads; in those
// cases the file is left as it was. Other errors come from the file system.
func Open(path string, o *Options) (*Store, error) {
	opts := o.withDefaults()
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		if err := create(path, opts); err != nil {
			return nil, fmt.Errorf("boltstore: create %s: %w", path, err)
		}
	}
	db, err := openDB(path, opts)
	switch {
	case err == nil:
	case errors.Is(err, berrors.ErrTimeout):
		return nil, fmt.Errorf("boltstore: open %s: %w (gave up after %v)", path, ErrLocked, opts.Timeout)
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrVersionMismatch):
		return nil, fmt.Errorf("boltstore: open %s: %w: %w", path, ErrNotStore, err)
	case errors.Is(err, berrors.ErrChecksum):
		return nil, fmt.Errorf("boltstore: open %s: %w: %w", path, ErrCorrupt, err)
	default:
		return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	if err := prepare(db); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	return &Store{db: db}, nil
}

func openDB(path string, opts Options) (*bolt.DB, error) {
	return bolt.Open(path, opts.Mode, &bolt.Options{
		Timeout:      opts.Timeout,
		NoSync:       opts.NoSync,
		OpenFile:     opts.OpenFile,
		FreelistType: bolt.FreelistMapType,
	})
}

// create makes a new store at path without ever showing a half-written file there: it
// builds the store in a temporary file beside path, then links it into place. A process
// killed meanwhile leaves no file at path (and perhaps a stray ".<name>.new-*" file). When
// another process created path first, create leaves that one alone. Where the file system
// cannot link, the store is created in place.
func create(path string, opts Options) error {
	dir, base := filepath.Split(path)
	tmp := filepath.Join(dir, "."+base+".new-"+strconv.FormatUint(rand.Uint64(), 36))
	db, err := openDB(tmp, opts)
	if err != nil {
		return err
	}
	err = prepare(db)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Link(tmp, path)
	}
	if rerr := os.Remove(tmp); err == nil && !errors.Is(rerr, fs.ErrNotExist) {
		err = rerr
	}
	switch {
	case err == nil:
		return syncDir(dir)
	case errors.Is(err, fs.ErrExist):
		return nil
	case errors.As(err, new(*os.LinkError)):
		return nil // Open creates the store in place
	}
	return err
}

// syncDir makes a new directory entry in dir durable.
func syncDir(dir string) error {
	if dir == "" {
		dir = "."
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// prepare checks the schema of an opened file, and creates it in a file that holds nothing.
func prepare(db *bolt.DB) error {
	fresh := false
	err := db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			if k, _ := tx.Cursor().First(); k != nil {
				return fmt.Errorf("%w: the file holds bucket %q and no itemops metadata", ErrNotStore, k)
			}
			fresh = true
			return nil
		}
		if f := meta.Get(keyFormat); string(f) != formatName {
			return fmt.Errorf("%w: format %q, want %q", ErrNotStore, f, formatName)
		}
		v := meta.Get(keyVersion)
		if len(v) != 8 {
			return fmt.Errorf("schema version of %d bytes: %w", len(v), ErrCorrupt)
		}
		if n := binary.BigEndian.Uint64(v); n != schemaVersion {
			return fmt.Errorf("%w: the file has schema version %d, this build reads version %d", ErrSchemaVersion, n, schemaVersion)
		}
		for _, name := range [][]byte{bucketRuns, bucketRunPhases, bucketOps} {
			if tx.Bucket(name) == nil {
				return fmt.Errorf("bucket %q is missing: %w", name, ErrCorrupt)
			}
		}
		return nil
	})
	if err != nil || !fresh {
		return err
	}
	return db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucket(bucketMeta)
		if err != nil {
			return err
		}
		if err := meta.Put(keyFormat, []byte(formatName)); err != nil {
			return err
		}
		var v [8]byte
		binary.BigEndian.PutUint64(v[:], schemaVersion)
		if err := meta.Put(keyVersion, v[:]); err != nil {
			return err
		}
		for _, name := range [][]byte{bucketRuns, bucketRunPhases, bucketOps} {
			if _, err := tx.CreateBucket(name); err != nil {
				return err
			}
		}
		return nil
	})
}

// Close waits for the transactions in progress to end, then releases the file and its
// lock. Only the first call does anything; later calls return nil. After Close every
// method fails with [ErrClosed].
func (s *Store) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.db.Close() })
	return s.closeErr
}

// view runs fn in a read-only transaction, after checking ctx.
func (s *Store) view(ctx context.Context, fn func(*bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return txError(s.db.View(fn))
}

// update runs fn in a read-write transaction, after checking ctx before and after waiting
// for the write lock. When fn fails nothing is written.
func (s *Store) update(ctx context.Context, fn func(*bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return txError(s.db.Update(func(tx *bolt.Tx) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return fn(tx)
	}))
}

func txError(err error) error {
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return ErrClosed
	}
	return err
}

// lookupKey returns the run key of o, or false when o cannot have a run.
func lookupKey(o operations.Owner) ([]byte, bool) {
	if o.Validate() != nil || len(o.Name) > maxNameLen {
		return nil, false
	}
	return runKey(o), true
}

// CreateRun stores a new run. It fails with an error wrapping [operations.ErrExists] when
// the owner has a run, and with the error of [operations.Run.Validate] (or
// [operations.ErrInvalid] for a name longer than 16 KiB) when r cannot be stored. Nothing
// is written when it fails or ctx is done first.
func (s *Store) CreateRun(ctx context.Context, r operations.Run) error {
	if err := r.Validate(); err != nil {
		return fmt.Errorf("create run: %w", err)
	}
	if err := checkOwnerKey(r.Owner); err != nil {
		return fmt.Errorf("create run: %w", err)
	}
	rk := runKey(r.Owner)
	val := appendRun(nil, &r)
	err := s.update(ctx, func(tx *bolt.Tx) error {
		runs := tx.Bucket(bucketRuns)
		if runs.Get(rk) != nil {
			return operations.ErrExists
		}
		if err := runs.Put(rk, val); err != nil {
			return err
		}
		return tx.Bucket(bucketRunPhases).Put(phaseKey(r.Phase, rk), nil)
	})
	if err != nil {
		return fmt.Errorf("create run %s: %w", r.Owner, err)
	}
	return nil
}

// getRun reads and decodes the run under rk, or fails with ErrNotFound.
func getRun(tx *bolt.Tx, o operations.Owner, rk []byte) (operations.Run, error) {
	v := tx.Bucket(bucketRuns).Get(rk)
	if v == nil {
		return operations.Run{}, operations.ErrNotFound
	}
	return decodeRun(o, v)
}

// GetRun returns the run of o, or fails with an error wrapping [operations.ErrNotFound]
// (also when o could not have a run, such as an empty name) or [ErrCorrupt]. When ctx is
// done first it returns ctx.Err().
func (s *Store) GetRun(ctx context.Context, o operations.Owner) (operations.Run, error) {
	rk, ok := lookupKey(o)
	if !ok {
		return operations.Run{}, fmt.Errorf("get run %s: %w", o, operations.ErrNotFound)
	}
	var r operations.Run
	err := s.view(ctx, func(tx *bolt.Tx) (err error) {
		r, err = getRun(tx, ownerKey(o), rk)
		return err
	})
	if err != nil {
		return operations.Run{}, fmt.Errorf("get run %s: %w", o, err)
	}
	return r, nil
}

// ownerKey returns o without its UID: the owner a record's key names.
func ownerKey(o operations.Owner) operations.Owner {
	return operations.Owner{Kind: o.Kind, Name: o.Name}
}

// UpdateRun applies update to a copy of the run of o and stores the result, in one write
// transaction, so concurrent updates are serialized and none is lost. update is called
// exactly once, while the store's write lock is held: it must not call the Store, and
// other writers wait until it returns.
//
// UpdateRun fails with an error wrapping [operations.ErrNotFound] when o has no run, with
// update's own error, or with the error of [operations.ValidateRunUpdate]; then nothing is
// written. When ctx is done before the transaction starts it returns ctx.Err(). The
// returned run shares no memory with what update was given.
func (s *Store) UpdateRun(ctx context.Context, o operations.Owner, update func(*operations.Run) error) (operations.Run, error) {
	rk, ok := lookupKey(o)
	if !ok {
		return operations.Run{}, fmt.Errorf("update run %s: %w", o, operations.ErrNotFound)
	}
	var result operations.Run
	refused := false // the error is update's own or the validator's, returned as it is
	err := s.update(ctx, func(tx *bolt.Tx) error {
		before, err := getRun(tx, ownerKey(o), rk)
		if err != nil {
			return err
		}
		after := before.Clone()
		if err := update(&after); err != nil {
			refused = true
			return err
		}
		if err := operations.ValidateRunUpdate(before, after); err != nil {
			refused = true
			return err
		}
		if err := tx.Bucket(bucketRuns).Put(rk, appendRun(nil, &after)); err != nil {
			return err
		}
		if after.Phase != before.Phase {
			idx := tx.Bucket(bucketRunPhases)
			if err := idx.Delete(phaseKey(before.Phase, rk)); err != nil {
				return err
			}
			if err := idx.Put(phaseKey(after.Phase, rk), nil); err != nil {
				return err
			}
		}
		result = after.Clone()
		return nil
	})
	switch {
	case err == nil:
		return result, nil
	case refused:
		return operations.Run{}, err
	}
	return operations.Run{}, fmt.Errorf("update run %s: %w", o, err)
}

// ListRuns returns the runs f selects, Backups first, then by name. With phases in f it
// reads only the phase index entries of those phases and the runs they name, so its cost
// follows the runs it returns, not the runs stored. It fails with an error wrapping
// [ErrCorrupt] when a record or index entry is damaged, and returns ctx.Err() when ctx is
// done first or while it reads.
func (s *Store) ListRuns(ctx context.Context, f operations.RunFilter) ([]operations.Run, error) {
	var prefix []byte
	if f.Kind != "" {
		if prefix = kindPrefix(f.Kind); prefix == nil {
			return nil, ctx.Err()
		}
	}
	var out []operations.Run
	err := s.view(ctx, func(tx *bolt.Tx) error {
		runs := tx.Bucket(bucketRuns)
		if len(f.Phases) == 0 {
			c := runs.Cursor()
			for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
				if len(out)%checkEvery == checkEvery-1 {
					if err := ctx.Err(); err != nil {
						return err
					}
				}
				r, err := decodeRunAt(k, v)
				if err != nil {
					return err
				}
				out = append(out, r)
			}
			return nil
		}
		keys, err := indexedRuns(ctx, tx, f.Phases, prefix)
		if err != nil {
			return err
		}
		out = make([]operations.Run, 0, len(keys))
		for i, e := range keys {
			if i%checkEvery == checkEvery-1 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			v := runs.Get(e.key)
			if v == nil {
				return fmt.Errorf("phase index names run %q, which is missing: %w", e.key, ErrCorrupt)
			}
			r, err := decodeRunAt(e.key, v)
			if err != nil {
				return err
			}
			if r.Phase != e.phase {
				return fmt.Errorf("phase index has run %s in phase %s, its record says %s: %w", r.Owner, e.phase, r.Phase, ErrCorrupt)
			}
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	return out, nil
}

// indexEntry is a run key found in the phase index, with the phase it was found under.
type indexEntry struct {
	key   []byte
	phase phase.Phase
}

// indexedRuns returns the keys of the runs in phases, whose keys start with prefix, in key
// order. The keys are copies.
func indexedRuns(ctx context.Context, tx *bolt.Tx, phases []phase.Phase, prefix []byte) ([]indexEntry, error) {
	c := tx.Bucket(bucketRunPhases).Cursor()
	var keys []indexEntry
	seen := make(map[phase.Phase]bool, len(phases))
	for _, p := range phases {
		if seen[p] || bytes.IndexByte([]byte(p), 0) >= 0 {
			continue
		}
		seen[p] = true
		pfx := phaseKey(p, prefix)
		for k, _ := c.Seek(pfx); k != nil && bytes.HasPrefix(k, pfx); k, _ = c.Next() {
			if len(keys)%checkEvery == checkEvery-1 {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
			}
			keys = append(keys, indexEntry{key: bytes.Clone(k[len(p)+1:]), phase: p})
		}
	}
	if len(seen) > 1 {
		slices.SortFunc(keys, func(a, b indexEntry) int { return bytes.Compare(a.key, b.key) })
	}
	return keys, nil
}

func decodeRunAt(k, v []byte) (operations.Run, error) {
	o, err := ownerOf(k)
	if err != nil {
		return operations.Run{}, err
	}
	r, err := decodeRun(o, v)
	if err != nil {
		return operations.Run{}, fmt.Errorf("run %s: %w", o, err)
	}
	return r, nil
}

// DeleteRun deletes the run of o and all its operations in one transaction, or fails with
// an error wrapping [operations.ErrNotFound]. When ctx is done first it returns ctx.Err()
// and deletes nothing.
func (s *Store) DeleteRun(ctx context.Context, o operations.Owner) error {
	rk, ok := lookupKey(o)
	if !ok {
		return fmt.Errorf("delete run %s: %w", o, operations.ErrNotFound)
	}
	err := s.update(ctx, func(tx *bolt.Tx) error {
		r, err := getRun(tx, ownerKey(o), rk)
		if err != nil {
			return err
		}
		if err := tx.Bucket(bucketRuns).Delete(rk); err != nil {
			return err
		}
		if err := tx.Bucket(bucketRunPhases).Delete(phaseKey(r.Phase, rk)); err != nil {
			return err
		}
		ops := tx.Bucket(bucketOps)
		if ops.Bucket(rk) == nil {
			return nil
		}
		return ops.DeleteBucket(rk)
	})
	if err != nil {
		return fmt.Errorf("delete run %s: %w", o, err)
	}
	return nil
}

// runOps is the operations bucket of one run and the buckets inside it.
type runOps struct {
	records, ids, unfinished *bolt.Bucket
}

// openRunOps returns the operations buckets of the run under rk; ok is false when the run
// has never had an operation.
func openRunOps(tx *bolt.Tx, rk []byte) (b runOps, ok bool, err error) {
	rb := tx.Bucket(bucketOps).Bucket(rk)
	if rb == nil {
		return runOps{}, false, nil
	}
	b = runOps{records: rb.Bucket(bucketRecords), ids: rb.Bucket(bucketIDs), unfinished: rb.Bucket(bucketUnfinished)}
	if b.records == nil || b.ids == nil || b.unfinished == nil {
		return runOps{}, false, fmt.Errorf("operations bucket of run %q is incomplete: %w", rk, ErrCorrupt)
	}
	return b, true, nil
}

// createRunOps returns the operations buckets of the run under rk, creating them.
func createRunOps(tx *bolt.Tx, rk []byte) (runOps, error) {
	rb, err := tx.Bucket(bucketOps).CreateBucketIfNotExists(rk)
	if err != nil {
		return runOps{}, err
	}
	var b runOps
	for _, x := range []struct {
		dst  **bolt.Bucket
		name []byte
	}{{&b.records, bucketRecords}, {&b.ids, bucketIDs}, {&b.unfinished, bucketUnfinished}} {
		if *x.dst, err = rb.CreateBucketIfNotExists(x.name); err != nil {
			return runOps{}, err
		}
	}
	return b, nil
}

// seqOf decodes a value of the ids bucket.
func seqOf(id string, v []byte) (uint64, error) {
	if len(v) != 8 {
		return 0, fmt.Errorf("operation %q: sequence of %d bytes: %w", id, len(v), ErrCorrupt)
	}
	return binary.BigEndian.Uint64(v), nil
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
	// First pass: read what is stored and validate every replacement.
	slots := make([]slot, len(ops))
	for i := range ops {
		if i%checkEvery == checkEvery-1 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		op := &ops[i]
		v := b.ids.Get([]byte(op.ID))
		if v == nil {
			continue
		}
		seq, err := seqOf(op.ID, v)
		if err != nil {
			return err
		}
		k := seqKey(seq)
		old, err := recordCode(b.records.Get(k[:]))
		if err != nil {
			return fmt.Errorf("operation %q: %w", op.ID, err)
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
		if sl.old == 0 {
			if sl.seq, err = b.records.NextSequence(); err != nil {
				return err
			}
			start := len(arena)
			arena = binary.BigEndian.AppendUint64(arena, sl.seq)
			if err := b.ids.Put([]byte(op.ID), arena[start:len(arena):len(arena)]); err != nil {
				return err
			}
		}
		k := seqKey(sl.seq)
		start := len(arena)
		arena = appendOperation(arena, op)
		if err := b.records.Put(k[:], arena[start:len(arena):len(arena)]); err != nil {
			return err
		}
		code := phaseCode(op.Status.Phase)
		switch {
		case code == sl.old:
		case unfinishedCode(code):
			err = b.unfinished.Put(k[:], codeValue(code))
		case unfinishedCode(sl.old):
			err = b.unfinished.Delete(k[:])
		}
		if err != nil {
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
		seq, err := seqOf(id, v)
		if err != nil {
			return err
		}
		k := seqKey(seq)
		rec := b.records.Get(k[:])
		if rec == nil {
			return fmt.Errorf("ID index names sequence %d, which is missing: %w", seq, ErrCorrupt)
		}
		op, err = decodeOperation(ownerKey(o), rec)
		return err
	})
	if err != nil {
		return operations.Operation{}, fmt.Errorf("get operation %q of %s: %w", id, o, err)
	}
	return op, nil
}

// ListOperations returns the operations of o that f selects, in the order their IDs were
// first put. When f names only unfinished phases (New, InProgress) it reads the run's
// index of unfinished operations, so its cost follows what it returns rather than the
// run's finished operations; any other filter reads every operation of the run.
//
// It fails with an error wrapping [operations.ErrNotFound] when o has no run, or
// [ErrCorrupt] when a record or index entry is damaged, and returns ctx.Err() when ctx is
// done first or while it reads.
func (s *Store) ListOperations(ctx context.Context, o operations.Owner, f operations.OperationFilter) ([]operations.Operation, error) {
	rk, ok := lookupKey(o)
	if !ok {
		return nil, fmt.Errorf("list operations of %s: run %w", o, operations.ErrNotFound)
	}
	var want [len(codePhases)]bool
	for _, p := range f.Phases {
		want[phaseCode(p)] = true
	}
	all := len(f.Phases) == 0
	indexed := !all && !want[codeCompleted] && !want[codeFailed]
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
		n := 0
		tick := func() error {
			n++
			if n%checkEvery == 0 {
				return ctx.Err()
			}
			return nil
		}
		if indexed {
			if !want[codeNew] && !want[codeInProgress] {
				return nil
			}
			c := b.unfinished.Cursor()
			for k, v := c.First(); k != nil; k, v = c.Next() {
				if err := tick(); err != nil {
					return err
				}
				if len(v) != 1 || !unfinishedCode(v[0]) {
					return fmt.Errorf("unfinished index entry %x has value %x: %w", k, v, ErrCorrupt)
				}
				if !want[v[0]] {
					continue
				}
				rec := b.records.Get(k)
				if rec == nil {
					return fmt.Errorf("unfinished index names sequence %x, which is missing: %w", k, ErrCorrupt)
				}
				op, err := decodeOperation(owner, rec)
				if err != nil {
					return fmt.Errorf("sequence %x: %w", k, err)
				}
				if phaseCode(op.Status.Phase) != v[0] {
					return fmt.Errorf("unfinished index has operation %q as %s, its record says %s: %w", op.ID, codePhases[v[0]], op.Status.Phase, ErrCorrupt)
				}
				out = append(out, op)
			}
			return nil
		}
		c := b.records.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if err := tick(); err != nil {
				return err
			}
			code, err := recordCode(v)
			if err != nil {
				return fmt.Errorf("sequence %x: %w", k, err)
			}
			if !all && !want[code] {
				continue
			}
			op, err := decodeOperation(owner, v)
			if err != nil {
				return fmt.Errorf("sequence %x: %w", k, err)
			}
			out = append(out, op)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list operations of %s: %w", o, err)
	}
	return out, nil
}
