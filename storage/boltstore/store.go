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
// reads run in parallel, writes one at a time, each in its own transaction. Get one from
// [Open] and release it with [Store.Close]; the zero Store holds no file, and its methods
// fail with [ErrClosed].
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
		waited := "after one attempt"
		if opts.Timeout > 0 {
			waited = "after waiting " + opts.Timeout.String()
		}
		return nil, fmt.Errorf("boltstore: open %s: %w (gave up %s)", path, ErrLocked, waited)
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
	s.closeOnce.Do(func() {
		if s.db != nil {
			s.closeErr = s.db.Close()
		}
	})
	return s.closeErr
}

// view runs fn in a read-only transaction, after checking ctx.
func (s *Store) view(ctx context.Context, fn func(*bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.db == nil {
		return ErrClosed
	}
	return txError(s.db.View(fn))
}

// update runs fn in a read-write transaction, after checking ctx before and after waiting
// for the write lock. When fn fails nothing is written.
func (s *Store) update(ctx context.Context, fn func(*bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.db == nil {
		return ErrClosed
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
		prefix = kindPrefix(f.Kind)
	}
	var out []operations.Run
	err := s.view(ctx, func(tx *bolt.Tx) error {
		if f.Kind != "" && prefix == nil {
			return nil // no run has that kind
		}
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
