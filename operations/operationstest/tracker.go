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

	calls calls
}

var _ operations.Tracker = (*Tracker)(nil)

// Progress counts the call and answers with ProgressFunc.
func (t *Tracker) Progress(ctx context.Context, op operations.Operation) (operations.Progress, error) {
	t.calls.count(&t.calls.progress, op.ID)
	if t.ProgressFunc == nil {
		return operations.Progress{}, nil
	}
	return t.ProgressFunc(ctx, op)
}

// Cancel counts the call and answers with CancelFunc.
func (t *Tracker) Cancel(ctx context.Context, op operations.Operation) error {
	t.calls.count(&t.calls.cancel, op.ID)
	if t.CancelFunc == nil {
		return nil
	}
	return t.CancelFunc(ctx, op)
}

// ProgressCalls returns how many times Progress was called for operation id.
func (t *Tracker) ProgressCalls(id string) int { return t.calls.get(&t.calls.progress, id) }

// CancelCalls returns how many times Cancel was called for operation id.
func (t *Tracker) CancelCalls(id string) int { return t.calls.get(&t.calls.cancel, id) }

// calls counts the Progress and Cancel calls of each operation ID. Its zero value counts
// none; it is safe for concurrent use.
type calls struct {
	mu       sync.Mutex // guards the maps
	progress map[string]int
	cancel   map[string]int
}

// count adds a call of id to *m, one of c's maps.
func (c *calls) count(m *map[string]int, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if *m == nil {
		*m = make(map[string]int)
	}
	(*m)[id]++
}

// get returns the count of id in *m; m points to one of c's maps, read under c.mu.
func (c *calls) get(m *map[string]int, id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return (*m)[id]
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

// A Counter is an operations.Resolver that resolves plugins through Resolver (an
// adapters.Registry, say) and counts the Progress and Cancel calls of the trackers it
// returns, by operation ID, as [Tracker] counts its own: give it to the Monitor in
// place of Resolver to see what the Monitor asked of real plugins. A name Resolver
// cannot resolve fails as Resolver fails it. A Counter is safe for concurrent use as far
// as Resolver is; set Resolver before the first call.
type Counter struct {
	Resolver operations.Resolver

	calls calls
}

var _ operations.Resolver = (*Counter)(nil)

// Resolve resolves action through c.Resolver and returns its tracker, counting.
func (c *Counter) Resolve(action string) (operations.Tracker, error) {
	if c.Resolver == nil {
		return nil, fmt.Errorf("no plugin registered as %q: the Counter has no Resolver", action)
	}
	t, err := c.Resolver.Resolve(action)
	if err != nil {
		return nil, err
	}
	return counted{t: t, calls: &c.calls}, nil
}

// ProgressCalls returns how many times Progress was called for operation id, through
// the trackers c resolved.
func (c *Counter) ProgressCalls(id string) int { return c.calls.get(&c.calls.progress, id) }

// CancelCalls returns how many times Cancel was called for operation id, through the
// trackers c resolved.
func (c *Counter) CancelCalls(id string) int { return c.calls.get(&c.calls.cancel, id) }

// counted is a tracker that a Counter resolved.
type counted struct {
	t     operations.Tracker
	calls *calls
}

func (c counted) Progress(ctx context.Context, op operations.Operation) (operations.Progress, error) {
	c.calls.count(&c.calls.progress, op.ID)
	return c.t.Progress(ctx, op)
}

func (c counted) Cancel(ctx context.Context, op operations.Operation) error {
	c.calls.count(&c.calls.cancel, op.ID)
	return c.t.Cancel(ctx, op)
}
