package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/storage/internal/salvage"
	"github.com/itemops/itemops/storage/kv"
)

// Salvaged is what [Salvage] read back from a file.
type Salvaged struct {
	// Runs are the runs read back, each with those of its operations that were, and the
	// runs rebuilt from their operations when their records were lost (see
	// [SalvagedRun]), in the order in which the store lists its runs.
	Runs []SalvagedRun
	// Lost are the records that could not be read back, in the order of their keys.
	Lost []Loss
	// Damage says what the reading of the file found damaged, a finding each, in the
	// order found: a meta page, a page that cannot be read, an entry that fails its
	// checksum, pages it could not tell from stale copies. It is empty for a sound file.
	Damage []string
}

// A SalvagedRun is a run that [Salvage] read back, with those of its operations it read
// back, in the order their IDs were first put.
//
// A run whose record and its copy in the phase index were both lost, but some of whose
// operations' records were read, is rebuilt from them, so that no operation read is lost
// with its run's record, and marked Rebuilt. Its owner is the operations' kind and name,
// with the UID of the first of them; its phase is [phase.Failed], reached from
// [phase.New] by [operations.Run.SetPhase], with a FailureReason that says the record was
// lost and how many operations were saved; its counts are zero. Failed because its state
// is unknown: it must not be finalized, resumed or reported Completed, and a controller,
// a Monitor and a person all read Failed as a run to look at, with the reason beside it.
// Its Created is the earliest Created of those operations, and the move to Failed is
// dated the latest time they hold (Created or Updated), the last time the store shows the
// run in use; no clock is read, so the same records always give the same run. A run of a
// kind of one's own is rebuilt with the profile of the other runs of its kind that were
// read, when there are some and they all agree; without that profile the kind's machine
// is unknown, the run is not rebuilt, and each of its operations is a [Loss] that says
// why.
type SalvagedRun struct {
	Run        operations.Run
	Operations []operations.Operation
	// Rebuilt is set when the run's record and its copy were both lost and Run was
	// rebuilt from its operations' records: its phase, counts and history are not the
	// ones it had.
	Rebuilt bool
}

// A Loss is a record that [Salvage] could not read back: an operation whose ID index
// entry remains but whose record is gone or does not decode (named by that ID), an
// operation whose run is gone and cannot be rebuilt (named by its record's ID), a run
// record that does not decode, has no copy and is not rebuilt, a chunk of a batch
// committed but not applied that does not decode, and a key of no form of the engine's
// layout. A rebuilt run's record is not a Loss: [SalvagedRun].Rebuilt says it was lost.
// An index entry whose operation's record is read is not a loss, though the entry
// itself is gone: a store that the runs are written to again rebuilds it.
//
// Owner is the run it belongs to, when its key tells (its Kind is empty when not); ID is
// the operation's ID when the loss is of one operation whose ID is known, and empty
// otherwise; Why says what was found.
type Loss struct {
	Owner operations.Owner
	ID    string
	Why   string
}

// Salvage reads every run and operation that remains intact in the store file at path,
// however damaged or cut short the file is, without bbolt, which refuses such a file or
// fails at the first damaged page it reads. It opens the file read-only and changes
// nothing.
//
// It reads the newest sound meta page, and the check of the file ([Store.Check]),
// whose finding, if any, is the first of Damage; then every page it can reach from
// that transaction's root, going on past a page it cannot read; then every leaf page
// below the end of the file that the root does not reach (its parent lost, or past the
// cut) and that is not free. bbolt never writes a page in use, so such a page holds
// entries of the transaction, while a free page may hold stale copies, which are never
// read. Each entry of the engine carries a checksum (see sum.go): an entry that fails
// it is left out, and one that passes is the one written; a key read twice keeps its
// later version. The records are then read from the entries one by one: a run from its
// record, or from its copy in the phase index when its record is gone, and each of its
// operations from its own record, so one that is lost costs only itself (see
// [SalvagedRun] and [Loss]). A batch of operations that was committed but not yet
// applied is applied, as a reader of the store would (see "Batches larger than one
// commit" in storage/kv).
//
// bbolt writes the freelist, and the root, at the end of each transaction, often at
// the end of the file, so a file cut short has usually lost both. Without the freelist
// the pages that the last transactions freed cannot be told from pages in use: Salvage
// then reads every leaf page the root does not reach, and says so in Damage (a finding
// that starts "without the freelist"), since a record that the last transactions
// rewrote, and whose newer copy is lost, then comes back as it was before them.
//
// Salvage fails with an error wrapping [ErrNotStore] when the file is empty or not a
// bbolt file, [ErrCorrupt] when neither meta page is sound, [ErrSchemaVersion] for a
// file of schema 1 or 2 (whose entries carry no checksums; a writable [Open] migrates a
// sound one), ctx.Err() when ctx ends, within 1024 pages, and the file system's error.
func Salvage(ctx context.Context, path string) (*Salvaged, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if info.Size() == 0 {
		return nil, fmt.Errorf("boltstore: salvage %s: %w: the file is empty", path, ErrNotStore)
	}
	w := salvageWalk{f: f, entries: map[string]salvagedEntry{}}
	meta, err := w.meta(info.Size())
	if err != nil {
		return nil, fmt.Errorf("boltstore: salvage %s: %w", path, err)
	}
	// The check finds what the entries read cannot tell: a rolled-back last transaction,
	// a damaged freelist, a page out of place.
	err = checkFile(ctx, w.pageSize, meta.txid, meta.root, meta.hwm, f, func() {})
	if cerr := ctx.Err(); err != nil && cerr != nil {
		return nil, cerr
	}
	if err != nil {
		w.found("%v", err)
	}
	if err := w.walk(ctx, meta, info.Size()); err != nil {
		return nil, fmt.Errorf("boltstore: salvage %s: %w", path, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("boltstore: salvage %s: %w", path, err)
	}
	entries := make(map[string][]byte, len(w.entries))
	for k, e := range w.entries {
		entries[k] = e.value
	}
	runs, lost := salvage.Read(entries)
	out := &Salvaged{Damage: w.damage}
	for _, r := range runs {
		out.Runs = append(out.Runs, SalvagedRun(r))
	}
	for _, l := range lost {
		out.Lost = append(out.Lost, Loss(l))
	}
	return out, nil
}

// salvagedEntry is an entry of the kv bucket read by Salvage: the engine's value and
// the version it was written at.
type salvagedEntry struct {
	value   []byte
	version kv.Version
}

// salvageWalk is the state of Salvage.
type salvageWalk struct {
	f        io.ReaderAt
	pageSize uint64
	pages    uint64   // the pages below both the high water mark and the end of the file
	seen     []uint64 // a bit per page read, and the freelist's
	entries  map[string]salvagedEntry
	damage   []string
	schema   uint64 // the schema version the meta bucket names; 0 when unknown
}

func (w *salvageWalk) found(format string, args ...any) {
	w.damage = append(w.damage, fmt.Sprintf(format, args...))
}

// meta finds the page size and the newest sound meta page of the file, of size bytes.
func (w *salvageWalk) meta(size int64) (fileMeta, error) {
	best, pageSize, ok := newestMeta(w.f, size)
	if !ok {
		var head [pageHeaderSize + 4]byte
		if _, err := w.f.ReadAt(head[:], 0); err != nil || binary.NativeEndian.Uint32(head[pageHeaderSize:]) != boltMagic {
			return fileMeta{}, fmt.Errorf("%w: no bbolt meta page", ErrNotStore)
		}
		return fileMeta{}, fmt.Errorf("the file is damaged (neither meta page is sound): %w", ErrCorrupt)
	}
	w.pageSize = pageSize
	return best, nil
}

// walk reads the entries of the transaction of m: the pages its root reaches, then the
// pages in use that it does not reach.
func (w *salvageWalk) walk(ctx context.Context, m fileMeta, size int64) error {
	w.pages = min(m.hwm, uint64(size)/w.pageSize)
	if w.pages < m.hwm {
		w.found("the file is cut short: it holds %d bytes, %d whole pages of %d bytes, and its meta page of transaction %d counts %d", size, w.pages, w.pageSize, m.txid, m.hwm)
	}
	w.seen = make([]uint64, (m.hwm+63)/64)
	var stack []uint64
	if p, err := w.page(m.root); err != nil {
		w.found("the root page: %v", err)
	} else if stack, err = w.root(m.root, p); err != nil {
		return err
	}
	for n := 0; len(stack) > 0; n++ {
		if n%checkEvery == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		p, err := w.page(id)
		if err != nil {
			w.found("%v", err)
			continue
		}
		switch binary.NativeEndian.Uint16(p[8:]) {
		case branchFlag:
			count := min(int(binary.NativeEndian.Uint16(p[10:])), (len(p)-pageHeaderSize)/elementSize)
			for i := count - 1; i >= 0; i-- {
				stack = append(stack, binary.NativeEndian.Uint64(p[pageHeaderSize+i*elementSize+8:]))
			}
		case leafFlag:
			w.leaf(id, p)
		default:
			w.found("page %d has flags %#x where a branch or leaf page was expected", id, binary.NativeEndian.Uint16(p[8:]))
		}
	}
	switch {
	case w.schema == 1 || w.schema == 2:
		return fmt.Errorf("%w: the file has schema version %d, and salvage reads version %d only, whose entries carry checksums", ErrSchemaVersion, w.schema, schemaVersion)
	case w.schema != 0 && w.schema != schemaVersion:
		w.found("the meta bucket names schema version %d, which no release writes: read as version %d", w.schema, schemaVersion)
	}
	free, err := w.free(m.freelist)
	if err != nil {
		w.found("the freelist: %v", err)
	}
	var unsure []uint64
	for id := uint64(2); id < w.pages; id++ {
		if id%checkEvery == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if w.seen[id/64]&(1<<(id%64)) != 0 || free[id] {
			continue
		}
		var head [pageHeaderSize]byte
		if _, err := w.f.ReadAt(head[:], int64(id*w.pageSize)); err != nil || binary.NativeEndian.Uint64(head[:]) != id || binary.NativeEndian.Uint16(head[8:]) != leafFlag {
			continue
		}
		if free == nil {
			unsure = append(unsure, id)
		}
		if p, err := w.page(id); err != nil {
			w.found("%v", err)
		} else {
			w.leaf(id, p)
		}
	}
	if len(unsure) > 0 {
		w.found("without the freelist, %d leaf pages (the first %d) that the root does not reach were read as in use; one that the last transactions freed holds older copies of what they rewrote, and a record whose newer copy is lost is saved as it was before them", len(unsure), unsure[0])
	}
	return nil
}

// page reads page id, with its overflow pages, and marks it read. It fails when the
// page lies past the end of the file, says it is another page, or was read before.
func (w *salvageWalk) page(id uint64) ([]byte, error) {
	if id < 2 || id >= w.pages {
		return nil, fmt.Errorf("page %d lies outside the file's %d whole pages", id, w.pages)
	}
	if w.seen[id/64]&(1<<(id%64)) != 0 {
		return nil, fmt.Errorf("page %d is %w", id, errPageReachedTwice)
	}
	var head [pageHeaderSize]byte
	if _, err := w.f.ReadAt(head[:], int64(id*w.pageSize)); err != nil {
		return nil, fmt.Errorf("page %d cannot be read: %v", id, err)
	}
	ne := binary.NativeEndian
	if got := ne.Uint64(head[:]); got != id {
		return nil, fmt.Errorf("page %d says it is page %d", id, got)
	}
	overflow := uint64(ne.Uint32(head[12:]))
	if overflow >= w.pages-id {
		return nil, fmt.Errorf("page %d runs %d pages past its own, beyond the file's %d whole pages", id, overflow, w.pages)
	}
	for q := id; q <= id+overflow; q++ {
		w.seen[q/64] |= 1 << (q % 64)
	}
	p := make([]byte, (overflow+1)*w.pageSize)
	if _, err := w.f.ReadAt(p, int64(id*w.pageSize)); err != nil {
		return nil, fmt.Errorf("page %d cannot be read: %v", id, err)
	}
	return p, nil
}

// root reads the root bucket's page p (page id): the schema version in the meta bucket,
// and the kv bucket, whose entries it reads when it is inline. It returns the kv
// bucket's root page to visit, if any. A sound root page without the meta bucket of a
// store is an error wrapping ErrNotStore: the file is another program's bbolt file.
func (w *salvageWalk) root(id uint64, p []byte) ([]uint64, error) {
	if flags := binary.NativeEndian.Uint16(p[8:]); flags != leafFlag {
		w.found("root page %d has flags %#x where a leaf page was expected", id, flags)
		return nil, nil
	}
	var next []uint64
	var format string
	e := newElements(id, p, true)
	for e.next() {
		if e.flags != bucketFlag || len(e.value) < bucketHeader {
			continue
		}
		root, inline := binary.NativeEndian.Uint64(e.value), e.value[bucketHeader:]
		switch string(e.key) {
		case string(bucketKV):
			if root != 0 {
				next = append(next, root)
			} else {
				w.leaf(id, inline)
			}
		case string(bucketMeta):
			m := newElements(id, inline, true)
			for m.next() {
				switch {
				case bytes.Equal(m.key, keyFormat):
					format = string(m.value)
				case bytes.Equal(m.key, keyVersion) && len(m.value) == 8:
					w.schema = binary.BigEndian.Uint64(m.value)
				}
			}
		}
	}
	if e.err != nil {
		w.found("the root page: %v", e.err)
		return next, nil
	}
	if format != formatName {
		return nil, fmt.Errorf("%w: its root page holds no itemops metadata (format %q)", ErrNotStore, format)
	}
	return next, nil
}

// leaf reads the entries of the leaf page p (page id, or an inline page within it)
// whose checksums pass. bbolt packs the keys and values of a page in the order of its
// elements, so an element whose position field is damaged is read where the one
// before it ends, and one whose sizes are damaged is read where its position points.
func (w *salvageWalk) leaf(id uint64, p []byte) {
	ne := binary.NativeEndian
	count := min(int(ne.Uint16(p[10:])), (len(p)-pageHeaderSize)/elementSize)
	used := pageHeaderSize + count*elementSize
	var bad []string
	for i := range count {
		off := pageHeaderSize + i*elementSize
		flags, pos, ksize, vsize := ne.Uint32(p[off:]), ne.Uint32(p[off+4:]), ne.Uint32(p[off+8:]), ne.Uint32(p[off+12:])
		if flags != 0 {
			continue // a bucket: the kv bucket holds none
		}
		read := false
		for _, at := range []uint64{uint64(used), uint64(off) + uint64(pos)} {
			end := at + uint64(ksize) + uint64(vsize)
			if ksize == 0 || end > uint64(len(p)) {
				continue
			}
			k, v := p[at:at+uint64(ksize)], p[at+uint64(ksize):end]
			if value, version, err := checkValue(k, v); err == nil {
				w.add(k, value, version)
				used, read = int(end), true
				break
			}
		}
		if !read {
			key := "outside the page"
			if at := uint64(off) + uint64(pos); ksize > 0 && at+uint64(ksize) <= uint64(len(p)) {
				key = fmt.Sprintf("%q", p[at:at+uint64(min(ksize, 64))])
			}
			bad = append(bad, fmt.Sprintf("entry %d (key %s)", i, key))
		}
	}
	if len(bad) > 0 {
		if len(bad) > 8 {
			bad = append(bad[:8], fmt.Sprintf("%d more", len(bad)-8))
		}
		w.found("page %d: of its %d entries, these fail their checksums and were left out: %s", id, count, strings.Join(bad, ", "))
	}
}

// add keeps the entry of key k, or the one of the later version when k was read twice.
func (w *salvageWalk) add(k, value []byte, version kv.Version) {
	if old, ok := w.entries[string(k)]; ok && old.version >= version {
		return
	}
	w.entries[string(k)] = salvagedEntry{bytes.Clone(value), version}
}

// free reads the freelist page id and returns the free pages, marking the freelist's
// own pages as read. It returns nil and an error when the freelist cannot be read.
func (w *salvageWalk) free(id uint64) (map[uint64]bool, error) {
	if id == noFreelist {
		return nil, errors.New("the file has none")
	}
	p, err := w.page(id)
	if err != nil {
		return nil, err
	}
	frees, err := freePages(id, p)
	if err != nil {
		return nil, err
	}
	free := make(map[uint64]bool, len(frees))
	for _, q := range frees {
		free[q] = true
	}
	return free, nil
}
