package storetest_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/decorate"
	"github.com/itemops/itemops/storage/memstore"
	"github.com/itemops/itemops/storage/storetest"
)

// The decorators a user writes around a real store, broken as they are easily broken;
// the suite must name what each broke in the name of a subtest that fails.

// embedding is a decorator that embeds the Store it wraps: it hides the store's
// CreateRunWithOperations, so StartRun is no longer atomic on it.
type embedding struct{ operations.Store }

// runCache keeps what GetRun read and returns it until UpdateRun or DeleteRun of the run
// goes through it; it drops the entry before the write, so a read racing the write can
// put the old run back.
type runCache struct {
	operations.Store
	mu   sync.Mutex
	runs map[string]operations.Run
}

func (c *runCache) GetRun(ctx context.Context, o operations.Owner) (operations.Run, error) {
	c.mu.Lock()
	r, ok := c.runs[o.String()]
	c.mu.Unlock()
	if ok {
		return r.Clone(), nil
	}
	r, err := c.Store.GetRun(ctx, o)
	if err == nil {
		c.mu.Lock()
		c.runs[o.String()] = r.Clone()
		c.mu.Unlock()
	}
	return r, err
}

func (c *runCache) UpdateRun(ctx context.Context, o operations.Owner, update func(*operations.Run) error) (operations.Run, error) {
	c.forget(o)
	return c.Store.UpdateRun(ctx, o, update)
}

func (c *runCache) DeleteRun(ctx context.Context, o operations.Owner) error {
	c.forget(o)
	return c.Store.DeleteRun(ctx, o)
}

func (c *runCache) forget(o operations.Owner) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.runs, o.String())
}

// opCache keeps what GetOperation read, and forgets it only when the run is deleted: a
// replaced operation reads as it was.
type opCache struct {
	operations.Store
	mu  sync.Mutex
	ops map[string]operations.Operation
}

func (c *opCache) GetOperation(ctx context.Context, o operations.Owner, id string) (operations.Operation, error) {
	k := o.String() + "/" + id
	c.mu.Lock()
	op, ok := c.ops[k]
	c.mu.Unlock()
	if ok {
		return op.Clone(), nil
	}
	op, err := c.Store.GetOperation(ctx, o, id)
	if err == nil {
		c.mu.Lock()
		c.ops[k] = op.Clone()
		c.mu.Unlock()
	}
	return op, err
}

func (c *opCache) DeleteRun(ctx context.Context, o operations.Owner) error {
	c.mu.Lock()
	clear(c.ops)
	c.mu.Unlock()
	return c.Store.DeleteRun(ctx, o)
}

// swallowing drops the errors of CreateRun, as a decorator that "tolerates" conflicts
// might.
type swallowing struct{ operations.Store }

func (s swallowing) CreateRun(ctx context.Context, r operations.Run) error {
	_ = s.Store.CreateRun(ctx, r)
	return nil
}

// keepStarter gives an embedding decorator the RunStarter of the store it wraps back.
type keepStarter struct {
	operations.Store
	operations.RunStarter
}

func TestSuiteNamesBrokenDecorators(t *testing.T) {
	tests := []struct {
		name     string
		wrap     func(s *memstore.Store) operations.Store
		only     []string // the groups to run
		wantFail []string // subtests that must fail (others may too)
		wantSaid string   // what the second of them must say
	}{
		{
			name:     "an embedding decorator hides the atomic start",
			wrap:     func(s *memstore.Store) operations.Store { return embedding{s} },
			only:     []string{"Runs"},
			wantFail: []string{"Runs", "Runs/AtomicStart"},
			wantSaid: "is not an operations.RunStarter",
		},
		{
			name: "a GetOperation cache returns a replaced operation as it was",
			wrap: func(s *memstore.Store) operations.Store {
				return keepStarter{&opCache{Store: s, ops: map[string]operations.Operation{}}, s}
			},
			only:     []string{"Operations", "Concurrency/GetOperationFollowsWrites"},
			wantFail: []string{"Operations", "Operations/ReplaceThenGet", "Concurrency/GetOperationFollowsWrites"},
			wantSaid: "a stale read",
		},
		{
			name:     "a decorator swallows the errors of CreateRun",
			wrap:     func(s *memstore.Store) operations.Store { return keepStarter{swallowing{s}, s} },
			only:     []string{"Runs/CreateExisting"},
			wantFail: []string{"Runs", "Runs/CreateExisting"},
			wantSaid: "second CreateRun(Backup/b) returned no error, want one wrapping operations.ErrExists",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := newRecorder(t, tc.only...)
			storetest.Run(rec, func(*recorder) operations.Store { return tc.wrap(memstore.New()) })
			failed := rec.failures()
			for _, name := range tc.wantFail {
				if !slices.Contains(failed, name) {
					t.Errorf("subtest %s passed, want it failed; the subtests that failed: %q", name, failed)
				}
			}
			if said := rec.said(tc.wantFail[1]); !strings.Contains(said, tc.wantSaid) {
				t.Errorf("%s said %q, want it to say %q", tc.wantFail[1], said, tc.wantSaid)
			}
		})
	}
}

// The suite catches a stale GetRun among concurrent writes. The cache of runCache goes
// stale only when a read races a write the wrong way, so the check runs a few times.
func TestSuiteCatchesStaleGetRun(t *testing.T) {
	for range 5 {
		rec := newRecorder(t, "Concurrency/GetRunFollowsWrites")
		storetest.Run(rec, func(*recorder) operations.Store {
			s := memstore.New()
			return keepStarter{&runCache{Store: s, runs: map[string]operations.Run{}}, s}
		})
		for _, name := range rec.failures() {
			if name == "Concurrency/GetRunFollowsWrites" {
				t.Logf("%s said: %s", name, rec.said(name))
				return
			}
		}
	}
	t.Error("Concurrency/GetRunFollowsWrites passed a GetRun cache that a racing read leaves stale, five times")
}

// Decorators built with decorate.Store, and those that give the RunStarter back,
// pass; so does a store that is not a RunStarter when the suite is told so.
func TestSuitePassesFaithfulDecorators(t *testing.T) {
	tests := []struct {
		name string
		wrap func(s *memstore.Store) operations.Store
		opts []storetest.Option
	}{
		{"decorate.Store", func(s *memstore.Store) operations.Store {
			return decorate.Store(s, func(ctx context.Context, _ decorate.Call, call func(context.Context) error) error {
				return call(ctx)
			})
		}, nil},
		{"an embedding decorator that gives the RunStarter back", func(s *memstore.Store) operations.Store { return keepStarter{embedding{s}, s} }, nil},
		{"an embedding decorator, WithoutRunStarter", func(s *memstore.Store) operations.Store { return embedding{s} }, []storetest.Option{storetest.WithoutRunStarter()}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := newRecorder(t, "Runs", "Operations")
			storetest.Run(rec, func(*recorder) operations.Store { return tc.wrap(memstore.New()) }, tc.opts...)
			for _, name := range rec.failures() {
				t.Errorf("%s failed: %s", name, rec.said(name))
			}
		})
	}
}

// frozenRuns returns, for each run, what GetRun first read of it, forever.
type frozenRuns struct {
	operations.Store
	mu   sync.Mutex
	runs map[string]operations.Run
}

func (f *frozenRuns) GetRun(ctx context.Context, o operations.Owner) (operations.Run, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.runs[o.String()]; ok {
		return r.Clone(), nil
	}
	r, err := f.Store.GetRun(ctx, o)
	if err == nil {
		f.runs[o.String()] = r.Clone()
	}
	return r, err
}

// RunCancel's failures name the read that returned the stale value.
func TestRunCancelNamesTheStaleRead(t *testing.T) {
	rec := newRecorder(t, "HonouredByNextPass")
	storetest.RunCancel(rec, func(*recorder) operations.Store {
		s := memstore.New()
		return keepStarter{&frozenRuns{Store: s, runs: map[string]operations.Run{}}, s}
	})
	if !slices.Contains(rec.failures(), "HonouredByNextPass") {
		t.Fatalf("RunCancel passed a store whose GetRun never changes; the subtests that failed: %q", rec.failures())
	}
	const want = "GetRun(Restore/cancelled) after the pass that followed the cancel request returned the run in WaitingForPluginOperations"
	if said := rec.said("HonouredByNextPass"); !strings.Contains(said, want) {
		t.Errorf("HonouredByNextPass said %q, want it to say %q", said, want)
	}
}
