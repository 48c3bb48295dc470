package monitor_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/operations/operationstest"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/memstore"
)

// writeLog records which runs' operations a Monitor wrote, by run name.
type writeLog struct {
	mu      sync.Mutex
	written map[string]int
}

func (l *writeLog) add(o operations.Owner) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.written == nil {
		l.written = make(map[string]int)
	}
	l.written[o.Name]++
}

// take returns the runs written since the last take.
func (l *writeLog) take() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.written
	l.written = nil
	return w
}

// passWrites is a memstore that logs the operation writes of passes (CommitPass) and of
// single calls (PutOperations); it is a PassReader.
type passWrites struct {
	*memstore.Store
	log *writeLog
}

func (s passWrites) PutOperations(ctx context.Context, o operations.Owner, ops []operations.Operation) error {
	s.log.add(o)
	return s.Store.PutOperations(ctx, o, ops)
}

func (s passWrites) CommitPass(ctx context.Context, r operations.PassRun, ops []operations.Operation) error {
	s.log.add(r.Run.Owner)
	return s.Store.CommitPass(ctx, r, ops)
}

// callWrites is a store that logs PutOperations and is no PassReader: its passes read
// and write run by run.
type callWrites struct {
	operations.Store
	log *writeLog
}

func (s callWrites) PutOperations(ctx context.Context, o operations.Owner, ops []operations.Operation) error {
	s.log.add(o)
	return s.Store.PutOperations(ctx, o, ops)
}

// counting is a plugin whose every answer is one more unit of progress than the last
// of the same operation, so that every poll changes every operation's progress, and
// nothing else, unless the test sets an answer of its own for the operation.
type counting struct {
	mu    sync.Mutex
	calls map[string]int64 // by run and operation ID
	set   map[string]func() (operations.Progress, error)
}

func (p *counting) Progress(_ context.Context, op operations.Operation) (operations.Progress, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := op.Owner.Name + "/" + op.ID
	if f := p.set[key]; f != nil {
		return f()
	}
	p.calls[key]++
	return operations.Progress{NCompleted: p.calls[key], NTotal: 1 << 20, OperationUnits: "Bytes", Started: started}, nil
}

func (p *counting) Cancel(context.Context, operations.Operation) error { return nil }

// answer makes the plugin answer f for operation id of run name.
func (p *counting) answer(name, id string, f func() (operations.Progress, error)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.set[name+"/"+id] = f
}

// last returns the plugin's last count for operation id of run name.
func (p *counting) last(name, id string) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[name+"/"+id]
}

// progressRuns stores n waiting runs "r0"... of two InProgress operations "a" and "b"
// each, and returns a plugin that moves every operation at every poll.
func progressRuns(e *env, n int) *counting {
	p := &counting{calls: map[string]int64{}, set: map[string]func() (operations.Progress, error){}}
	e.trackers["p"] = p
	for i := range n {
		running := ops("a", "b")
		for j := range running {
			running[j].Status.Phase = operations.OperationInProgress
			running[j].Status.Started = started
		}
		e.run(phase.Backup, fmt.Sprintf("r%d", i), phase.WaitingForPluginOperations, phase.Profile{}, running...)
	}
	return p
}

// TestProgressWriteInterval checks WithProgressWriteInterval on 60 runs whose every
// poll changes nothing but progress, with a pass every 10 s for 4 minutes, on a store
// whose passes read once (PassReader) and on one read run by run: without the option
// every pass writes every run; with a minute, each run is written once a minute exactly,
// first within a minute of the first pass, the runs spread over the minute's passes
// (not all in one), and each write holds the plugin's latest report. The passes count
// the runs they held back.
func TestProgressWriteInterval(t *testing.T) {
	const runs = 60
	for _, tc := range []struct {
		name  string
		store func(*memstore.Store, *writeLog) operations.Store
	}{
		{"pass", func(s *memstore.Store, l *writeLog) operations.Store { return passWrites{s, l} }},
		{"by call", func(s *memstore.Store, l *writeLog) operations.Store { return callWrites{s, l} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, every := range []time.Duration{0, time.Minute} {
				e := newEnv(t)
				p := progressRuns(e, runs)
				var log writeLog
				m := monitor.New(tc.store(e.store, &log), operationstest.Resolver(e.trackers),
					monitor.WithClock(e.clock), monitor.WithProgressWriteInterval(every))
				lastWrite := map[string]time.Time{}
				most := 0
				for pass := range 24 {
					if pass > 0 {
						e.clock.Advance(10 * time.Second)
					}
					now := e.clock.Now()
					stats, err := m.RunOnce(context.Background())
					require.NoError(t, err)
					require.Equal(t, runs, stats.Runs)
					written := log.take()
					require.Equal(t, runs-len(written), stats.ProgressHeld, "pass %d: the runs held back", pass)
					most = max(most, len(written))
					for name, n := range written {
						require.Equal(t, 1, n, "pass %d: run %s written once", pass, name)
						if last, ok := lastWrite[name]; ok && every > 0 {
							require.Equal(t, every, now.Sub(last), "pass %d: run %s written again after", pass, name)
						}
						lastWrite[name] = now
						for _, id := range []string{"a", "b"} {
							op := e.op(operations.Owner{Kind: phase.Backup, Name: name, UID: "uid-" + name}, id)
							require.Equal(t, p.last(name, id), op.Status.NCompleted, "pass %d: run %s's write holds the latest report", pass, name)
						}
					}
					if every == 0 {
						require.Len(t, written, runs, "pass %d: without the option every run is written", pass)
					}
					if pass == 6 {
						require.Len(t, lastWrite, runs, "every run written within a minute of the first pass")
					}
				}
				if every > 0 {
					require.LessOrEqual(t, most, runs/3, "the runs' writes are spread over the minute's passes")
					for name, at := range lastWrite {
						require.Greater(t, at.Add(every), e.clock.Now(), "run %s is written once a minute", name)
					}
				}
			}
		})
	}
}

// TestProgressWriteIntervalWritesChangesAtOnce checks that under
// WithProgressWriteInterval a poll that changes more than progress is written at once,
// with the progress its other operations hold: a completion, a failure (which moves the
// run), a Progress error that a retry policy counts, the answer that ends that row of
// errors, and a cancel.
func TestProgressWriteIntervalWritesChangesAtOnce(t *testing.T) {
	e := newEnv(t)
	p := progressRuns(e, 5)
	var log writeLog
	m := monitor.New(passWrites{e.store, &log}, operationstest.Resolver(e.trackers), monitor.WithClock(e.clock),
		monitor.WithProgressWriteInterval(time.Hour), monitor.WithRetryPolicy(retryAll(5)))
	ctx := context.Background()
	owner := func(name string) operations.Owner {
		return operations.Owner{Kind: phase.Backup, Name: name, UID: "uid-" + name}
	}
	pass := func() map[string]int {
		t.Helper()
		e.clock.Advance(10 * time.Second)
		_, err := m.RunOnce(ctx)
		require.NoError(t, err)
		return log.take()
	}
	// With an hour, a run's first write may come a whole hour after the first pass:
	// take the runs that the first passes do not write.
	pass()
	var held []string
	for i := range 5 {
		name := fmt.Sprintf("r%d", i)
		if p.last(name, "a") > e.op(owner(name), "a").Status.NCompleted {
			held = append(held, name)
		}
	}
	require.GreaterOrEqual(t, len(held), 4, "an hour's first writes are spread over 360 passes")

	steps := []struct {
		name   string
		answer func() (operations.Progress, error)
		check  func(t *testing.T, o operations.Owner)
	}{
		{"completion", func() (operations.Progress, error) { return done, nil }, func(t *testing.T, o operations.Owner) {
			require.Equal(t, operations.OperationCompleted, e.op(o, "a").Status.Phase)
		}},
		{"failure", func() (operations.Progress, error) { return broken, nil }, func(t *testing.T, o operations.Owner) {
			require.Equal(t, operations.OperationFailed, e.op(o, "a").Status.Phase)
			require.Equal(t, phase.WaitingForPluginOperationsPartiallyFailed, e.get(o).Phase, "the run moved")
		}},
		{"retried error", func() (operations.Progress, error) { return operations.Progress{}, errors.New("plugin restarting") }, func(t *testing.T, o operations.Owner) {
			require.Equal(t, 1, e.op(o, "a").Monitor.Attempts)
		}},
	}
	for i, step := range steps {
		name := held[i]
		p.answer(name, "a", step.answer)
		written := pass()
		require.Contains(t, written, name, step.name)
		o := owner(name)
		step.check(t, o)
		require.Equal(t, p.last(name, "b"), e.op(o, "b").Status.NCompleted, "%s: the write holds the other operation's progress", step.name)
		if step.name == "retried error" {
			p.answer(name, "a", nil) // the plugin answers again: the row of errors ends
			require.Contains(t, pass(), name, "the answer that ends a row of errors")
			require.Zero(t, e.op(o, "a").Monitor.Attempts)
		}
	}

	name := held[3]
	o := owner(name)
	_, err := e.store.UpdateRun(ctx, o, func(r *operations.Run) error {
		r.Cancel = operations.CancelRequest{Reason: "by the user", At: e.clock.Now()}
		return nil
	})
	require.NoError(t, err)
	require.Contains(t, pass(), name, "a cancel")
	require.Equal(t, phase.Failed, e.get(o).Phase)
}

// TestProgressWriteIntervalStall checks that under WithProgressWriteInterval a stall is
// seen no later than the stall window after the last progress the store holds: the
// window plus the write interval after the plugin's report last moved, at worst.
func TestProgressWriteIntervalStall(t *testing.T) {
	c := newOneOp(t, monitor.WithStallTimeout(30*time.Minute), monitor.WithDefaultOperationTimeout(24*time.Hour),
		monitor.WithProgressWriteInterval(5*time.Minute))
	c.pass(t, 0)
	for range 3 { // the report moves for a minute and a half, then stops
		c.set(func(p *operations.Progress) { p.NCompleted++ })
		c.pass(t, 30*time.Second)
	}
	movedAt := c.e.clock.Now()
	for c.e.clock.Now().Before(movedAt.Add(30 * time.Minute)) {
		c.pass(t, 30*time.Second)
		require.Equal(t, operations.OperationInProgress, c.e.op(c.o, "a").Status.Phase, "not stalled before the window")
	}
	for c.e.op(c.o, "a").Status.Phase == operations.OperationInProgress {
		require.False(t, c.e.clock.Now().After(movedAt.Add(35*time.Minute)), "stalled within the window and the write interval")
		c.pass(t, 30*time.Second)
	}
	got := c.e.op(c.o, "a").Status
	require.Equal(t, operations.OperationFailed, got.Phase)
	require.Contains(t, got.Error, monitor.StallPrefix+"30m0s: last 15 of 100 GiB")
}
