package boltstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	bolt "go.etcd.io/bbolt"
)

// bbolt's page layout (the file format of bbolt 1.x, in the machine's byte order): a
// page header of 16 bytes (id uint64, flags uint16, count uint16, overflow uint32),
// then count elements of 16 bytes each. A branch element is (pos uint32, ksize uint32,
// pgid uint64); a leaf element is (flags uint32, pos uint32, ksize uint32, vsize uint32).
// pos counts from the element's own first byte. A leaf element whose flags hold
// bucketFlag is a nested bucket: its value starts with (root pgid uint64, sequence
// uint64), and a root of 0 means an inline bucket, whose leaf page follows in the value.
const (
	pageHeaderSize = 16
	elementSize    = 16
	branchFlag     = 0x01
	leafFlag       = 0x02
	bucketFlag     = 0x01
	bucketHeader   = 16
)

// checkTree walks the page tree that tx reads, from the root bucket through every
// branch, leaf and nested bucket, reading the pages from f (the file itself) rather
// than through bbolt. It fails, with an error wrapping [ErrCorrupt], at the first page
// that bbolt could not safely follow: a page number outside the file, a page that is
// neither a branch nor a leaf, elements that overrun their page, or a page reached twice.
// bbolt checks none of these before it follows a page; on a page reached twice, which is
// a cycle, its cursors descend forever and use up memory or the stack, which no recover
// can stop. checkTree itself keeps one bit per page and a stack of page numbers, and
// reads each page once. A done ctx stops it, within 1024 pages, with ctx.Err().
func checkTree(ctx context.Context, tx *bolt.Tx, f io.ReaderAt) error {
	w := treeWalk{
		f:        f,
		pageSize: uint64(tx.DB().Info().PageSize),
	}
	w.pages = uint64(tx.Size()) / w.pageSize
	w.seen = make([]uint64, (w.pages+63)/64)
	w.stack = append(w.stack, uint64(tx.Cursor().Bucket().RootPage()))
	for n := 0; len(w.stack) > 0; n++ {
		if n%checkEvery == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		id := w.stack[len(w.stack)-1]
		w.stack = w.stack[:len(w.stack)-1]
		if err := w.visit(id); err != nil {
			return fmt.Errorf("the file is damaged (in its page tree, %v): %w", err, ErrCorrupt)
		}
	}
	return nil
}

// treeWalk is the state of checkTree: the pages seen and the pages still to visit.
type treeWalk struct {
	f        io.ReaderAt
	pageSize uint64
	pages    uint64   // the number of pages the file holds, as the transaction sees it
	seen     []uint64 // a bit per page
	stack    []uint64 // pages to visit
	buf      []byte
}

// visit reads page id (with its overflow pages), checks it and pushes the pages it
// points to.
func (w *treeWalk) visit(id uint64) error {
	if id < 2 || id >= w.pages {
		return fmt.Errorf("page %d is outside the file's %d pages", id, w.pages)
	}
	p := w.bytes(w.pageSize)
	if err := w.read(id, p); err != nil {
		return err
	}
	if got := binary.NativeEndian.Uint64(p); got != id {
		return fmt.Errorf("page %d says it is page %d", id, got)
	}
	overflow := uint64(binary.NativeEndian.Uint32(p[12:]))
	if overflow >= w.pages-id {
		return fmt.Errorf("page %d runs %d pages past its own, beyond the file's %d pages", id, overflow, w.pages)
	}
	for q := id; q <= id+overflow; q++ {
		if w.seen[q/64]&(1<<(q%64)) != 0 {
			return fmt.Errorf("page %d is reached twice (a cycle, or two parents)", q)
		}
		w.seen[q/64] |= 1 << (q % 64)
	}
	if overflow > 0 {
		p = w.bytes((overflow + 1) * w.pageSize)
		if err := w.read(id, p); err != nil {
			return err
		}
	}
	switch flags := binary.NativeEndian.Uint16(p[8:]); flags {
	case branchFlag:
		return w.branch(id, p)
	case leafFlag:
		return w.leaf(id, p)
	default:
		return fmt.Errorf("page %d has flags %#x where a branch or leaf page was expected", id, flags)
	}
}

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

// elements returns the number of elements of page p, checking that they fit in it.
func elements(id uint64, p []byte) (int, error) {
	if len(p) < pageHeaderSize {
		return 0, fmt.Errorf("page %d: %d bytes, shorter than a page header", id, len(p))
	}
	count := int(binary.NativeEndian.Uint16(p[10:]))
	if pageHeaderSize+count*elementSize > len(p) {
		return 0, fmt.Errorf("page %d: %d elements overrun its %d bytes", id, count, len(p))
	}
	return count, nil
}

// inPage checks that the n bytes at off+pos, the key or value of the element at off,
// lie within page p.
func inPage(id uint64, p []byte, off int, pos, n uint64) error {
	if uint64(off)+pos+n > uint64(len(p)) {
		return fmt.Errorf("page %d: the element at byte %d points past the page", id, off)
	}
	return nil
}

func (w *treeWalk) branch(id uint64, p []byte) error {
	count, err := elements(id, p)
	if err != nil {
		return err
	}
	if count == 0 {
		return fmt.Errorf("page %d: a branch page without elements", id)
	}
	for i := 0; i < count; i++ {
		off := pageHeaderSize + i*elementSize
		pos, ksize := binary.NativeEndian.Uint32(p[off:]), binary.NativeEndian.Uint32(p[off+4:])
		if err := inPage(id, p, off, uint64(pos), uint64(ksize)); err != nil {
			return err
		}
		w.stack = append(w.stack, binary.NativeEndian.Uint64(p[off+8:]))
	}
	return nil
}

// leaf checks the leaf page p (a page of the file, or the inline page of a bucket
// within page id) and pushes the root pages of the buckets it holds.
func (w *treeWalk) leaf(id uint64, p []byte) error {
	count, err := elements(id, p)
	if err != nil {
		return err
	}
	for i := 0; i < count; i++ {
		off := pageHeaderSize + i*elementSize
		flags := binary.NativeEndian.Uint32(p[off:])
		pos := uint64(binary.NativeEndian.Uint32(p[off+4:]))
		ksize := uint64(binary.NativeEndian.Uint32(p[off+8:]))
		vsize := uint64(binary.NativeEndian.Uint32(p[off+12:]))
		if err := inPage(id, p, off, pos, ksize+vsize); err != nil {
			return err
		}
		if flags&bucketFlag == 0 {
			continue
		}
		v := p[uint64(off)+pos+ksize:][:vsize]
		if len(v) < bucketHeader {
			return fmt.Errorf("page %d: a bucket value of %d bytes", id, len(v))
		}
		if root := binary.NativeEndian.Uint64(v); root != 0 {
			w.stack = append(w.stack, root)
			continue
		}
		inline := v[bucketHeader:]
		if len(inline) < pageHeaderSize || binary.NativeEndian.Uint16(inline[8:]) != leafFlag {
			return fmt.Errorf("page %d: an inline bucket without a leaf page", id)
		}
		// The inline page is a strict part of p, so this recursion ends.
		if err := w.leaf(id, inline); err != nil {
			return err
		}
	}
	return nil
}
