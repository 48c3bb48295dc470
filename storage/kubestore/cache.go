package kubestore

import (
	"container/list"
	"sync"
)

// itemBytes is what the cache counts for one key beside the bytes of its key and value:
// the map entry and the item.
const itemBytes = 64

// A chunkCache keeps the decoded keys of the chunks a Store read or created last, up to
// a number of bytes, and forgets the least recently used first. A chunk is never
// changed, and a run's object names each of its chunks with the SHA-256 of its data, so
// an entry is keyed by both: a chunk found under the name and SHA-256 a run's object
// gives holds exactly the keys that object names. Every entry was checked when it
// entered (its data against that SHA-256, decoded in full) or was made by this Store
// from the keys it wrote. The keys of an entry are shared and must not be changed. A
// chunkCache is safe for concurrent use; a nil *chunkCache keeps nothing.
type chunkCache struct {
	max int

	mu    sync.Mutex // guards the fields below
	size  int
	order *list.List               // of *cacheEntry, most recently used first
	index map[string]*list.Element // by cacheKey
}

type cacheEntry struct {
	key  string
	keys map[string]item
	size int
}

// newChunkCache returns a cache of at most max bytes, or nil, which keeps nothing, when
// max is less than 1.
func newChunkCache(max int) *chunkCache {
	if max < 1 {
		return nil
	}
	return &chunkCache{max: max, order: list.New(), index: map[string]*list.Element{}}
}

// cacheKey is the key of the chunk that ref names.
func cacheKey(ref chunkRef) string { return ref.name + "/" + ref.sum }

// get returns the keys of the chunk that ref names, or false when the cache does not
// hold it.
func (c *chunkCache) get(ref chunkRef) (map[string]item, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.index[cacheKey(ref)]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*cacheEntry).keys, true
}

// put adds keys as the chunk that ref names, and forgets the least recently used
// chunks until the cache holds at most its bytes. A chunk larger than the whole cache is
// not kept.
func (c *chunkCache) put(ref chunkRef, keys map[string]item) {
	if c == nil {
		return
	}
	size := 0
	for k, it := range keys {
		size += len(k) + len(it.value) + itemBytes
	}
	if size > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	key := cacheKey(ref)
	if e, ok := c.index[key]; ok {
		c.order.MoveToFront(e)
		return
	}
	c.index[key] = c.order.PushFront(&cacheEntry{key: key, keys: keys, size: size})
	c.size += size
	for c.size > c.max {
		last := c.order.Back()
		e := last.Value.(*cacheEntry)
		c.order.Remove(last)
		delete(c.index, e.key)
		c.size -= e.size
	}
}
