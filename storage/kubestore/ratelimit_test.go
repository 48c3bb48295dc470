package kubestore_test

import (
	"context"
	"testing"
	"time"

	"github.com/itemops/itemops/clock/clocktest"
	"github.com/itemops/itemops/internal/testutil/scalebench"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/storage/kubestore"
)

// The client limit of controller-runtime v0.19's configurations, the floor of
// integrations/controllerruntime: 20 requests a second, with a burst of 30.
const (
	limitedQPS   = 20
	limitedBurst = 30
)

// movingPlugin answers every Progress with progress that has moved on, so that every
// poll changes every operation's progress and nothing else.
var movingPlugin = operations.ResolverFunc(func(string) (operations.Tracker, error) {
	return &movingTracker, nil
})

var movingTracker scalebench.Moving

// byCall is a kubestore as a Monitor saw it before stores read passes
// (operations.PassReader) or kept claims (operations.ClaimKeeper): its passes read and
// write run by run, and claim each run and give it up in each pass.
type byCall struct{ claimingStore }

type claimingStore interface {
	operations.Store
	operations.RunClaimer
}

// BenchmarkPassRateLimited measures Monitor passes over 1,000 waiting backups of 100
// operations (the workload of internal/testutil/scalebench; ITEMOPS_SCALE_RUNS gives
// another count), with a plugin whose every answer moves every operation's progress,
// and the Monitor's clock moving 10 s, the default interval, between passes:
//
//   - "before": the passes as they were before stores read passes, on a client with no
//     limit (see byCall), for the requests and the processor time they cost;
//   - "every-pass": through a client limited to 20 requests a second with a burst of
//     30, as controller-runtime v0.19 limits its configurations by default, writing
//     each changed run in each pass (the Monitor's default);
//   - "progress-1m": through the same client, writing a run whose operations only
//     progressed once a minute (monitor.WithProgressWriteInterval).
//
// The last two keep their claims (monitor.WithKeptClaims). The first pass is not
// measured, as it takes the claims, nor, for "progress-1m", the others of the first
// minute, which spread the first writes. Between two passes the benchmark waits,
// untimed, for the client's burst to refill (1.5 s), as the 10 s of a real interval
// would. Each reports the seconds a pass takes, its requests, the runs it wrote, and the
// processor time that kube-apiserver and etcd spent during it. It reads /proc, so it
// runs on Linux only.
//
//	cd storage/kubestore && go test -run '^$' -bench PassRateLimited -benchtime 3x -timeout 40m .
func BenchmarkPassRateLimited(b *testing.B) {
	ctx := context.Background()
	runs := scalebench.Runs(b, 1000)
	cfg := config(b)
	ns := newNamespace(b, cfg)
	loader, err := kubestore.Open(ctx, cfg, ns, nil)
	if err != nil {
		b.Fatalf("Open: %v", err)
	}
	defer loader.Close()
	scalebench.Load(b, loader, runs)

	for _, bc := range []struct {
		name   string
		before bool
		every  time.Duration
	}{{"before", true, 0}, {"every-pass", false, 0}, {"progress-1m", false, time.Minute}} {
		b.Run(bc.name, func(b *testing.B) {
			c := &counter{}
			client := counted(cfg, c)
			if !bc.before {
				client.QPS, client.Burst = limitedQPS, limitedBurst
			}
			s, err := kubestore.Open(ctx, client, ns, nil)
			if err != nil {
				b.Fatalf("Open: %v", err)
			}
			defer s.Close()
			clk := clocktest.NewClock(time.Now())
			var m *monitor.Monitor
			if bc.before {
				m = monitor.New(byCall{s}, movingPlugin, monitor.WithClock(clk))
			} else {
				m = monitor.New(s, movingPlugin, monitor.WithClock(clk), monitor.WithKeptClaims(),
					monitor.WithProgressWriteInterval(bc.every))
			}
			defer m.Close()
			pass := func() monitor.PassStats {
				b.Helper()
				time.Sleep(time.Second * limitedBurst / limitedQPS)
				clk.Advance(monitor.DefaultInterval)
				st, err := m.RunOnce(ctx)
				if err != nil {
					b.Fatalf("RunOnce: %v", err)
				}
				if st.Runs != runs || st.Operations != runs*scalebench.PerRun {
					b.Fatalf("a pass polled %d runs and %d operations, want %d and %d", st.Runs, st.Operations, runs, runs*scalebench.PerRun)
				}
				return st
			}
			warm := 1 // a pass takes the claims
			if bc.every > 0 {
				warm = int(bc.every / monitor.DefaultInterval) // and the first writes spread over a minute
			}
			for range warm {
				pass()
			}
			var (
				elapsed   time.Duration
				written   int
				api, etcd time.Duration
			)
			requests := c.requests.Load()
			b.ResetTimer()
			for range b.N {
				api0, etcd0, err := kube.CPUTime()
				if err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				st := pass()
				elapsed += time.Since(start) - time.Second*limitedBurst/limitedQPS
				api1, etcd1, err := kube.CPUTime()
				if err != nil {
					b.Fatal(err)
				}
				api, etcd = api+api1-api0, etcd+etcd1-etcd0
				written += st.Runs - st.ProgressHeld
			}
			b.StopTimer()
			n := float64(b.N)
			b.ReportMetric(elapsed.Seconds()/n, "s/pass")
			b.ReportMetric(float64(c.requests.Load()-requests)/n, "requests/pass")
			b.ReportMetric(float64(written)/n, "runs-written/pass")
			b.ReportMetric(api.Seconds()/n, "apiserver-cpu-s/pass")
			b.ReportMetric(etcd.Seconds()/n, "etcd-cpu-s/pass")
		})
	}
}

// TestPassUnderRateLimit drives a Monitor on a store whose client is limited to 20
// requests a second with a burst of 30, over 30 waiting runs whose every poll moves
// their operations' progress, a pass every 10 s by the Monitor's clock, and checks what
// Open's documentation says of it ("Rate limits"): without
// monitor.WithProgressWriteInterval a pass writes every run, a request each; with a
// minute, the passes of each minute write each run once, so that a pass makes about a
// sixth of the writes; beside the writes a pass makes no more than its two LISTs, two
// GETs of the format marker and a few requests of its claim session. No run is skipped or fails, however long the
// client makes a request wait.
func TestPassUnderRateLimit(t *testing.T) {
	const runs = 30
	ctx := context.Background()
	cfg := config(t)
	ns := newNamespace(t, cfg)
	c := &counter{}
	limited := counted(cfg, c)
	limited.QPS, limited.Burst = limitedQPS, limitedBurst
	s, err := kubestore.Open(ctx, limited, ns, nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	scalebench.Load(t, s, runs)

	for _, every := range []time.Duration{0, time.Minute} {
		clk := clocktest.NewClock(time.Now())
		m := monitor.New(s, movingPlugin, monitor.WithClock(clk), monitor.WithKeptClaims(),
			monitor.WithProgressWriteInterval(every))
		pass := func() (st monitor.PassStats, requests int64) {
			t.Helper()
			clk.Advance(monitor.DefaultInterval)
			before := c.requests.Load()
			st, err := m.RunOnce(ctx)
			if err != nil {
				t.Fatalf("RunOnce: %v", err)
			}
			if st.Runs != runs || st.Skipped != 0 {
				t.Fatalf("a pass polled %d runs and skipped %d, want %d and 0", st.Runs, st.Skipped, runs)
			}
			return st, c.requests.Load() - before
		}
		for range time.Minute / monitor.DefaultInterval { // claims taken, first writes spread
			pass()
		}
		var written, requests int64
		for i := range time.Minute / monitor.DefaultInterval {
			st, req := pass()
			w := int64(st.Runs - st.ProgressHeld)
			// Beside the writes: the LISTs of the waiting and of the finalizing runs, a
			// GET of the format marker before each, the LIST of the claim session's
			// Leases, and the renewals of the session's Lease that fall in the pass.
			if req-w > 7 {
				t.Errorf("every %v, pass %d: %d requests for %d runs written, want the writes and at most 7 more", every, i, req, w)
			}
			written += w
			requests += req
		}
		want := int64(6 * runs)
		if every > 0 {
			want = runs
		}
		if written != want {
			t.Errorf("every %v: a minute's passes wrote %d runs, want %d", every, written, want)
		}
		t.Logf("every %v: %.1f requests a pass over %d runs, %.1f runs written", every, float64(requests)/6, runs, float64(written)/6)
		m.Close()
	}
}
