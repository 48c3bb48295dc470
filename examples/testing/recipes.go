// Package recipes holds the code that docs/testing.md tests, and its tests are the
// recipes the guide shows: a Store decorator checked by storetest, a v2 plugin checked
// by adaptertest, a Monitor driven by a fake clock, and table-driven phase decisions.
// Every Go block of the guide is in the tests of this package (TestGuideCodeBlocks).
package recipes

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/itemops/itemops/adapters"
	"github.com/itemops/itemops/clock"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/decorate"
)

// A WriteCounter counts the writes that go through the stores it decorates: the kind of
// decorator (metrics, tracing) a user writes and must keep faithful to the storage
// contract. It builds them with decorate.Store, so a decorated store keeps the
// optional abilities of the store it wraps, operations.RunStarter and
// operations.RunClaimer among them. A WriteCounter is safe for concurrent use; its zero value counts from zero.
type WriteCounter struct {
	writes atomic.Int64
}

// Wrap returns s, decorated to count its writes into c.
func (c *WriteCounter) Wrap(s operations.Store) operations.Store {
	return decorate.Store(s, func(ctx context.Context, call decorate.Call, do func(context.Context) error) error {
		if call.Write {
			c.writes.Add(1)
		}
		return do(ctx)
	})
}

// Writes returns how many writes went through the stores c decorates.
func (c *WriteCounter) Writes() int64 { return c.writes.Load() }

// Snapshotter is a v2 backup item action that makes a snapshot of each volume claim in
// the background; each snapshot takes Took by its Clock.
type Snapshotter struct {
	Clock clock.Clock
	Took  time.Duration

	// startedMu guards started and seq.
	startedMu sync.Mutex
	started   map[string]time.Time
	seq       int
}

var _ adapters.BackupItemAction[string] = (*Snapshotter)(nil)

func (*Snapshotter) Name() string { return "example.io/snapshotter" }

func (*Snapshotter) AppliesTo(ctx context.Context) (adapters.ResourceSelector, error) {
	return adapters.ResourceSelector{IncludedResources: []string{"persistentvolumeclaims"}}, ctx.Err()
}

func (s *Snapshotter) Execute(ctx context.Context, item runtime.Unstructured, _ string) (runtime.Unstructured, []operations.ResourceIdentifier, string, []operations.ResourceIdentifier, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, "", nil, err
	}
	s.startedMu.Lock()
	defer s.startedMu.Unlock()
	if s.started == nil {
		s.started = map[string]time.Time{}
	}
	s.seq++
	id := fmt.Sprintf("snapshot-%d", s.seq)
	s.started[id] = s.Clock.Now()
	return item, nil, id, nil, nil
}

func (s *Snapshotter) Progress(ctx context.Context, id string, _ string) (operations.Progress, error) {
	if err := ctx.Err(); err != nil {
		return operations.Progress{}, err
	}
	s.startedMu.Lock()
	start, ok := s.started[id]
	s.startedMu.Unlock()
	if !ok {
		return operations.Progress{}, operations.InvalidOperationID(s.Name(), id)
	}
	done := min(s.Clock.Now().Sub(start), s.Took)
	return operations.Progress{Completed: done == s.Took, NCompleted: int64(done / time.Millisecond), NTotal: int64(s.Took / time.Millisecond),
		OperationUnits: "ms", Started: start, Updated: start.Add(done)}, nil
}

func (*Snapshotter) Cancel(ctx context.Context, _ string, _ string) error { return ctx.Err() }
