package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
)

// bbolt's file layout (the file format of bbolt 1.x, in the machine's byte order). Every
// page starts with a header of 16 bytes (id uint64, flags uint16, count uint16,
// overflow uint32). Pages 0 and 1 are meta pages: after the header, magic uint32,
// version uint32, page size uint32, flags uint32, the root bucket (root pgid uint64,
// sequence uint64), freelist pgid uint64, high water mark pgid uint64, txid uint64 and
// an FNV-1a checksum uint64 of the 56 bytes before it. A freelist page holds count page
// numbers (uint64) after its header; a count of 0xFFFF means the first uint64 is the
// count. A branch or leaf page holds count elements of 16 bytes each, then their keys
// and values, packed in the order of the elements: a branch element is (pos uint32,
// ksize uint32, pgid uint64), a leaf element (flags uint32, pos uint32, ksize uint32,
// vsize uint32), and pos counts from the element's own first byte. A leaf element whose
// flags hold bucketFlag is a nested bucket: its value starts with (root pgid uint64,
// sequence uint64), and a root of 0 means an inline bucket, whose leaf page (with an id
// of 0) follows in the value.
const (
	pageHeaderSize = 16
	elementSize    = 16
	branchFlag     = 0x01
	leafFlag       = 0x02
	metaFlag       = 0x04
	freelistFlag   = 0x10
	bucketFlag     = 0x01
	bucketHeader   = 16
	metaSize       = 64
	metaSummed     = 56 // the bytes of a meta page's checksum, after its page header
	boltMagic      = 0xED0CDAED
	boltVersion    = 2
	noFreelist     = ^uint64(0)
)

// fileMeta is what a meta page says of the transaction it ends.
type fileMeta struct {
	root, freelist, hwm, txid uint64
}

// readMeta reads meta page i of the file and checks it: its page header, its magic,
// version and page size, its checksum, and that its transaction belongs on page i
// (bbolt writes the meta page of transaction t on page t%2).
func readMeta(f io.ReaderAt, pageSize, i uint64) (fileMeta, error) {
	var p [pageHeaderSize + metaSize]byte
	if _, err := f.ReadAt(p[:], int64(i*pageSize)); err != nil {
		return fileMeta{}, fmt.Errorf("meta page %d cannot be read (%v)", i, err)
	}
	ne := binary.NativeEndian
	if ne.Uint64(p[0:]) != i || ne.Uint16(p[8:]) != metaFlag || ne.Uint16(p[10:]) != 0 || ne.Uint32(p[12:]) != 0 {
		return fileMeta{}, fmt.Errorf("meta page %d has a damaged page header", i)
	}
	m := p[pageHeaderSize:]
	h := fnv.New64a()
	h.Write(m[:metaSummed])
	if ne.Uint64(m[metaSummed:]) != h.Sum64() {
		return fileMeta{}, fmt.Errorf("meta page %d fails its checksum", i)
	}
	if ne.Uint32(m) != boltMagic || ne.Uint32(m[4:]) != boltVersion || uint64(ne.Uint32(m[8:])) != pageSize || ne.Uint32(m[12:]) != 0 {
		return fileMeta{}, fmt.Errorf("meta page %d has a checksum that matches, but not bbolt's magic, version %d or page size %d", i, boltVersion, pageSize)
	}
	fm := fileMeta{root: ne.Uint64(m[16:]), freelist: ne.Uint64(m[32:]), hwm: ne.Uint64(m[40:]), txid: ne.Uint64(m[48:])}
	if fm.txid%2 != i {
		return fileMeta{}, fmt.Errorf("meta page %d holds transaction %d, which belongs on page %d", i, fm.txid, fm.txid%2)
	}
	return fm, nil
}

// newestMeta returns the sound meta page of the newest transaction of the file f, of
// size bytes, and the file's page size; ok is false when neither meta page is sound.
// The page size is in the meta pages, so it tries the sizes bbolt tries, from 1 KiB up.
func newestMeta(f io.ReaderAt, size int64) (best fileMeta, pageSize uint64, ok bool) {
	for ps := uint64(1024); ps <= 16<<20 && ps < uint64(size); ps <<= 1 {
		for i := uint64(0); i < 2; i++ {
			if m, err := readMeta(f, ps, i); err == nil && (!ok || m.txid > best.txid) {
				best, pageSize, ok = m, ps, true
			}
		}
	}
	return best, pageSize, ok
}

// checkMetas checks both meta pages of the file, of which bbolt reads the one of
// transaction txid, and returns that one. Both must be sound and hold two transactions
// in a row: a meta page that fails its checksum is either the last transaction's, which
// bbolt then silently rolls back to the one before, or the one before, the fallback
// that a damaged last meta page would need.
func checkMetas(f io.ReaderAt, pageSize, txid uint64) (fileMeta, error) {
	cur, curErr := readMeta(f, pageSize, txid%2)
	other, otherErr := readMeta(f, pageSize, (txid+1)%2)
	switch {
	case curErr != nil:
		return fileMeta{}, curErr
	case cur.txid != txid:
		return fileMeta{}, fmt.Errorf("meta page %d holds transaction %d, not the transaction %d that bbolt reads", txid%2, cur.txid, txid)
	case otherErr != nil:
		return fileMeta{}, fmt.Errorf("%v: bbolt reads transaction %d from meta page %d, so either the transaction after it was lost (rolled back) or the one before it, the fallback, is gone", otherErr, txid, txid%2)
	case other.txid+1 != txid:
		return fileMeta{}, fmt.Errorf("the meta pages hold transactions %d and %d, not two in a row (a write of a meta page was lost?)", other.txid, txid)
	}
	return cur, nil
}

// A bucketKind says which bucket a page belongs to, which sets the rules for its
// entries.
type bucketKind uint8

const (
	inRoot  bucketKind = iota // the file's root bucket: every entry a bucket
	inKV                      // the engine's keys: no buckets; in schema 3, every value summed
	inOther                   // the meta bucket, and the buckets of schema 1
)

// A span is a key kept in treeWalk.keys; n < 0 means none.
type span struct{ off, n int32 }

var noKey = span{n: -1}

// pending is a page still to visit: the bucket it belongs to, the key its parent
// branch page names it by, which must be its first key, and the parent's next key,
// which all its keys must be below (none for a bucket's root page).
type pending struct {
	id     uint64
	bucket bucketKind
	first  span
	limit  span
}

// checkFile checks the whole file that tx reads, from f, the file itself, rather than
// through bbolt, which checks little before it follows a page: both meta pages; every
// page of the tree, each reached once, its elements, keys and values laid out as bbolt
// writes them, in order, each branch key the first key of its child; every entry of the
// engine against its checksum (schema 3); the freelist; and that every page below the
// high water mark is either in the tree or free. It fails, with an error wrapping
// [ErrCorrupt], at the first damage it finds. It keeps one bit per page, a stack of
// pages to visit and a copy of the branch keys on the stack, and reads each page once.
// A done ctx stops it, within 1024 pages, with ctx.Err(). It calls metasRead once it
// has read the meta pages.
func checkFile(ctx context.Context, pageSize, txid, root, hwm uint64, f io.ReaderAt, metasRead func()) error {
	meta, err := checkMetas(f, pageSize, txid)
	metasRead()
	if err == nil && (meta.root != root || meta.hwm != hwm) {
		err = fmt.Errorf("meta page %d names root page %d of %d pages, where bbolt reads root page %d of %d", txid%2, meta.root, meta.hwm, root, hwm)
	}
	if err != nil {
		return fmt.Errorf("the file is damaged (%v): %w", err, ErrCorrupt)
	}
	w := treeWalk{f: f, pageSize: pageSize, pages: hwm}
	w.seen = make([]uint64, (w.pages+63)/64)
	err = w.root(root)
	for n := 0; err == nil && len(w.stack) > 0; n++ {
		if n%checkEvery == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		next := w.stack[len(w.stack)-1]
		w.stack = w.stack[:len(w.stack)-1]
		if next.first.n >= 0 {
			// The pages below on the stack name no key after next's first (see
			// branch), so the keys after it, of subtrees already walked, are dropped.
			w.keys = w.keys[:max(next.first.off+next.first.n, next.limit.off+next.limit.n)]
		}
		err = w.visit(next)
	}
	if err != nil {
		return fmt.Errorf("the file is damaged (in its page tree, %w): %w", err, ErrCorrupt)
	}
	if err := w.freelist(meta.freelist); err != nil {
		return fmt.Errorf("the file is damaged (in its freelist, %w): %w", err, ErrCorrupt)
	}
	return nil
}

// treeWalk is the state of checkFile: the pages seen and the pages still to visit.
type treeWalk struct {
	f        io.ReaderAt
	pageSize uint64
	pages    uint64   // the high water mark: the pages the file holds for the transaction
	seen     []uint64 // a bit per page: in the tree, or the freelist's, or free
	stack    []pending
	keys     []byte // the keys the pending pages name
	buf      []byte

	sums  bool   // the engine's entries carry checksums (schema 3)
	kvSeq uint64 // the sequence of the kv bucket: no entry has a later version
}

// mark marks pages id to id+overflow as seen, failing when one was seen before.
func (w *treeWalk) mark(id, overflow uint64, what string) error {
	for q := id; q <= id+overflow; q++ {
		if w.seen[q/64]&(1<<(q%64)) != 0 {
			return fmt.Errorf("page %d is %w (as %s; a cycle, two parents, or a free page in use)", q, errPageReachedTwice, what)
		}
		w.seen[q/64] |= 1 << (q % 64)
	}
	return nil
}

// page reads page id, with its overflow pages, checks its header's id and overflow,
// and marks it seen.
func (w *treeWalk) page(id uint64, what string) ([]byte, error) {
	if id < 2 || id >= w.pages {
		return nil, fmt.Errorf("%s page %d is outside the file's %d pages", what, id, w.pages)
	}
	p := w.bytes(w.pageSize)
	if err := w.read(id, p); err != nil {
		return nil, err
	}
	if got := binary.NativeEndian.Uint64(p); got != id {
		return nil, fmt.Errorf("page %d says it is page %d", id, got)
	}
	overflow := uint64(binary.NativeEndian.Uint32(p[12:]))
	if overflow >= w.pages-id {
		return nil, fmt.Errorf("page %d runs %d pages past its own, beyond the file's %d pages", id, overflow, w.pages)
	}
	if err := w.mark(id, overflow, what); err != nil {
		return nil, err
	}
	if overflow > 0 {
		p = w.bytes((overflow + 1) * w.pageSize)
		if err := w.read(id, p); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// root visits the root page of the root bucket, a leaf page that holds the file's
// buckets. It reads the meta bucket (inline in it) first, to learn whether the engine's
// entries carry checksums, before it goes into the kv bucket.
func (w *treeWalk) root(id uint64) error {
	p, err := w.page(id, "root")
	if err != nil {
		return err
	}
	if flags := binary.NativeEndian.Uint16(p[8:]); flags != leafFlag {
		return fmt.Errorf("root page %d has flags %#x where a leaf page was expected", id, flags)
	}
	type entry struct{ key, value []byte }
	var buckets []entry
	e := newElements(id, p, true)
	for e.next() {
		if e.flags != bucketFlag {
			return fmt.Errorf("page %d: key %q of the root bucket is not a bucket", id, e.key)
		}
		buckets = append(buckets, entry{e.key, e.value})
	}
	if e.err != nil {
		return e.err
	}
	if err := zeroAfter(id, p, e.used); err != nil {
		return err
	}
	var version, seq []byte
	for _, b := range buckets {
		switch string(b.key) {
		case string(bucketKV):
			if len(b.value) >= bucketHeader {
				w.kvSeq = binary.NativeEndian.Uint64(b.value[8:])
			}
		case string(bucketMeta):
			if len(b.value) >= bucketHeader && binary.NativeEndian.Uint64(b.value[8:]) != 0 {
				return fmt.Errorf("page %d: the meta bucket has a sequence, which is never set", id)
			}
			if len(b.value) < bucketHeader+pageHeaderSize || binary.NativeEndian.Uint64(b.value) != 0 {
				continue // not inline: bucket reports it
			}
			e := newElements(id, b.value[bucketHeader:], true)
			for e.next() {
				switch string(e.key) {
				case string(keyVersion):
					version = e.value
				case string(keySequence):
					seq = e.value
				}
			}
			if e.err != nil {
				return e.err
			}
		}
	}
	if len(version) == 8 && binary.BigEndian.Uint64(version) >= 3 {
		w.sums = true
		if len(seq) != 8 || binary.BigEndian.Uint64(seq) != w.kvSeq {
			return fmt.Errorf("the kv bucket's sequence %d differs from the copy in the meta bucket (%x)", w.kvSeq, seq)
		}
	} else if seq != nil {
		return fmt.Errorf("a file of schema %x holds a copy of the kv sequence, which only schema 3 writes", version)
	}
	for _, b := range buckets {
		kind := inOther
		if bytes.Equal(b.key, bucketKV) {
			kind = inKV
		}
		if err := w.bucket(id, b.key, b.value, kind); err != nil {
			return err
		}
	}
	w.keys = w.keys[:0]
	return nil
}

// visit reads page id, checks it and pushes the pages it points to.
func (w *treeWalk) visit(pd pending) error {
	p, err := w.page(pd.id, "branch or leaf")
	if err != nil {
		return err
	}
	var used int
	switch flags := binary.NativeEndian.Uint16(p[8:]); flags {
	case branchFlag:
		used, err = w.branch(pd, p)
	case leafFlag:
		used, err = w.leaf(pd, pd.id, p)
	default:
		return fmt.Errorf("page %d has flags %#x where a branch or leaf page was expected", pd.id, flags)
	}
	if err != nil {
		return err
	}
	// bbolt gives a page the fewest pages its elements fit in.
	if need := (uint64(used) + w.pageSize - 1) / w.pageSize; need != uint64(len(p))/w.pageSize {
		return fmt.Errorf("page %d spans %d pages where its elements take %d", pd.id, uint64(len(p))/w.pageSize, need)
	}
	return zeroAfter(pd.id, p, used)
}

// zeroAfter checks that the bytes of page p (page id) after the used bytes are zero.
// bbolt writes every page from a zeroed buffer, so a byte there was changed after the
// write; and an element count cut to fewer elements, or to none, leaves the elements it
// dropped there, which no other rule would see.
func zeroAfter(id uint64, p []byte, used int) error {
	for off := used; off < len(p); {
		n := min(len(p)-off, len(zeroPage))
		if !bytes.Equal(p[off:off+n], zeroPage[:n]) {
			for p[off] == 0 {
				off++
			}
			return fmt.Errorf("page %d: byte %d is not zero, though its elements, keys and values end at byte %d", id, off, used)
		}
		off += n
	}
	return nil
}

// zeroPage is what zeroAfter compares with.
var zeroPage [4096]byte

// bytes returns n bytes of the walk's buffer, which it grows when n needs more.
func (w *treeWalk) bytes(n uint64) []byte {
	if uint64(cap(w.buf)) < n {
		w.buf = make([]byte, n)
	}
	return w.buf[:n]
}

// read reads page id, and the pages after it, into p.
func (w *treeWalk) read(id uint64, p []byte) error {
	_, err := w.f.ReadAt(p, int64(id*w.pageSize))
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("page %d lies past the end of the file (cut short?)", id)
	}
	return err
}

// key returns the bytes of s.
func (w *treeWalk) key(s span) []byte {
	if s.n < 0 {
		return nil
	}
	return w.keys[s.off : s.off+s.n]
}

// keep copies k to the walk's keys.
func (w *treeWalk) keep(k []byte) span {
	s := span{off: int32(len(w.keys)), n: int32(len(k))}
	w.keys = append(w.keys, k...)
	return s
}

// elements reads the elements of page p (a page of the file, or the inline page of a
// bucket within page id), checking that they fit in it with their keys and values
// packed after them in their order, as bbolt writes them. Call next until it returns
// false; then err says why it stopped early, if it did, and used is the bytes the page
// uses.
type elements struct {
	id   uint64
	p    []byte
	leaf bool
	i, n int
	used int // where the next element's key must start
	err  error

	// the element next read
	flags      uint32
	key, value []byte
	child      uint64
}

func newElements(id uint64, p []byte, leaf bool) elements {
	e := elements{id: id, p: p, leaf: leaf}
	if len(p) < pageHeaderSize {
		e.err = fmt.Errorf("page %d: %d bytes, shorter than a page header", id, len(p))
		return e
	}
	e.n = int(binary.NativeEndian.Uint16(p[10:]))
	e.used = pageHeaderSize + e.n*elementSize
	if e.used > len(p) {
		e.err = fmt.Errorf("page %d: %d elements overrun its %d bytes", id, e.n, len(p))
	}
	return e
}

// next reads the next element, and reports whether there was one.
func (e *elements) next() bool {
	if e.err != nil || e.i >= e.n {
		return false
	}
	ne, p := binary.NativeEndian, e.p
	off := pageHeaderSize + e.i*elementSize
	var pos, ksize, vsize uint32
	if e.leaf {
		e.flags, pos, ksize, vsize = ne.Uint32(p[off:]), ne.Uint32(p[off+4:]), ne.Uint32(p[off+8:]), ne.Uint32(p[off+12:])
	} else {
		pos, ksize, e.child = ne.Uint32(p[off:]), ne.Uint32(p[off+4:]), ne.Uint64(p[off+8:])
	}
	end := uint64(e.used) + uint64(ksize) + uint64(vsize)
	switch {
	case uint64(off)+uint64(pos) != uint64(e.used):
		e.err = fmt.Errorf("page %d: element %d points to byte %d, where its key must follow the one before at byte %d", e.id, e.i, uint64(off)+uint64(pos), e.used)
	case end > uint64(len(p)):
		e.err = fmt.Errorf("page %d: element %d points past the page", e.id, e.i)
	case ksize == 0:
		e.err = fmt.Errorf("page %d: element %d has an empty key", e.id, e.i)
	}
	if e.err != nil {
		return false
	}
	e.key = p[e.used : e.used+int(ksize) : e.used+int(ksize)]
	e.value = p[e.used+int(ksize) : end : end]
	e.used = int(end)
	e.i++
	return true
}

// order checks that key, the i-th of its page, comes after prev and, for the first,
// is the one first names; and that it is below limit.
func (w *treeWalk) order(id uint64, i int, prev, key []byte, pd pending) error {
	if i == 0 && pd.first.n >= 0 && !bytes.Equal(key, w.key(pd.first)) {
		return fmt.Errorf("page %d begins with key %q, where its parent names it %q", id, key, w.key(pd.first))
	}
	if i > 0 && bytes.Compare(prev, key) >= 0 {
		return fmt.Errorf("page %d: key %q follows key %q, out of order", id, key, prev)
	}
	if pd.limit.n >= 0 && bytes.Compare(key, w.key(pd.limit)) >= 0 {
		return fmt.Errorf("page %d: key %q is not below its parent's next key %q", id, key, w.key(pd.limit))
	}
	return nil
}

func (w *treeWalk) branch(pd pending, p []byte) (int, error) {
	if binary.NativeEndian.Uint16(p[10:]) == 0 {
		return 0, fmt.Errorf("page %d: a branch page without elements", pd.id)
	}
	var prev []byte
	e := newElements(pd.id, p, false)
	for i := 0; e.next(); i++ {
		if err := w.order(pd.id, i, prev, e.key, pd); err != nil {
			return 0, err
		}
		prev = e.key
		k := w.keep(e.key)
		if i > 0 {
			w.stack[len(w.stack)-1].limit = k
		}
		w.stack = append(w.stack, pending{id: e.child, bucket: pd.bucket, first: k, limit: pd.limit})
	}
	return e.used, e.err
}

// leaf checks the leaf page p (page id, or the inline page of a bucket within page id)
// and its entries, and goes into the buckets it holds.
func (w *treeWalk) leaf(pd pending, id uint64, p []byte) (int, error) {
	var prev []byte
	e := newElements(id, p, true)
	for i := 0; e.next(); i++ {
		key := e.key
		if err := w.order(id, i, prev, key, pd); err != nil {
			return 0, err
		}
		prev = key
		switch {
		case e.flags&^bucketFlag != 0:
			return 0, fmt.Errorf("page %d: key %q has flags %#x", id, key, e.flags)
		case pd.bucket == inKV && e.flags != 0:
			return 0, fmt.Errorf("page %d: key %q of the kv bucket is a bucket", id, key)
		case e.flags == bucketFlag:
			if err := w.bucket(id, key, e.value, inOther); err != nil {
				return 0, err
			}
		case pd.bucket == inKV && w.sums:
			_, ver, err := checkValue(key, e.value)
			if err == nil && uint64(ver) > w.kvSeq {
				err = fmt.Errorf("key %q was written at version %d, after the kv bucket's sequence %d", key, ver, w.kvSeq)
			}
			if err != nil {
				return 0, fmt.Errorf("page %d: %v", id, err)
			}
		}
	}
	return e.used, e.err
}

// bucket checks the bucket named key, whose value is v, in page id, and goes into it:
// it pushes its root page, or walks its inline page.
func (w *treeWalk) bucket(id uint64, key, v []byte, kind bucketKind) error {
	if len(v) < bucketHeader {
		return fmt.Errorf("page %d: bucket %q has a value of %d bytes", id, key, len(v))
	}
	if root := binary.NativeEndian.Uint64(v); root != 0 {
		if len(v) != bucketHeader {
			return fmt.Errorf("page %d: bucket %q has a root page and %d bytes more", id, key, len(v)-bucketHeader)
		}
		w.stack = append(w.stack, pending{id: root, bucket: kind, first: noKey, limit: noKey})
		return nil
	}
	inline := v[bucketHeader:]
	ne := binary.NativeEndian
	if len(inline) < pageHeaderSize || ne.Uint64(inline) != 0 || ne.Uint16(inline[8:]) != leafFlag || ne.Uint32(inline[12:]) != 0 {
		return fmt.Errorf("page %d: bucket %q has neither a root page nor an inline leaf page", id, key)
	}
	used, err := w.leaf(pending{bucket: kind, first: noKey, limit: noKey}, id, inline)
	if err == nil && used != len(inline) {
		err = fmt.Errorf("page %d: the inline page of bucket %q has %d bytes after its elements", id, key, len(inline)-used)
	}
	return err
}

// freePages returns the page numbers that the freelist page p (page id, with its
// overflow pages) lists, in the order it lists them. It fails when p is not a
// freelist, or when its count overruns it.
func freePages(id uint64, p []byte) ([]uint64, error) {
	ne := binary.NativeEndian
	if flags := ne.Uint16(p[8:]); flags != freelistFlag {
		return nil, fmt.Errorf("page %d has flags %#x where the freelist was expected", id, flags)
	}
	skip, count := uint64(0), uint64(ne.Uint16(p[10:]))
	if count == 0xFFFF {
		skip, count = 1, ne.Uint64(p[pageHeaderSize:])
	}
	if count > uint64(len(p)-pageHeaderSize)/8-skip {
		return nil, fmt.Errorf("page %d: %d free pages overrun the freelist's %d bytes", id, count, len(p))
	}
	frees := make([]uint64, count)
	for i := range frees {
		frees[i] = ne.Uint64(p[pageHeaderSize+(skip+uint64(i))*8:])
	}
	return frees, nil
}

// freelist checks the freelist page id and its page numbers, then that every page
// below the high water mark is in the tree, the freelist's own or free.
func (w *treeWalk) freelist(id uint64) error {
	if id == noFreelist {
		return nil // bbolt rebuilds a freelist it did not write; the files of this package have one
	}
	p, err := w.page(id, "freelist")
	if err != nil {
		return err
	}
	frees, err := freePages(id, p)
	if err != nil {
		return err
	}
	prev := uint64(1)
	for _, free := range frees {
		if free <= prev || free >= w.pages {
			return fmt.Errorf("free page %d, after %d, is out of order or outside the file's %d pages", free, prev, w.pages)
		}
		if err := w.mark(free, 0, "a free page"); err != nil {
			return err
		}
		prev = free
	}
	lost := 0
	first := uint64(0)
	for q := uint64(2); q < w.pages; q++ {
		if w.seen[q/64]&(1<<(q%64)) == 0 {
			if lost == 0 {
				first = q
			}
			lost++
		}
	}
	if lost > 0 {
		return fmt.Errorf("%d pages, the first %d, are neither in the page tree nor free", lost, first)
	}
	return nil
}
