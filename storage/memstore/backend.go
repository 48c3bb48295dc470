package memstore

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/itemops/itemops/storage/kv"
)

// NewBackend returns an empty [kv.Backend] in memory that refuses commits beyond limits
// (the zero Limits: none). [New] uses it without limits; tests of the engine and of
// drivers use it with small ones, to make the engine stage its batches. It is safe for
// concurrent use: reads share a lock, and a Commit holds it alone.
func NewBackend(limits kv.Limits) kv.Backend { return &backend{limits: limits} }

// A backend keeps its keys in order in blocks of at most maxBlock entries: a lookup is
// two binary searches, and an insert moves at most one block's entries, however many
// keys there are. A block keeps its keys and values in one byte slice and its entries as
// offsets into it, so the garbage collector has two pointers to follow per block, not two
// per key: a million stored records cost it next to nothing.
type backend struct {
	limits kv.Limits
	// mu guards blocks and version.
	mu      sync.RWMutex
	blocks  []*block // non-empty, each sorted, every key of one below every key of the next
	version kv.Version
}

type block struct {
	ents    []entry
	data    []byte // the bytes of ents' keys and values, and garbage
	garbage int    // bytes of data no entry refers to
}

// An entry locates a key and its value in its block's data.
type entry struct {
	koff, klen, voff, vlen uint32
	ver                    kv.Version
}

const maxBlock = 128

func (bl *block) key(i int) []byte {
	e := bl.ents[i]
	return bl.data[e.koff : e.koff+e.klen : e.koff+e.klen]
}

func (bl *block) value(i int) []byte {
	e := bl.ents[i]
	return bl.data[e.voff : e.voff+e.vlen : e.voff+e.vlen]
}

// add appends b to the block's data and returns its offset.
func (bl *block) add(b []byte) uint32 {
	off := len(bl.data)
	bl.data = append(bl.data, b...)
	return uint32(off)
}

// newBlock copies the entries of es, from block from, into a block of their own, whose
// data has room for spare bytes more: a block compacted because updates filled it with
// garbage gets room for as many bytes as it holds, so that the updates to come append
// without growing it until it is compacted again.
func newBlock(from *block, es []entry, spare int) *block {
	live := 0
	for _, e := range es {
		live += int(e.klen + e.vlen)
	}
	bl := &block{ents: make([]entry, len(es)), data: make([]byte, 0, live+spare)}
	for i, e := range es {
		bl.ents[i] = entry{klen: e.klen, vlen: e.vlen, ver: e.ver}
		bl.ents[i].koff = bl.add(from.data[e.koff : e.koff+e.klen])
		bl.ents[i].voff = bl.add(from.data[e.voff : e.voff+e.vlen])
	}
	return bl
}

// find returns the block and position of key, or where it would be inserted.
func (b *backend) find(key []byte) (blk, pos int, found bool) {
	blk, _ = slices.BinarySearchFunc(b.blocks, key, func(bl *block, k []byte) int {
		return bytes.Compare(bl.key(len(bl.ents)-1), k)
	})
	if blk == len(b.blocks) {
		if blk == 0 {
			return 0, 0, false
		}
		return blk - 1, len(b.blocks[blk-1].ents), false
	}
	bl := b.blocks[blk]
	pos, found = slices.BinarySearchFunc(bl.ents, key, func(e entry, k []byte) int {
		return bytes.Compare(bl.data[e.koff:e.koff+e.klen], k)
	})
	return blk, pos, found
}

func (b *backend) put(key, value []byte, ver kv.Version) {
	blk, pos, found := b.find(key)
	if len(b.blocks) == 0 {
		b.blocks = []*block{{}}
	}
	bl := b.blocks[blk]
	if found {
		e := &bl.ents[pos]
		if len(value) <= int(e.vlen) {
			// The new value fits where the old one is: write it there. No reader
			// holds the old bytes, since a reader's slices are valid only while its
			// Read holds the lock that this Commit holds alone.
			copy(bl.data[e.voff:e.voff+e.vlen], value)
			bl.garbage += int(e.vlen) - len(value)
			e.vlen, e.ver = uint32(len(value)), ver
		} else {
			bl.garbage += int(e.vlen)
			e.voff, e.vlen, e.ver = bl.add(value), uint32(len(value)), ver
		}
	} else {
		e := entry{klen: uint32(len(key)), vlen: uint32(len(value)), ver: ver}
		e.koff = bl.add(key)
		e.voff = bl.add(value)
		bl.ents = slices.Insert(bl.ents, pos, e)
	}
	switch {
	case len(bl.ents) > maxBlock:
		half := len(bl.ents) / 2
		b.blocks[blk] = newBlock(bl, bl.ents[:half], 0)
		b.blocks = slices.Insert(b.blocks, blk+1, newBlock(bl, bl.ents[half:], 0))
	case bl.garbage > len(bl.data)/2:
		b.blocks[blk] = newBlock(bl, bl.ents, len(bl.data)-bl.garbage)
	}
}

// deleteRange deletes key alone when end is nil, else every key in [key, end).
func (b *backend) deleteRange(key, end []byte) {
	blk, pos, found := b.find(key)
	if end == nil {
		if found {
			b.remove(blk, pos, pos+1)
		}
		return
	}
	for blk < len(b.blocks) {
		bl := b.blocks[blk]
		stop := pos
		for stop < len(bl.ents) && bytes.Compare(bl.key(stop), end) < 0 {
			stop++
		}
		if stop < len(bl.ents) {
			b.remove(blk, pos, stop)
			return
		}
		if !b.remove(blk, pos, stop) {
			blk++
		}
		pos = 0
	}
}

// remove deletes the entries [i, j) of block blk, and the block when that empties it,
// which it reports.
func (b *backend) remove(blk, i, j int) (removed bool) {
	bl := b.blocks[blk]
	for _, e := range bl.ents[i:j] {
		bl.garbage += int(e.klen + e.vlen)
	}
	bl.ents = slices.Delete(bl.ents, i, j)
	switch {
	case len(bl.ents) == 0:
		b.blocks = slices.Delete(b.blocks, blk, blk+1)
		return true
	case bl.garbage > len(bl.data)/2:
		b.blocks[blk] = newBlock(bl, bl.ents, 0) // deleted: no updates expected
	}
	return false
}

func (b *backend) Read(ctx context.Context, fn func(kv.Reader) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	return fn(reader{b})
}

type reader struct{ b *backend }

func (r reader) Get(ctx context.Context, key []byte) ([]byte, kv.Version, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	blk, pos, found := r.b.find(key)
	if !found {
		return nil, 0, nil
	}
	bl := r.b.blocks[blk]
	return bl.value(pos), bl.ents[pos].ver, nil
}

func (r reader) Scan(ctx context.Context, start, end []byte, fn func(key, value []byte, v kv.Version) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	blk, pos, _ := r.b.find(start)
	for n := 0; blk < len(r.b.blocks); blk, pos = blk+1, 0 {
		bl := r.b.blocks[blk]
		for i := pos; i < len(bl.ents); i++ {
			k := bl.key(i)
			if len(end) > 0 && bytes.Compare(k, end) >= 0 {
				return nil
			}
			if n++; n%1024 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			if err := fn(k, bl.value(i), bl.ents[i].ver); err != nil {
				return err
			}
		}
	}
	return nil
}

func (b *backend) Commit(ctx context.Context, conds []kv.Condition, writes []kv.Write) error {
	if err := b.limits.Check(conds, writes); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, c := range conds {
		var ver kv.Version
		if blk, pos, found := b.find(c.Key); found {
			ver = b.blocks[blk].ents[pos].ver
		}
		if ver != c.Version {
			return fmt.Errorf("key %q is at version %d, not %d: %w", c.Key, ver, c.Version, kv.ErrConditionFailed)
		}
	}
	b.version++
	for _, w := range writes {
		switch {
		case !w.Delete:
			b.put(w.Key, w.Value, b.version)
		case len(w.End) > 0:
			b.deleteRange(w.Key, w.End)
		default:
			b.deleteRange(w.Key, nil)
		}
	}
	return nil
}

func (b *backend) Limits() kv.Limits { return b.limits }
