package boltstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/storage/kv"
)

// A Store is an [operations.Store] kept in one bbolt file: the storage engine of
// storage/kv over a bbolt driver. It is safe for concurrent use: reads run in parallel,
// writes one at a time, each in its own transaction. Get one from [Open] and release it
// with [Store.Close]; the zero Store is not usable.
type Store struct {
	*kv.Store
	db   *bolt.DB
	path string

	// readOnly is Options.ReadOnly. copyPath, when not empty, is the migrated copy of a
	// schema-1 file that db reads in its place; Close removes it.
	readOnly bool
	copyPath string

	// damage holds the first damage of the file that a transaction met; from then on
	// the Store writes nothing.
	damage atomic.Pointer[error]

	// commitMu is held by every commit, and by Check while it reads the meta pages.
	commitMu sync.Mutex

	closeOnce sync.Once
	closeErr  error
}

var (
	_ operations.Store      = (*Store)(nil)
	_ operations.RunStarter = (*Store)(nil)
)

// damagedFiles maps the absolute path of each file that bbolt panicked on while opening
// it, in this process, to the error Open returned.
var damagedFiles sync.Map

// Open opens the store in the file at path, creating the file (with [Options.Mode]) and its
// buckets when it does not exist or is empty (an empty file only without
// [Options.NoInit]). A nil o means the defaults of [Options].
//
// Open fails with an error wrapping [ErrLocked] when another Store holds the file for
// longer than [Options.Timeout], [ErrNotStore] when the file is not an itemops store, and
// [ErrSchemaVersion] when its schema version is not the one this package reads; in those
// cases the file is left as it was. Other errors come from the file system. With
// [Options.ReadOnly] set, Open writes nothing at all (see there).
func Open(path string, o *Options) (*Store, error) {
	opts := o.withDefaults()
	if info, err := os.Stat(path); err == nil && info.Size() == 0 && (opts.ReadOnly || opts.NoInit) {
		return nil, fmt.Errorf("boltstore: open %s: %w: the file is empty, and an Open with ReadOnly or NoInit does not make it a store", path, ErrNotStore)
	}
	if _, err := os.Lstat(path); !opts.ReadOnly && errors.Is(err, fs.ErrNotExist) {
		if err := create(path, opts); err != nil {
			return nil, fmt.Errorf("boltstore: create %s: %w", path, err)
		}
	}
	if err := checkLength(path); err != nil {
		return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	s := &Store{path: path, readOnly: opts.ReadOnly}
	var db *bolt.DB
	// bbolt opens the file itself; keep it, to close it (and so release its lock) when
	// bbolt panics on a damaged file before it returns a DB that could be closed.
	var file *os.File
	hook := opts
	hook.OpenFile = func(name string, flag int, perm os.FileMode) (*os.File, error) {
		f, err := opts.OpenFile(name, flag, perm)
		file = f
		return f, err
	}
	err := s.guard("open", func() (err error) {
		db, err = openDB(path, hook)
		return err
	})
	abs, _ := filepath.Abs(path)
	if db == nil && errors.Is(err, ErrCorrupt) {
		if file != nil {
			_ = file.Close()
		}
		// bbolt's memory map of the file outlives the panic, and keeps the file's
		// lock with it: later Opens in this process would only see ErrLocked.
		damagedFiles.Store(abs, err)
	}
	switch {
	case err == nil:
	case errors.Is(err, berrors.ErrTimeout):
		if damage, ok := damagedFiles.Load(abs); ok {
			return nil, fmt.Errorf("%w (an earlier Open in this process found it damaged and still holds its lock)", damage.(error))
		}
		waited := "after one attempt"
		if opts.Timeout > 0 {
			waited = "after waiting " + opts.Timeout.String()
		}
		return nil, fmt.Errorf("boltstore: open %s: %w (gave up %s)", path, ErrLocked, waited)
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrVersionMismatch):
		return nil, fmt.Errorf("boltstore: open %s: %w: %w", path, ErrNotStore, err)
	case errors.Is(err, berrors.ErrChecksum):
		return nil, fmt.Errorf("boltstore: open %s: %w: %w", path, ErrCorrupt, err)
	case errors.Is(err, ErrCorrupt):
		return nil, err
	default:
		return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	s.db = db
	// The check comes first, so that a damaged file fails before a migration reads it.
	if !opts.SkipCheck {
		if err := s.Check(context.Background()); err != nil {
			_ = s.Close()
			return nil, err
		}
	}
	err = s.guard("open", func() error {
		if opts.ReadOnly {
			return s.prepareReadOnly(opts)
		}
		if opts.NoInit {
			if version, err := schemaOf(db); err == nil && version == 0 {
				return fmt.Errorf("%w: a bbolt file without buckets, which an Open with NoInit does not make a store", ErrNotStore)
			}
		}
		return prepare(db)
	})
	if (errors.Is(err, ErrNotStore) || errors.Is(err, ErrCorrupt)) && opts.SkipCheck {
		// A store whose root page or meta bucket is damaged may look like another
		// file, or lack a bucket: the check tells, and its finding is the better
		// error.
		if cerr := s.Check(context.Background()); errors.Is(cerr, ErrCorrupt) {
			err = cerr
		}
	}
	if err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	eng, err := kv.Open(context.Background(), driver{s})
	if err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	s.Store = eng
	return s, nil
}

// checkLength fails with an error wrapping [ErrCorrupt] when the file at path is
// shorter than the pages its newest sound meta page counts: bbolt would read the pages
// past its end through its memory map, which faults. A file that does not exist, is
// empty or has no sound meta page is left to bbolt.
func checkLength(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil || info.Size() == 0 {
		return nil
	}
	best, pageSize, ok := newestMeta(f, info.Size())
	if !ok {
		return nil
	}
	if need := best.hwm * pageSize; uint64(info.Size()) < need {
		return fmt.Errorf("the file is damaged (cut short: it holds %d bytes, and its meta page of transaction %d counts %d pages of %d bytes, %d bytes): %w",
			info.Size(), best.txid, best.hwm, pageSize, need, ErrCorrupt)
	}
	return nil
}

func openDB(path string, opts Options) (*bolt.DB, error) {
	return bolt.Open(path, opts.Mode, &bolt.Options{
		Timeout:      opts.Timeout,
		NoSync:       opts.NoSync,
		ReadOnly:     opts.ReadOnly,
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

// prepareReadOnly checks the schema of the file s.db holds, for a read-only Store, which
// must not write it: a file of an earlier schema is read through a migrated copy, and a file that
// is not yet a store is refused. (A writable Store runs prepare instead.)
func (s *Store) prepareReadOnly(opts Options) error {
	version, err := schemaOf(s.db)
	switch {
	case err != nil || version == schemaVersion:
		return err
	case version == 0:
		return fmt.Errorf("%w: a bbolt file without buckets, which only a writable Open makes a store", ErrNotStore)
	}
	cp, err := migratedCopy(s.db, opts)
	if err != nil {
		return fmt.Errorf("read schema %d through a migrated copy: %w", version, err)
	}
	if err := s.db.Close(); err != nil {
		_ = cp.Close()
		_ = os.Remove(cp.Path())
		return err
	}
	s.db, s.copyPath = cp, cp.Path()
	return nil
}

// schemaOf returns the schema version of the store in db: 0 for a bbolt file without
// buckets, which is not a store yet.
func schemaOf(db *bolt.DB) (uint64, error) {
	var version uint64
	err := db.View(func(tx *bolt.Tx) error {
		// A file that holds a kv bucket may be a store whose meta bucket is damaged.
		var maybe string
		if tx.Bucket(bucketKV) != nil {
			maybe = " (or a store whose meta bucket is damaged: it holds a kv bucket as stores do)"
		}
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			if k, _ := tx.Cursor().First(); k != nil {
				return fmt.Errorf("%w: the file holds bucket %q and no itemops metadata%s", ErrNotStore, k, maybe)
			}
			return nil
		}
		if f := meta.Get(keyFormat); string(f) != formatName {
			return fmt.Errorf("%w: format %q, want %q%s", ErrNotStore, f, formatName, maybe)
		}
		v := meta.Get(keyVersion)
		if len(v) != 8 {
			return fmt.Errorf("schema version of %d bytes: %w", len(v), ErrCorrupt)
		}
		version = binary.BigEndian.Uint64(v)
		if version < 1 || version > schemaVersion {
			return fmt.Errorf("%w: the file has schema version %d, this build reads versions 1 to %d", ErrSchemaVersion, version, schemaVersion)
		}
		if version >= 2 && tx.Bucket(bucketKV) == nil {
			return fmt.Errorf("bucket %q is missing: %w", bucketKV, ErrCorrupt)
		}
		return nil
	})
	return version, err
}

// prepare makes the file db holds a store of the current schema, as a writable Open
// does: it creates the store in a file that holds nothing, and migrates a file of
// schema 1 or 2 (see upgrade).
func prepare(db *bolt.DB) error {
	version, err := schemaOf(db)
	if err != nil || version == schemaVersion {
		return err
	}
	return upgrade(db, version)
}

// upgrade brings a file of schema version (0 for a file that holds nothing) to the
// current schema in one transaction, so that a process killed meanwhile leaves the file
// as it was. The engine's format key is written in the same transaction.
func upgrade(db *bolt.DB, version uint64) error {
	return db.Update(func(tx *bolt.Tx) error {
		switch version {
		case 1:
			if err := migrate1(tx); err != nil {
				return fmt.Errorf("migrate schema 1: %w", err)
			}
		case 2:
			if err := migrate2(tx); err != nil {
				return fmt.Errorf("migrate schema 2: %w", err)
			}
		}
		meta, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		if err := meta.Put(keyFormat, []byte(formatName)); err != nil {
			return err
		}
		if err := meta.Put(keyVersion, binary.BigEndian.AppendUint64(nil, schemaVersion)); err != nil {
			return err
		}
		b, err := tx.CreateBucketIfNotExists(bucketKV)
		if err != nil {
			return err
		}
		if _, err = kv.Open(context.Background(), txBackend{tx}); err != nil {
			return err
		}
		return meta.Put(keySequence, binary.BigEndian.AppendUint64(nil, b.Sequence()))
	})
}

// migratedCopy copies the file db holds, a store of schema 1 or 2, to a temporary file,
// migrates the copy and returns it opened read-only, for a read-only Store. The caller
// closes it and removes its file; on failure nothing is left behind.
func migratedCopy(db *bolt.DB, opts Options) (cp *bolt.DB, err error) {
	f, err := os.CreateTemp("", "itemops-boltstore-*.db")
	if err != nil {
		return nil, err
	}
	name := f.Name()
	done := false
	defer func() { // also when the migration panics on a damaged page
		if !done {
			if cp != nil {
				_ = cp.Close()
			}
			_ = os.Remove(name)
		}
	}()
	err = db.View(func(tx *bolt.Tx) error {
		_, err := tx.WriteTo(f)
		return err
	})
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		// The file ends before the pages its meta page counts.
		err = fmt.Errorf("copy: the file is shorter than its pages (%v): %w", err, ErrCorrupt)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	copyOpts := Options{Timeout: opts.Timeout, Mode: DefaultMode, NoSync: true, OpenFile: os.OpenFile}
	if cp, err = openDB(name, copyOpts); err != nil {
		return nil, err
	}
	err = prepare(cp)
	if cerr := cp.Close(); err == nil {
		err = cerr
	}
	cp = nil
	if err != nil {
		return nil, err
	}
	copyOpts.ReadOnly = true
	if cp, err = openDB(name, copyOpts); err != nil {
		return nil, err
	}
	done = true
	return cp, nil
}

// Close waits for the transactions in progress to end, then releases the file and its
// lock, and removes the migrated copy a read-only Store may read (see
// [Options.ReadOnly]). Only the first call does anything; later calls return its result.
// After Close every method fails with [ErrClosed].
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		if s.db != nil {
			s.closeErr = s.db.Close()
		}
		if s.copyPath != "" {
			if err := os.Remove(s.copyPath); s.closeErr == nil {
				s.closeErr = err
			}
		}
	})
	return s.closeErr
}
