package etcdstore_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/storage/etcdstore"
)

// figuresEnv names the environment variable that turns TestReplicaFigures on: it takes
// minutes and measures, for docs/BENCHMARKS.md.
const figuresEnv = "ITEMOPS_REPLICA_FIGURES"

// sleepy is a plugin whose Progress sleeps d and reports new progress at every call.
type sleepy struct {
	d     time.Duration
	calls atomic.Int64
	mu    sync.Mutex
	last  map[string]string // operation → the replica that polled it last
	moves atomic.Int64      // calls by another replica than the last one
}

func (p *sleepy) resolver(replica string) operations.Resolver {
	return operations.ResolverFunc(func(string) (operations.Tracker, error) { return sleepyOf{p, replica}, nil })
}

type sleepyOf struct {
	p       *sleepy
	replica string
}

func (s sleepyOf) Progress(ctx context.Context, op operations.Operation) (operations.Progress, error) {
	n := s.p.calls.Add(1)
	key := op.Owner.Name + "/" + op.ID
	s.p.mu.Lock()
	if last, ok := s.p.last[key]; ok && last != s.replica {
		s.p.moves.Add(1)
	}
	s.p.last[key] = s.replica
	s.p.mu.Unlock()
	select {
	case <-time.After(s.p.d):
	case <-ctx.Done():
	}
	return operations.Progress{NCompleted: n, NTotal: 1 << 40, OperationUnits: "Bytes", Started: time.Unix(1e9, 0)}, nil
}

func (sleepyOf) Cancel(context.Context, operations.Operation) error { return nil }

// cpuTimes returns the CPU time of this process and of the process pid so far.
func cpuTimes(t *testing.T, pid int) (self, other time.Duration) {
	t.Helper()
	var ru syscall.Rusage
	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	require.NoError(t, err)
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64) // field 14 of stat
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return self, time.Duration(utime+stime) * 10 * time.Millisecond // USER_HZ is 100
}

// TestReplicaFigures measures replicas sharing a store, each with its own client, store
// and Monitor (64 workers, a pass every 100 ms): 1, 2 and 4 replicas on 200 waiting runs
// of 50 InProgress operations whose plugin sleeps 20 ms, then 2 ms, per Progress call and
// reports new progress at every call. After a settling period it counts, over a window,
// the Progress calls per second, the CPU per call (this process and the etcd server),
// the revisions and database growth per 10,000 calls (a pass over every operation), and
// the calls made by another replica than the operation's last one. It asserts nothing
// but that the replicas poll; set ITEMOPS_REPLICA_FIGURES=1 to run it:
//
//	cd storage/etcdstore && ITEMOPS_REPLICA_FIGURES=1 go test -run TestReplicaFigures -v -count 1 -timeout 30m .
func TestReplicaFigures(t *testing.T) {
	if os.Getenv(figuresEnv) == "" {
		t.Skipf("measures for minutes; set %s=1 to run it", figuresEnv)
	}
	const runs, perRun = 200, 50
	settle, window := 8*time.Second, 15*time.Second
	if s := os.Getenv(figuresEnv + "_WINDOW"); s != "" {
		d, err := time.ParseDuration(s)
		require.NoError(t, err)
		window = d
	}
	pid := etcdstore.Server().Pid()
	c := etcdstore.NewTestClient(t)
	status := func() (rev, size int64) {
		st, err := c.Status(bg, etcdstore.Server().Endpoint())
		require.NoError(t, err)
		return st.Header.Revision, st.DbSizeInUse
	}
	for _, d := range []time.Duration{20 * time.Millisecond, 2 * time.Millisecond} {
		for _, n := range []int{1, 2, 4} {
			prefix := etcdstore.NewPrefix()
			seedIn(t, etcdstore.OpenStore(t, c, prefix, nil), runs, perRun, operations.OperationInProgress)
			plugin := &sleepy{d: d, last: make(map[string]string)}
			ctx, cancel := context.WithCancel(bg)
			var (
				wg       sync.WaitGroup
				counting atomic.Bool // the window is open
				passMu   sync.Mutex  // guards the pass figures below
				nPasses  int
				passOps  int
				passTime time.Duration
			)
			observer := monitor.Observer{Pass: func(ps monitor.PassStats) {
				if counting.Load() {
					passMu.Lock()
					nPasses, passOps, passTime = nPasses+1, passOps+ps.Operations, passTime+ps.Duration
					passMu.Unlock()
				}
			}}
			for i := range n {
				name := fmt.Sprintf("replica-%d", i)
				s := etcdstore.OpenStore(t, etcdstore.NewTestClient(t), prefix, &etcdstore.Options{Identity: name})
				m := monitor.New(s, plugin.resolver(name), monitor.WithWorkers(64), monitor.WithInterval(100*time.Millisecond),
					monitor.WithObserver(observer))
				wg.Add(1)
				go func() { defer wg.Done(); _ = m.Run(ctx) }()
			}
			time.Sleep(settle)
			load, _ := os.ReadFile("/proc/loadavg")
			calls0, moves0 := plugin.calls.Load(), plugin.moves.Load()
			self0, etcd0 := cpuTimes(t, pid)
			rev0, size0 := status()
			start := time.Now()
			counting.Store(true)
			time.Sleep(window)
			counting.Store(false)
			calls, moves := plugin.calls.Load()-calls0, plugin.moves.Load()-moves0
			elapsed := time.Since(start)
			self1, etcd1 := cpuTimes(t, pid)
			rev1, size1 := status()
			cancel()
			wg.Wait()
			require.Positive(t, calls, "Progress calls")
			passes := float64(calls) / (runs * perRun)
			t.Logf("%s, %d replicas: %.0f calls/s; CPU per call %.1f µs (this process %.1f, etcd %.1f); %.1f revisions and %+.0f KiB of database per pass over 10,000 operations; %d calls (%.2f%%) by another replica than the last; load %s",
				d, n, float64(calls)/elapsed.Seconds(),
				float64((self1-self0)+(etcd1-etcd0))/float64(calls)/1e3, float64(self1-self0)/float64(calls)/1e3, float64(etcd1-etcd0)/float64(calls)/1e3,
				float64(rev1-rev0)/passes, float64(size1-size0)/passes/1024,
				moves, 100*float64(moves)/float64(calls), strings.TrimSpace(string(load)))
			passMu.Lock()
			if nPasses > 0 {
				ideal := time.Duration(float64(passOps) / float64(nPasses) / 64 * float64(d))
				t.Logf("%s, %d replicas: %d passes in the window, each of %.0f operations in %v on average (%v if 64 calls were always in flight)",
					d, n, nPasses, float64(passOps)/float64(nPasses), (passTime / time.Duration(nPasses)).Round(time.Millisecond), ideal.Round(time.Millisecond))
			}
			passMu.Unlock()
		}
	}
}

// TestTakeoverFigures measures how long after a replica dies (its client closes, its
// Monitor stops) the other replica holds all its runs: two replicas with a claim TTL of
// 5 s, then 30 s, a pass every 100 ms, on 40 runs of 5 operations whose plugin sleeps
// 2 ms. Set ITEMOPS_REPLICA_FIGURES=1 to run it:
//
//	cd storage/etcdstore && ITEMOPS_REPLICA_FIGURES=1 go test -run TestTakeoverFigures -v -count 1 .
func TestTakeoverFigures(t *testing.T) {
	if os.Getenv(figuresEnv) == "" {
		t.Skipf("measures for a minute; set %s=1 to run it", figuresEnv)
	}
	const runs, perRun = 40, 5
	c := etcdstore.NewTestClient(t)
	for _, ttl := range []time.Duration{5 * time.Second, 30 * time.Second} {
		prefix := etcdstore.NewPrefix()
		seedIn(t, etcdstore.OpenStore(t, c, prefix, nil), runs, perRun, operations.OperationInProgress)
		plugin := &sleepy{d: 2 * time.Millisecond, last: make(map[string]string)}
		var (
			wg      sync.WaitGroup
			cancels []context.CancelFunc
			clients []*clientv3.Client
		)
		for i := range 2 {
			name := fmt.Sprintf("replica-%d", i)
			ci := etcdstore.NewTestClient(t)
			s := etcdstore.OpenStore(t, ci, prefix, &etcdstore.Options{Identity: name, ClaimTTL: ttl, RequestTimeout: time.Second})
			m := monitor.New(s, plugin.resolver(name), monitor.WithWorkers(16), monitor.WithInterval(100*time.Millisecond))
			ctx, cancel := context.WithCancel(bg)
			cancels, clients = append(cancels, cancel), append(clients, ci)
			wg.Add(1)
			go func() { defer wg.Done(); _ = m.Run(ctx) }()
		}
		for began, h := time.Now(), holdings(t, c, prefix); h["replica-0"] == 0 || h["replica-0"]+h["replica-1"] < runs; h = holdings(t, c, prefix) {
			if time.Since(began) > time.Minute {
				t.Fatalf("the replicas do not hold every run after a minute: %v", h)
			}
			time.Sleep(50 * time.Millisecond)
		}
		held := holdings(t, c, prefix)["replica-0"]
		// replica-0 dies: its connection goes, then its Monitor.
		crash := time.Now()
		clients[0].Close()
		cancels[0]()
		for holdings(t, c, prefix)["replica-1"] < runs {
			if time.Since(crash) > ttl+time.Minute {
				t.Fatalf("replica-1 does not hold every run %s after replica-0 died", time.Since(crash))
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Logf("claim TTL %s: replica-1 held the %d runs of replica-0 %s after it died", ttl, held, time.Since(crash).Round(10*time.Millisecond))
		cancels[1]()
		wg.Wait()
	}
}
