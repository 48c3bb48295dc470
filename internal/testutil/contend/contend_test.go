package contend_test

import (
	"sync"
	"testing"
	"time"

	"github.com/itemops/itemops/internal/testutil/contend"
)

// Writes hands each i from 1 to b.N to exactly one call, spreads the calls over the
// goroutines it was asked for, and reports the longest call.
func TestWrites(t *testing.T) {
	const writers = 4
	var (
		mu    sync.Mutex
		calls map[int]int
		by    map[int]bool
		n     int
	)
	res := testing.Benchmark(func(b *testing.B) {
		mu.Lock()
		calls, by, n = map[int]int{}, map[int]bool{}, b.N
		mu.Unlock()
		contend.Writes(b, writers, func(w, i int) error {
			time.Sleep(100 * time.Microsecond) // so that every goroutine gets some calls
			mu.Lock()
			defer mu.Unlock()
			calls[i]++
			by[w] = true
			return nil
		})
	})
	for i := 1; i <= n; i++ {
		if calls[i] != 1 {
			t.Errorf("write %d made %d times, want once", i, calls[i])
		}
	}
	if len(calls) != n {
		t.Errorf("%d distinct writes made, want %d", len(calls), n)
	}
	for w := range by {
		if w < 0 || w >= writers {
			t.Errorf("write made by goroutine %d, want 0 to %d", w, writers-1)
		}
	}
	if n >= 100 && len(by) != writers {
		t.Errorf("writes made by %d goroutines, want %d", len(by), writers)
	}
	if got := res.Extra["worst-ms"]; got < 0.1 {
		t.Errorf("worst-ms = %v, want at least the 0.1 ms every write sleeps", got)
	}
}
