package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"sync"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/itemops/itemops/storage/kv"
)

// The file's buckets and the keys of its meta bucket.
var (
	bucketMeta = []byte("meta")
	bucketKV   = []byte("kv")
	keyFormat  = []byte("format")
	keyVersion = []byte("version")
	// keySequence holds a copy of the kv bucket's sequence (8 bytes, big-endian),
	// written with it by every commit, so that a changed byte of either shows.
	keySequence = []byte("sequence")
)

// formatName is the value of meta/format in every itemops boltstore.
const formatName = "itemops.boltstore"

// schemaVersion is the layout this package writes: 3, the engine's keys in one bucket,
// each entry with its checksum (see sum.go). Files of schema 1 (a bucket per run) and 2
// (the same keys without checksums) are migrated by Open.
const schemaVersion = 3

// checkEvery is how many keys a scan reads between two checks of its context.
const checkEvery = 1024

// driver is the [kv.Backend] of a Store: one bbolt read transaction per Read, one write
// transaction per Commit.
type driver struct{ s *Store }

func (d driver) Read(ctx context.Context, fn func(kv.Reader) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return d.s.guard("read", func() error {
		return d.s.db.View(func(tx *bolt.Tx) error { return readTx(tx, fn) })
	})
}

func (d driver) Commit(ctx context.Context, conds []kv.Condition, writes []kv.Write) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d.s.readOnly {
		return fmt.Errorf("boltstore: write %s: %w", d.s.path, ErrReadOnly)
	}
	if err := d.s.damaged(); err != nil {
		return err
	}
	// A Check reads the meta pages while it holds commitMu, so that no commit rewrites
	// one meanwhile.
	d.s.commitMu.Lock()
	defer d.s.commitMu.Unlock()
	return d.s.guard("write", func() error {
		return d.s.db.Update(func(tx *bolt.Tx) error {
			// Waiting for the write lock cannot be cut short; a context that ended
			// meanwhile still writes nothing.
			if err := ctx.Err(); err != nil {
				return err
			}
			return commitTx(tx, conds, writes)
		})
	})
}

// CommitGroup applies the commits of group in one bbolt transaction, so with one sync;
// see [kv.GroupCommitter]. A commit whose conditions do not hold is left out; any other
// failure fails the transaction, which writes nothing.
func (d driver) CommitGroup(ctx context.Context, group []kv.Commit) ([]error, error) {
	if d.s.readOnly {
		return nil, fmt.Errorf("boltstore: write %s: %w", d.s.path, ErrReadOnly)
	}
	if err := d.s.damaged(); err != nil {
		return nil, err
	}
	errs := make([]error, len(group))
	err := d.s.guard("write", func() error {
		return d.s.db.Update(func(tx *bolt.Tx) error {
			for i, c := range group {
				err := commitTx(tx, c.Conds, c.Writes)
				if errors.Is(err, kv.ErrConditionFailed) {
					errs[i] = err // its conditions come first: it wrote nothing
				} else if err != nil {
					return err
				}
			}
			return nil
		})
	})
	return errs, err
}

func (driver) Limits() kv.Limits { return kv.Limits{} }

func readTx(tx *bolt.Tx, fn func(kv.Reader) error) error {
	b := tx.Bucket(bucketKV)
	if b == nil {
		return fmt.Errorf("bucket %q is missing: %w", bucketKV, ErrCorrupt)
	}
	return fn(newReader(tx, b))
}

// reader reads the kv bucket, whose values are the version they were written at, the
// engine's value and a checksum (see parseValue), which every read checks.
//
// bbolt finds a key by a binary search of each page it passes, and trusts the page's
// keys to be in order. A key or leaf element changed on disk that the search compares
// against can send it anywhere in that leaf page, away from the entry it looks for. A
// search that finds its key is right whatever the other keys are; one that does not is
// checked (see seek) over every entry of the leaf page it ended in, and a scan also
// checks the entry it stops at, so that a changed key or leaf element is ErrCorrupt
// where a read meets it or misses it, never an entry read as absent.
type reader struct {
	b *bolt.Bucket
	// span is the most entries a leaf page of the file holds (see leafSpan).
	span int
}

// newReader returns the reader of the kv bucket b of tx.
func newReader(tx *bolt.Tx, b *bolt.Bucket) reader {
	return reader{b: b, span: leafSpan(tx.DB().Info().PageSize)}
}

// leafSpan is the most entries that a leaf page of pageSize bytes, as bbolt writes it,
// holds in the kv bucket: after the page's header, each entry takes an element header,
// a key of a byte at least and a value of its version and checksum at least. bbolt
// writes a leaf of more than 4 entries only when they fit in one page.
func leafSpan(pageSize int) int {
	return max(4, (pageSize-pageHeaderSize)/(elementSize+1+versionSize+sumSize))
}

func (r reader) Get(ctx context.Context, key []byte) ([]byte, kv.Version, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	k, v, err := r.seek(r.b.Cursor(), key)
	if err != nil || !bytes.Equal(k, key) {
		return nil, 0, err
	}
	return parseValue(k, v)
}

func (r reader) Scan(ctx context.Context, start, end []byte, fn func(key, value []byte, v kv.Version) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c := r.b.Cursor()
	k, v, err := r.seek(c, start)
	if err != nil {
		return err
	}
	if !bytes.Equal(k, start) {
		k, v = c.Seek(start) // seek moved c to check the entries around
	}
	for n := 0; k != nil && (len(end) == 0 || bytes.Compare(k, end) < 0); k, v = c.Next() {
		if n++; n%checkEvery == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		val, ver, err := parseValue(k, v)
		if err != nil {
			return err
		}
		if err := fn(k, val, ver); err != nil {
			return err
		}
	}
	if k != nil {
		// A key changed on disk to one at or past end would have ended the scan early.
		if _, _, err := parseValue(k, v); err != nil {
			return err
		}
	}
	return nil
}

// seek moves c to the first key at or after key and returns its entry, or nils at the
// end of the bucket, as Cursor.Seek does. When that is not key itself, it checks every
// entry of the leaf page that the search ended in: it walks r.span entries from the
// landing point each way, since the page holds no more, checking each against its
// checksum and that the keys ascend. If one fails, seek returns an error wrapping
// [ErrCorrupt]. When the checks pass, the search was right: a binary search of a page
// whose keys are sound and in order finds every key it holds. c is then left on no
// particular entry. In a write transaction, a leaf that the transaction has grown can
// hold more entries than a page until the commit splits it; the walk checks only
// r.span of them each way.
func (r reader) seek(c *bolt.Cursor, key []byte) (k, v []byte, err error) {
	k, v = c.Seek(key)
	if bytes.Equal(k, key) {
		return k, v, nil
	}
	if k != nil {
		if _, _, err := parseValue(k, v); err != nil {
			return nil, nil, err
		}
		prev := k
		for n := 1; n < r.span; n++ {
			nk, nv := c.Next()
			if nk == nil {
				break
			}
			if _, _, err := parseValue(nk, nv); err != nil {
				return nil, nil, err
			}
			if err := inOrder(prev, nk); err != nil {
				return nil, nil, err
			}
			prev = nk
		}
		c.Seek(key)
	}
	// When Seek has moved on to the next page, the entry before is the last of the
	// page before: Prev finds it all the same.
	var pk, pv []byte
	if k == nil {
		pk, pv = c.Last()
	} else {
		pk, pv = c.Prev()
	}
	for n, next := 0, k; n < r.span && pk != nil; n++ {
		if _, _, err := parseValue(pk, pv); err != nil {
			return nil, nil, err
		}
		if next != nil {
			if err := inOrder(pk, next); err != nil {
				return nil, nil, err
			}
		}
		next = pk
		pk, pv = c.Prev()
	}
	return k, v, nil
}

// inOrder fails with an error wrapping [ErrCorrupt] unless key a sorts before key b, as
// neighbouring keys of the kv bucket do.
func inOrder(a, b []byte) error {
	if bytes.Compare(a, b) >= 0 {
		return fmt.Errorf("key %q is followed by key %q in the kv bucket, out of order: %w", a, b, ErrCorrupt)
	}
	return nil
}

// commitTx applies writes in tx if every condition holds, all at one new version.
func commitTx(tx *bolt.Tx, conds []kv.Condition, writes []kv.Write) error {
	b := tx.Bucket(bucketKV)
	if b == nil {
		return fmt.Errorf("bucket %q is missing: %w", bucketKV, ErrCorrupt)
	}
	r := newReader(tx, b)
	for _, c := range conds {
		_, ver, err := r.Get(context.Background(), c.Key)
		if err != nil {
			return err
		}
		if ver != c.Version {
			return fmt.Errorf("key %q is at version %d, not %d: %w", c.Key, ver, c.Version, kv.ErrConditionFailed)
		}
	}
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		return fmt.Errorf("bucket %q is missing: %w", bucketMeta, ErrCorrupt)
	}
	seq, err := b.NextSequence()
	if err != nil {
		return err
	}
	if err := meta.Put(keySequence, binary.BigEndian.AppendUint64(nil, seq)); err != nil {
		return err
	}
	// bbolt keeps each value slice until the transaction ends, so every Put gets its
	// own, all carved from one allocation.
	size := 0
	for _, w := range writes {
		size += versionSize + len(w.Value) + sumSize
	}
	arena := make([]byte, 0, size)
	for _, i := range keyOrder(writes) {
		w := &writes[i]
		switch {
		case !w.Delete:
			start := len(arena)
			arena = appendEntry(arena, w.Key, seq, w.Value)
			if err := b.Put(w.Key, arena[start:len(arena):len(arena)]); err != nil {
				return err
			}
		case len(w.End) == 0:
			if err := b.Delete(w.Key); err != nil {
				return err
			}
		default:
			c := b.Cursor()
			for k, _ := c.Seek(w.Key); k != nil && bytes.Compare(k, w.End) < 0; k, _ = c.Seek(w.Key) {
				if err := c.Delete(); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// keyOrder returns the indexes of writes in the order of their keys. bbolt inserts a key
// into its leaf's sorted array, moving every key after it, and splits leaves only at
// commit: keys written in order land at the end each time, where a batch that writes two
// interleaved ranges (records and their ID index) would move half the leaf on every
// write, quadratic in the batch (40 s for a batch of 100,000 operations, against under
// 1 s in order).
func keyOrder(writes []kv.Write) []int32 {
	order := make([]int32, len(writes))
	for i := range order {
		order[i] = int32(i)
	}
	if !slices.IsSortedFunc(writes, func(a, b kv.Write) int { return bytes.Compare(a.Key, b.Key) }) {
		slices.SortFunc(order, func(a, b int32) int { return bytes.Compare(writes[a].Key, writes[b].Key) })
	}
	return order
}

// guard runs fn, a use of the bbolt file, and turns what bbolt does on a damaged file
// (it panics when a page fails its checks) into an error wrapping [ErrCorrupt] that names
// the file. Once the file is known to be damaged, by such a panic or by a record that
// does not decode, the Store writes nothing more.
func (s *Store) guard(what string, fn func() error) (err error) {
	// A page past the end of a truncated file faults when read through bbolt's mmap;
	// this makes the fault a panic of this goroutine, which is recovered below.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			if f, ok := p.(interface{ Addr() uintptr }); ok {
				// The runtime reports a fault as "invalid memory address or nil pointer
				// dereference", which would send a reader after a bug.
				p = fmt.Sprintf("a read through bbolt's memory map of the file faulted at address %#x: a page lies past the end of the file, cut short, or a page number is damaged", f.Addr())
			}
			err = fmt.Errorf("boltstore: %s %s: the file is damaged (%v): %w", what, s.path, p, ErrCorrupt)
		}
		if errors.Is(err, berrors.ErrDatabaseNotOpen) {
			err = ErrClosed
		}
		if errors.Is(err, ErrCorrupt) {
			s.damage.CompareAndSwap(nil, &err)
		}
	}()
	return fn()
}

// damaged returns the damage met so far, or nil.
func (s *Store) damaged() error {
	if p := s.damage.Load(); p != nil {
		return fmt.Errorf("boltstore: %s was found damaged, so nothing more is written to it: %w", s.path, *p)
	}
	return nil
}

// Check checks the whole file, as Open does unless [Options.SkipCheck] is set: both meta pages
// (their checksums, and that they hold the last two transactions, so that a last
// transaction that bbolt rolled back because its meta page was damaged is reported, not
// read as if it had never happened); every page of the tree, reached once, laid out as
// bbolt writes it, its keys in order and each branch key the first key of its child;
// every entry of the engine against its checksum (see the package documentation,
// "Damage"); the freelist; and that every page of the file is either in the tree or
// free. It reads the pages from the file itself, in the caller's goroutine, and never
// follows a page through bbolt before checking it (bbolt follows a damaged page number
// without a check, and loops forever on a cycle of pages; its own Tx.Check reads in a
// goroutine of its own, where a damaged page would crash the process). It returns nil
// for a sound file, or an error wrapping [ErrCorrupt] that says what is wrong, after
// which the Store writes nothing more. It costs one read of every page in use (see
// docs/BENCHMARKS.md); a done ctx stops it, within 1024 pages, with ctx.Err(). A Check
// of a writable Store holds back its writes while it reads the meta pages, and then runs
// beside them on the snapshot it began with.
func (s *Store) Check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.guard("check", func() error {
		s.commitMu.Lock()
		unlock := sync.OnceFunc(s.commitMu.Unlock)
		defer unlock()
		tx, err := s.db.Begin(false)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		f, err := os.Open(tx.DB().Path())
		if err != nil {
			return fmt.Errorf("boltstore: check %s: %w", s.path, err)
		}
		defer f.Close()
		pageSize := uint64(tx.DB().Info().PageSize)
		err = checkFile(ctx, pageSize, uint64(tx.ID()), uint64(tx.Cursor().Bucket().RootPage()), uint64(tx.Size())/pageSize, f, unlock)
		if err != nil && !errors.Is(err, ctx.Err()) {
			return fmt.Errorf("boltstore: check %s: %w", s.path, err)
		}
		return err
	})
}
