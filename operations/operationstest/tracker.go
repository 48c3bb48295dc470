package operationstest

import (
	"context"
	"fmt"
	"sync"

	"github.com/itemops/itemops/operations"
)

// A Tracker is a scriptable operations.Tracker that counts its calls. ProgressFunc and
// CancelFunc, when set, answer the calls; unset, Progress reports an operation still
// running with no progress, and Cancel returns nil. It is safe for concurrent use as long
// as the funcs are; set them before the first call.
type Tracker struct {
	ProgressFunc func(ctx context.Context, op operations.Operation) (operations.Progress, error)
	CancelFunc   func(ctx context.Context, op operations.Operation) error

	mu       sync.Mutex // guards the counters
	progress map[string]int
	cancel   map[string]int
}

var _ operations.Tracker = (*Tracker)(nil)

// Progress counts the call and answers with ProgressFunc.
func (t *Tracker) Progress(ctx context.Context, op operations.Operation) (operations.Progress, error) {
	t.count(&t.progress, op.ID)
	if t.ProgressFunc == nil {
		return operations.Progress{}, nil
	}
	return t.ProgressFunc(ctx, op)
}

// Cancel counts the call and answers with CancelFunc.
func (t *Tracker) Cancel(ctx context.Context, op operations.Operation) error {
	t.count(&t.cancel, op.ID)
	if t.CancelFunc == nil {
		return nil
	}
	return t.CancelFunc(ctx, op)
}

func (t *Tracker) count(m *map[string]int, id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if *m == nil {
		*m = make(map[string]int)
	}
	(*m)[id]++
}

// ProgressCalls returns how many times Progress was called for operation id.
func (t *Tracker) ProgressCalls(id string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.progress[id]
}

// CancelCalls returns how many times Cancel was called for operation id.
func (t *Tracker) CancelCalls(id string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cancel[id]
}

// Resolver returns an operations.Resolver that finds trackers by action name in
// trackers, and fails for any other name. The map must not change afterwards.
func Resolver(trackers map[string]operations.Tracker) operations.Resolver {
	return operations.ResolverFunc(func(action string) (operations.Tracker, error) {
		t, ok := trackers[action]
		if !ok {
			return nil, fmt.Errorf("no plugin registered as %q", action)
		}
		return t, nil
	})
}
