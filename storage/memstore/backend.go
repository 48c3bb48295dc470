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
// keys there are.
type backend struct {
	limits kv.Limits
	// mu guards blocks and version.
	mu      sync.RWMutex
	blocks  [][]entry // non-empty, each sorted, every key of one below every key of the next
	version kv.Version
}

type entry struct {
	key   string
	value []byte // never changed once stored: a write stores a new slice
	ver   kv.Version
}

const maxBlock = 128

// find returns the block and position of key, or where it would be inserted.
func (b *backend) find(key []byte) (blk, pos int, found bool) {
	blk, _ = slices.BinarySearchFunc(b.blocks, key, func(es []entry, k []byte) int {
		return cmpKey(es[len(es)-1].key, k)
	})
	if blk == len(b.blocks) {
		if blk == 0 {
			return 0, 0, false
		}
		return blk - 1, len(b.blocks[blk-1]), false
	}
	pos, found = slices.BinarySearchFunc(b.blocks[blk], key, func(e entry, k []byte) int { return cmpKey(e.key, k) })
	return blk, pos, found
}

func cmpKey(a string, b []byte) int { return bytes.Compare([]byte(a), b) }

func (b *backend) put(key, value []byte, ver kv.Version) {
	blk, pos, found := b.find(key)
	if found {
		b.blocks[blk][pos] = entry{key: string(key), value: bytes.Clone(value), ver: ver}
		return
	}
	if len(b.blocks) == 0 {
		b.blocks = [][]entry{nil}
	}
	es := slices.Insert(b.blocks[blk], pos, entry{key: string(key), value: bytes.Clone(value), ver: ver})
	if len(es) <= maxBlock {
		b.blocks[blk] = es
		return
	}
	half := len(es) / 2
	b.blocks[blk] = slices.Clip(es[:half])
	b.blocks = slices.Insert(b.blocks, blk+1, slices.Clone(es[half:]))
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
		es := b.blocks[blk]
		stop := pos
		for stop < len(es) && cmpKey(es[stop].key, end) < 0 {
			stop++
		}
		if stop < len(es) {
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
	es := slices.Delete(b.blocks[blk], i, j)
	if len(es) == 0 {
		b.blocks = slices.Delete(b.blocks, blk, blk+1)
		return true
	}
	b.blocks[blk] = es
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
	blk, pos, found := r.b.find(key)
	if !found {
		return nil, 0, ctx.Err()
	}
	e := r.b.blocks[blk][pos]
	return e.value, e.ver, ctx.Err()
}

func (r reader) Scan(ctx context.Context, start, end []byte, fn func(key, value []byte, v kv.Version) error) error {
	blk, pos, _ := r.b.find(start)
	for n := 0; blk < len(r.b.blocks); blk, pos = blk+1, 0 {
		for _, e := range r.b.blocks[blk][pos:] {
			if len(end) > 0 && cmpKey(e.key, end) >= 0 {
				return nil
			}
			if n++; n%1024 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			if err := fn([]byte(e.key), e.value, e.ver); err != nil {
				return err
			}
		}
	}
	return nil
}

func (b *backend) Commit(ctx context.Context, conds []kv.Condition, writes []kv.Write) error {
	if err := b.check(conds, writes); err != nil {
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
			ver = b.blocks[blk][pos].ver
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

// check refuses a commit beyond the backend's limits.
func (b *backend) check(conds []kv.Condition, writes []kv.Write) error {
	n := 0
	for _, c := range conds {
		n += len(c.Key)
	}
	for _, w := range writes {
		n += len(w.Key) + len(w.Value) + len(w.End)
	}
	if (b.limits.MaxOps > 0 && len(conds)+len(writes) > b.limits.MaxOps) || (b.limits.MaxBytes > 0 && n > b.limits.MaxBytes) {
		return fmt.Errorf("commit of %d operations and %d bytes, limits %+v: %w", len(conds)+len(writes), n, b.limits, kv.ErrTooLarge)
	}
	return nil
}

func (b *backend) Limits() kv.Limits { return b.limits }
