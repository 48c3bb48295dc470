package memstore

import (
	"context"
	"testing"

	"github.com/itemops/itemops/storage/kv"
)

// TestUpdateInPlace checks that a value rewritten with one no longer than it is written
// where it was: a status update a pass makes of every operation adds no bytes to the
// block, so a steady workload does not grow memstore's heap. A longer value is appended.
func TestUpdateInPlace(t *testing.T) {
	ctx := context.Background()
	b := NewBackend(kv.Limits{}).(*backend)
	write := func(v string) {
		t.Helper()
		if err := b.Commit(ctx, nil, []kv.Write{{Key: []byte("k"), Value: []byte(v)}}); err != nil {
			t.Fatal(err)
		}
	}
	write("value-0000")
	size := len(b.blocks[0].data)
	for _, v := range []string{"value-0001", "value-0002", "value-3"} {
		write(v)
		if got := len(b.blocks[0].data); got != size {
			t.Fatalf("after writing %q over a value at least as long, the block holds %d bytes, was %d", v, got, size)
		}
		var got []byte
		if err := b.Read(ctx, func(r kv.Reader) error {
			got, _, _ = r.Get(ctx, []byte("k"))
			got = append([]byte(nil), got...)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if string(got) != v {
			t.Fatalf("read %q after writing %q", got, v)
		}
	}
	write("value-0004") // longer than "value-3", the value it replaces
	if got := len(b.blocks[0].data); got <= size {
		t.Fatalf("a longer value was not appended: the block holds %d bytes, was %d", got, size)
	}
}
