package kubestore

import (
	"fmt"
	"testing"
)

// TestChunkCacheBound fills a cache with more chunks than it holds, touching some as it
// goes: it never holds more than its bytes, forgets the least recently used chunk first,
// and keeps no chunk larger than itself.
func TestChunkCacheBound(t *testing.T) {
	keys := func(n int) map[string]item {
		m := map[string]item{}
		for i := range n {
			m[fmt.Sprintf("k%03d", i)] = item{value: make([]byte, 100-4-itemBytes), ver: 1}
		}
		return m
	}
	ref := func(i int) chunkRef { return chunkRef{name: fmt.Sprintf("c.%d", i), sum: "s"} }
	c := newChunkCache(1000) // ten chunks of one key of 100 bytes
	for i := range 30 {
		c.put(ref(i), keys(1))
		if _, ok := c.get(ref(0)); !ok {
			t.Fatalf("after put %d the cache lost chunk 0, the one read after every put", i)
		}
		if c.size > c.max {
			t.Fatalf("after put %d the cache holds %d bytes, more than its %d", i, c.size, c.max)
		}
	}
	for i := 1; i < 30; i++ {
		_, ok := c.get(ref(i))
		if want := i >= 21; ok != want {
			t.Errorf("chunk %d cached = %v, want %v (the nine put last, beside chunk 0)", i, ok, want)
		}
	}
	if _, ok := c.get(chunkRef{name: "c.5", sum: "other"}); ok {
		t.Errorf("a chunk was found under its name with another SHA-256")
	}
	c.put(ref(99), keys(11))
	if _, ok := c.get(ref(99)); ok {
		t.Errorf("a chunk larger than the cache was kept")
	}
	none := newChunkCache(-1)
	none.put(ref(1), keys(1))
	if _, ok := none.get(ref(1)); ok {
		t.Errorf("the cache of ChunkCacheBytes < 0 kept a chunk")
	}
}
