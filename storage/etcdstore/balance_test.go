package etcdstore_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/storage/etcdstore"
)

// pollLog records every Progress call of several replicas: which replica polled which
// operation, when. Its operations never end.
type pollLog struct {
	mu     sync.Mutex
	calls  map[string][]poll    // by run/operation
	onPoll func(replica string) // when not nil, called at every Progress call
}

type poll struct {
	replica string
	at      time.Time
}

func (l *pollLog) tracker(replica string) operations.Resolver {
	return operations.ResolverFunc(func(string) (operations.Tracker, error) { return loggedTracker{l, replica}, nil })
}

type loggedTracker struct {
	l       *pollLog
	replica string
}

func (tr loggedTracker) Progress(_ context.Context, op operations.Operation) (operations.Progress, error) {
	tr.l.mu.Lock()
	key := op.Owner.String() + "/" + op.ID
	tr.l.calls[key] = append(tr.l.calls[key], poll{tr.replica, time.Now()})
	tr.l.mu.Unlock()
	if tr.l.onPoll != nil {
		tr.l.onPoll(tr.replica)
	}
	return operations.Progress{NCompleted: 1, NTotal: 10, OperationUnits: "Bytes"}, nil
}

func (loggedTracker) Cancel(context.Context, operations.Operation) error { return nil }

// duplicates returns the polls of an operation by a replica less than within after
// another replica polled it.
func (l *pollLog) duplicates(within time.Duration) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for key, calls := range l.calls {
		for i := 1; i < len(calls); i++ {
			prev, p := calls[i-1], calls[i]
			if p.replica != prev.replica && p.at.Sub(prev.at) < within {
				out = append(out, fmt.Sprintf("%s: %s polled it %s after %s", key, p.replica, p.at.Sub(prev.at), prev.replica))
			}
		}
	}
	slices.Sort(out)
	return out
}

// holdings counts the claims under prefix by the Identity of their holder; runs handed
// over and not yet taken are counted under "".
func holdings(t *testing.T, c *clientv3.Client, prefix string) map[string]int {
	t.Helper()
	resp, err := c.Get(bg, prefix+"claims/", clientv3.WithPrefix())
	require.NoError(t, err)
	held := make(map[string]int)
	for _, kv := range resp.Kvs {
		if strings.HasPrefix(string(kv.Value), "handed over") {
			held[""]++
		} else {
			held[string(kv.Value)]++
		}
	}
	return held
}

// TestReplicasShareRunsEvenly runs the Monitors of two replicas, each with its own client
// and store, over 40 runs, then has a third join them, then a fourth, then a fifth and a
// sixth at once. Each time, every replica comes to hold within ±20% of its share of the
// runs (1/2, 1/3, 1/4, then 1/6), and all runs are held; through it all, no operation is
// polled by two replicas within one interval. A replica that joins holds its share within
// two intervals of its Monitor starting (its store open), as counted by the passes of
// replica a, each of which starts an interval after the last one ended: the join starts
// as a pass of a ends, and the new replica must hold its share before a starts its second
// pass since (two intervals and one pass of a); so do two that join at once, each taking
// no more than its share of what the others hand over. When the Monitors stop, no claim,
// hand-over or replica key is left.
func TestReplicasShareRunsEvenly(t *testing.T) {
	if testing.Short() {
		t.Skip("runs four replicas for several seconds (-short)")
	}
	// The interval is long next to a pass, whose 32 workers poll all of a replica's runs
	// at once, so that a's passes count intervals closely (a pass of a under -race takes
	// about a quarter of it).
	const (
		runs, perRun = 40, 2
		interval     = 400 * time.Millisecond
		workers      = 32
	)
	prefix := etcdstore.NewPrefix()
	c := etcdstore.NewTestClient(t)
	seed(t, etcdstore.OpenStore(t, c, prefix, nil), runs, perRun)
	log := &pollLog{calls: make(map[string][]poll)}
	var (
		wg   sync.WaitGroup
		errs = make(chan error, 6)
	)
	ctx, cancel := context.WithCancel(bg)
	defer func() { cancel(); wg.Wait() }()
	// open opens the store of a replica and returns what starts its Monitor's Run.
	open := func(name string, opts ...monitor.Option) (run func()) {
		s := etcdstore.OpenStore(t, etcdstore.NewTestClient(t), prefix, &etcdstore.Options{Identity: name})
		opts = append([]monitor.Option{monitor.WithInterval(interval), monitor.WithWorkers(workers)}, opts...)
		m := monitor.New(s, log.tracker(name), opts...)
		return func() {
			wg.Add(1)
			go func() { defer wg.Done(); errs <- m.Run(ctx) }()
		}
	}
	// balanced waits until each of names holds within ±20% of its share, and every run
	// is held, and returns how long that took.
	balanced := func(names ...string) time.Duration {
		t.Helper()
		began := time.Now()
		share := float64(runs) / float64(len(names))
		var last map[string]int
		ok := func() bool {
			last = holdings(t, c, prefix)
			total := 0
			for _, name := range names {
				n := float64(last[name])
				if n < 0.8*share || n > 1.2*share {
					return false
				}
				total += last[name]
			}
			return total == runs
		}
		for !ok() {
			if time.Since(began) > time.Minute {
				t.Fatalf("no balance among %v after a minute: holdings %v", names, last)
			}
			time.Sleep(interval / 10)
		}
		t.Logf("%d replicas balanced after %s (%.1f intervals): %v", len(names), time.Since(began).Round(time.Millisecond), float64(time.Since(began))/float64(interval), last)
		return time.Since(began)
	}

	// a's passes are counted as they start: at its first poll after a pass ended (a
	// holds runs in every pass).
	var (
		aStarts  atomic.Int64
		aBetween atomic.Bool  // a has ended a pass and not polled since
		aLast    atomic.Int64 // how long a's last pass took, for the log
		aPassed  = make(chan struct{}, 1)
	)
	log.onPoll = func(replica string) {
		if replica == "a" && aBetween.Swap(false) {
			aStarts.Add(1)
		}
	}
	open("a", monitor.WithObserver(monitor.Observer{Pass: func(st monitor.PassStats) {
		aLast.Store(int64(st.Duration))
		aBetween.Store(true)
		select {
		case aPassed <- struct{}{}:
		default:
		}
	}}))()
	open("b")()
	names := []string{"a", "b"}
	balanced(names...)
	for _, joining := range [][]string{{"c"}, {"d"}, {"e", "f"}} {
		var runs []func()
		for _, name := range joining {
			opened := time.Now()
			runs = append(runs, open(name))
			t.Logf("%s: store opened in %s", name, time.Since(opened).Round(time.Millisecond))
		}
		select {
		case <-aPassed: // a pass of a that ended earlier
		default:
		}
		<-aPassed
		before := aStarts.Load()
		for _, run := range runs {
			run()
		}
		names = append(names, joining...)
		balanced(names...)
		passes := aStarts.Load() - before
		t.Logf("%v held their share when a had started %d passes since they started (a's last pass took %s)",
			joining, passes, time.Duration(aLast.Load()).Round(time.Millisecond))
		// The new replicas hold their share within two intervals and a pass of a, one
		// joining or two at once.
		require.Less(t, passes, int64(2), "passes a started before %v, joining, held their share", joining)
	}
	// Stay balanced for a few more intervals.
	time.Sleep(3 * interval)
	balanced(names...)

	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		require.ErrorIs(t, err, context.Canceled, "Run")
	}
	require.Empty(t, log.duplicates(interval), "operations polled by two replicas within one interval")
	require.Empty(t, rawKeys(t, c, prefix+"claims/"), "claims left")
	require.Empty(t, rawKeys(t, c, prefix+"replicas/"), "replica keys left")
	log.mu.Lock()
	require.Len(t, log.calls, runs*perRun, "operations polled")
	log.mu.Unlock()
}
