package progress_test

import (
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/progress"
)

// op is one call on a Counter, for table tests.
type op func(c *progress.Counter)

func collected(n int) op         { return func(c *progress.Counter) { c.Collected(n) } }
func additional(n int) op        { return func(c *progress.Counter) { c.Additional(n) } }
func setPass(p progress.Pass) op { return func(c *progress.Counter) { c.SetPass(p) } }
func repeat(n int, o op) op {
	return func(c *progress.Counter) {
		for range n {
			o(c)
		}
	}
}
func done(c *progress.Counter)    { c.Done() }
func skipped(c *progress.Counter) { c.Skipped() }

// figures are what a status shows.
type figures struct {
	Pass                                      progress.Pass
	TotalItems, ItemsRestored, ItemsBackedUp  int
	Processed, Remaining                      int
	Collected, Done, Skipped, AdditionalItems int
}

func figuresOf(s progress.Snapshot) figures {
	return figures{
		Pass: s.Pass, TotalItems: s.TotalItems(), ItemsRestored: s.ItemsRestored(), ItemsBackedUp: s.ItemsBackedUp(),
		Processed: s.Processed(), Remaining: s.Remaining(),
		Collected: s.Collected, Done: s.Done, Skipped: s.Skipped, AdditionalItems: s.Additional,
	}
}

func TestCounterArithmetic(t *testing.T) {
	tests := []struct {
		name string
		ops  []op
		want figures
	}{
		{
			name: "zero counter is empty and collecting",
			want: figures{Pass: progress.PassCollecting},
		},
		{
			name: "pass one only grows the total",
			ops:  []op{collected(100), collected(40)},
			want: figures{TotalItems: 140, Remaining: 140, Collected: 140},
		},
		{
			name: "the design's example: 100 of 140 restored",
			ops:  []op{collected(140), setPass(progress.PassProcessing), repeat(100, done)},
			want: figures{
				Pass: progress.PassProcessing, TotalItems: 140, ItemsRestored: 100, ItemsBackedUp: 100,
				Processed: 100, Remaining: 40, Collected: 140, Done: 100,
			},
		},
		{
			name: "plugin additional items raise the total",
			ops:  []op{collected(10), setPass(progress.PassProcessing), repeat(4, done), additional(3)},
			want: figures{
				Pass: progress.PassProcessing, TotalItems: 13, ItemsRestored: 7, ItemsBackedUp: 7,
				Processed: 4, Remaining: 6, Collected: 10, Done: 4, AdditionalItems: 3,
			},
		},
		{
			name: "a skipped item lowers the total",
			ops:  []op{collected(10), repeat(3, done), repeat(2, skipped)},
			want: figures{
				TotalItems: 8, ItemsRestored: 3, ItemsBackedUp: 3,
				Processed: 5, Remaining: 5, Collected: 10, Done: 3, Skipped: 2,
			},
		},
		{
			name: "an additional item that is also collected counts once",
			// A plugin restores item x early; when pass two reaches x it is skipped.
			ops: []op{collected(3), additional(1), done, skipped, done, setPass(progress.PassDone)},
			want: figures{
				Pass: progress.PassDone, TotalItems: 3, ItemsRestored: 3, ItemsBackedUp: 3,
				Processed: 3, Collected: 3, Done: 2, Skipped: 1, AdditionalItems: 1,
			},
		},
		{
			name: "finished with failures: restored equals total",
			ops:  []op{collected(5), repeat(3, done), repeat(2, skipped), setPass(progress.PassDone)},
			want: figures{
				Pass: progress.PassDone, TotalItems: 3, ItemsRestored: 3, ItemsBackedUp: 3,
				Processed: 5, Collected: 5, Done: 3, Skipped: 2,
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var c progress.Counter
			for _, o := range tc.ops {
				o(&c)
			}
			if diff := cmp.Diff(tc.want, figuresOf(c.Snapshot())); diff != "" {
				t.Errorf("Snapshot() figures (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCounterSetPassOnlyMovesForward(t *testing.T) {
	tests := []struct {
		name  string
		calls []progress.Pass
		want  progress.Pass
	}{
		{name: "none", want: progress.PassCollecting},
		{name: "forward", calls: []progress.Pass{progress.PassProcessing}, want: progress.PassProcessing},
		{name: "skip a pass", calls: []progress.Pass{progress.PassDone}, want: progress.PassDone},
		{name: "back is ignored", calls: []progress.Pass{progress.PassDone, progress.PassProcessing}, want: progress.PassDone},
		{name: "back to the first is ignored", calls: []progress.Pass{progress.PassProcessing, progress.PassCollecting}, want: progress.PassProcessing},
		{name: "repeat is harmless", calls: []progress.Pass{progress.PassProcessing, progress.PassProcessing}, want: progress.PassProcessing},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var c progress.Counter
			for _, p := range tc.calls {
				c.SetPass(p)
			}
			if got := c.Snapshot().Pass; got != tc.want {
				t.Errorf("after SetPass(%v): Pass = %v, want %v", tc.calls, got, tc.want)
			}
		})
	}
}

func TestPassString(t *testing.T) {
	tests := []struct {
		pass progress.Pass
		want string
	}{
		{progress.PassCollecting, "collecting"},
		{progress.PassProcessing, "processing"},
		{progress.PassDone, "done"},
		{progress.Pass(7), "Pass(7)"},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, tc.pass.String())
	}
}

func TestSnapshotSub(t *testing.T) {
	var c progress.Counter
	c.Collected(50)
	before := c.Snapshot()
	c.SetPass(progress.PassProcessing)
	for range 7 {
		c.Done()
	}
	c.Skipped()
	c.Additional(2)
	after := c.Snapshot()

	d := after.Sub(before)
	want := progress.Snapshot{Pass: progress.PassProcessing, Done: 7, Skipped: 1, Additional: 2}
	if diff := cmp.Diff(want, d); diff != "" {
		t.Errorf("Sub (-want +got):\n%s", diff)
	}
	require.Equal(t, after.TotalItems()-before.TotalItems(), d.TotalItems(), "delta of TotalItems")
	require.Equal(t, after.ItemsRestored()-before.ItemsRestored(), d.ItemsRestored(), "delta of ItemsRestored")
	require.Equal(t, "processing: 9/51 items", after.String())
}

// TestCounterConcurrent counts from many goroutines while another takes snapshots: the
// final figures are exact and no snapshot shows more restored than the total, more
// processed than collected, or the done pass before the last counts.
func TestCounterConcurrent(t *testing.T) {
	const workers, perWorker = 8, 2000
	var c progress.Counter
	c.Collected(workers * perWorker)
	c.SetPass(progress.PassProcessing)

	stop := make(chan struct{})
	var bad []progress.Snapshot
	var readerDone sync.WaitGroup
	readerDone.Add(1)
	go func() {
		defer readerDone.Done()
		for {
			s := c.Snapshot()
			if s.ItemsRestored() > s.TotalItems() || s.Remaining() < 0 ||
				(s.Pass == progress.PassDone && s.Processed() != workers*perWorker) {
				bad = append(bad, s)
			}
			select {
			case <-stop:
				return
			default:
			}
		}
	}()

	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				switch {
				case i%10 == 0:
					c.Skipped()
				case i%100 == 1:
					c.Additional(1)
					c.Done()
				default:
					c.Done()
				}
			}
		}()
	}
	wg.Wait()
	c.SetPass(progress.PassDone)
	close(stop)
	readerDone.Wait()

	require.Empty(t, bad, "inconsistent snapshots")
	s := c.Snapshot()
	skips := workers * (perWorker / 10)
	adds := workers * (perWorker / 100)
	want := figures{
		Pass: progress.PassDone, TotalItems: workers*perWorker - skips + adds,
		ItemsRestored: workers*perWorker - skips + adds, ItemsBackedUp: workers*perWorker - skips + adds,
		Processed: workers * perWorker, Collected: workers * perWorker,
		Done: workers*perWorker - skips, Skipped: skips, AdditionalItems: adds,
	}
	if diff := cmp.Diff(want, figuresOf(s)); diff != "" {
		t.Errorf("final figures (-want +got):\n%s", diff)
	}
}

func TestCounterDoesNotAllocate(t *testing.T) {
	var c progress.Counter
	allocs := testing.AllocsPerRun(1000, func() {
		c.Collected(1)
		c.Done()
		c.Skipped()
		c.Additional(1)
		c.SetPass(progress.PassProcessing)
		_ = c.Snapshot()
	})
	require.Zero(t, allocs, "allocations per run of the counting methods")
}
