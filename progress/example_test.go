package progress_test

import (
	"context"
	"fmt"
	"time"

	"github.com/itemops/itemops/progress"
)

// A restore counts its collected items, then restores them; a plugin's additional item
// raises the total and an item that already exists lowers it.
func ExampleCounter() {
	var c progress.Counter
	c.Collected(140) // pass one: the size of the collection
	c.SetPass(progress.PassProcessing)
	for range 100 {
		c.Done()
	}
	c.Additional(2) // a plugin restored two more items
	c.Skipped()     // one collected item already existed
	s := c.Snapshot()
	fmt.Println(s.ItemsRestored(), s.TotalItems(), s.Pass)
	fmt.Println(s)
	// Output:
	// 102 141 processing
	// processing: 102/141 items
}

// Sub gives what changed between two snapshots.
func ExampleSnapshot_Sub() {
	var c progress.Counter
	c.Collected(10)
	before := c.Snapshot()
	c.Done()
	c.Done()
	d := c.Snapshot().Sub(before)
	fmt.Println(d.ItemsRestored(), d.TotalItems())
	// Output: 2 0
}

// A Reporter hands snapshots to a sink, such as a function that patches the Restore's
// status, and makes a final delivery on Close.
func ExampleReporter() {
	var c progress.Counter
	patch := func(ctx context.Context, s progress.Snapshot) error {
		fmt.Printf("status.progress: itemsRestored=%d totalItems=%d (%s)\n", s.ItemsRestored(), s.TotalItems(), s.Pass)
		return nil
	}
	r := progress.NewReporter(&c, patch, progress.WithInterval(time.Hour))
	c.Collected(3)
	c.SetPass(progress.PassProcessing)
	for range 3 {
		c.Done()
	}
	c.SetPass(progress.PassDone)
	if err := r.Close(); err != nil {
		fmt.Println(err)
	}
	// Output: status.progress: itemsRestored=3 totalItems=3 (done)
}
