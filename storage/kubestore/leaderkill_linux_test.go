package kubestore_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/client-go/rest"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/itemops/itemops/integrations/controllerruntime"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/kubestore"
)

// The leader that TestLeaderKilled kills: a child process, this test binary run again
// with leaderChildEnv naming the file of its leaderSpec. It prints leaderPolled and the
// run and operation of each Progress call on its standard output.
const (
	leaderChildEnv  = "ITEMOPS_LEADER_CHILD"
	leaderPolled    = "polled "
	leaderLease     = "itemops-leader"
	leaderAction    = "example.io/never-done"
	killedRuns      = 4
	killedRunOps    = 2
	killMonitorTick = time.Second // the interval of both Monitors
)

// leaderSpec is what the child needs: the API server and the namespace.
type leaderSpec struct {
	Host      string
	TLS       rest.TLSClientConfig
	Token     string
	Namespace string
}

func (s leaderSpec) config() *rest.Config {
	return &rest.Config{Host: s.Host, TLSClientConfig: s.TLS, BearerToken: s.Token}
}

// TestLeaderKilled measures how long the operations of a leader killed with SIGKILL
// wait for their next poll: a child process runs a manager with leader election at
// controller-runtime's default timings (a 15 s lease, renewed every 2 s) and a Monitor
// over kubestore (default ClaimTTL, 30 s), which polls runs whose operations never end;
// once it polls them all, a manager in this process stands by, and the child is killed.
// The standby must then poll every operation, and none before the kill (the leader was
// polling until then). The time from the kill to the standby's first poll is logged, and
// recorded in docs/BENCHMARKS.md: with the takeover of the dead leader's claims as the
// standby's Monitor starts, and without it (a store that is no operations.ClaimTaker).
// No time is asserted.
func TestLeaderKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out a leader election at controller-runtime's default timings, twice")
	}
	cfg := config(t)
	crlog.SetLogger(logr.Discard()) // the managers have loggers of their own
	for _, tc := range []struct {
		name     string
		takeOver bool
	}{
		{"the standby takes over the dead leader's claims", true},
		{"the standby waits for the claims to expire", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // each waits on timers, in a namespace of its own
			testLeaderKilled(t, cfg, tc.takeOver)
		})
	}
}

func testLeaderKilled(t *testing.T, cfg *rest.Config, takeOver bool) {
	ctx := context.Background()
	ns := newNamespace(t, cfg)
	seedNeverDone(t, cfg, ns)

	// The leader: a child process, killed by the kernel if this test binary dies first.
	spec, err := json.Marshal(leaderSpec{Host: cfg.Host, TLS: cfg.TLSClientConfig, Token: cfg.BearerToken, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	specFile := t.TempDir() + "/leader.json"
	if err := os.WriteFile(specFile, spec, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestLeaderKillChild$")
	cmd.Env = append(os.Environ(), leaderChildEnv+"="+specFile)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the leader: %v", err)
	}
	exited := make(chan struct{})
	leader := newPollLog()
	go func() {
		leader.read(out)
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("the leader's log:\n%s", stderr.String())
		}
	})
	if !leader.waitAll(3 * time.Minute) {
		t.Fatalf("the leader did not poll every operation within 3 minutes")
	}

	// The standby, in this process.
	standby := newPollLog()
	var logMu sync.Mutex
	var logged []string
	log := funcr.New(func(prefix, args string) {
		logMu.Lock()
		defer logMu.Unlock()
		logged = append(logged, prefix+" "+args)
	}, funcr.Options{})
	mgr, err := manager.New(cfg, manager.Options{
		Logger:                  log,
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		LeaderElection:          true,
		LeaderElectionNamespace: ns,
		LeaderElectionID:        leaderLease,
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := kubestore.Open(ctx, cfg, ns, &kubestore.Options{Identity: "standby"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	var store operations.Store = s
	if !takeOver {
		// The store without its ClaimTaker, as every store was before it had one.
		store = struct {
			operations.Store
			operations.ClaimKeeper
		}{s, s}
	}
	if _, err := controllerruntime.New(mgr, store, standby.resolver(), controllerruntime.WithRegistry(nil),
		controllerruntime.WithMonitorOptions(monitor.WithInterval(killMonitorTick))); err != nil {
		t.Fatal(err)
	}
	mctx, stop := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- mgr.Start(mctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-stopped; err != nil {
			t.Errorf("the standby's manager: %v", err)
		}
	})
	// Let the standby's elector try the Lease a few times (every 2 s) while the leader
	// polls, as a standby that has run for a while does.
	from := leader.calls()
	time.Sleep(5 * time.Second)
	if leader.calls() == from {
		t.Fatalf("the leader stopped polling before it was killed:\n%s", stderr.String())
	}
	if n := standby.calls(); n > 0 {
		t.Fatalf("the standby polled %d times while the leader led", n)
	}

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill the leader: %v", err)
	}
	killed := time.Now()
	<-exited
	var elected time.Time
	select {
	case <-mgr.Elected():
		elected = time.Now()
	case <-time.After(3 * time.Minute):
		t.Fatalf("the standby was not elected within 3 minutes of the kill")
	}
	if !standby.waitAll(3 * time.Minute) {
		t.Fatalf("the standby polled %d of %d operations within 3 minutes of the kill", standby.polled(), killedRuns*killedRunOps)
	}
	first, all := standby.firstAndAll()
	if first.Before(killed) {
		t.Errorf("the standby polled at %s, before the leader was killed at %s", first, killed)
	}
	t.Logf("kill -9 of the leader → the standby's first poll: %.1f s (elected after %.1f s, first poll %.1f s later); "+
		"every operation polled again: %.1f s (takeover: %v)",
		first.Sub(killed).Seconds(), elected.Sub(killed).Seconds(), first.Sub(elected).Seconds(), all.Sub(killed).Seconds(), takeOver)

	logMu.Lock()
	defer logMu.Unlock()
	took := false
	for _, l := range logged {
		if strings.Contains(l, "took over the claims of other replicas") {
			took = true
			if !strings.Contains(l, `"sessionsEnded"=1`) {
				t.Errorf("the standby's takeover logged %s, want 1 session ended (the leader's)", l)
			}
		}
	}
	if took != takeOver {
		t.Errorf("the standby logged a takeover: %v, want %v", took, takeOver)
	}
}

// TestLeaderKillChild is the leader of TestLeaderKilled, in a child process: it runs its
// manager until it is killed, and does nothing when run otherwise.
func TestLeaderKillChild(t *testing.T) {
	file := os.Getenv(leaderChildEnv)
	if file == "" {
		t.Skip("the leader that TestLeaderKilled starts and kills")
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var spec leaderSpec
	if err := json.Unmarshal(data, &spec); err != nil {
		t.Fatal(err)
	}
	cfg := spec.config()
	crlog.SetLogger(logr.Discard()) // the manager has a logger of its own
	// A guard: the test kills the child long before.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	mgr, err := manager.New(cfg, manager.Options{
		Logger:                  funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) }, funcr.Options{}),
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		LeaderElection:          true,
		LeaderElectionNamespace: spec.Namespace,
		LeaderElectionID:        leaderLease,
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := kubestore.Open(ctx, cfg, spec.Namespace, &kubestore.Options{Identity: "leader"})
	if err != nil {
		t.Fatal(err)
	}
	printing := operations.ResolverFunc(func(string) (operations.Tracker, error) { return printTracker{}, nil })
	if _, err := controllerruntime.New(mgr, s, printing, controllerruntime.WithRegistry(nil),
		controllerruntime.WithMonitorOptions(monitor.WithInterval(killMonitorTick))); err != nil {
		t.Fatal(err)
	}
	if err := mgr.Start(ctx); err != nil {
		t.Fatal(err)
	}
}

// printTracker is the plugin of the leader: its operations never end, and it prints
// each call on the standard output for TestLeaderKilled to read.
type printTracker struct{}

func (printTracker) Progress(_ context.Context, op operations.Operation) (operations.Progress, error) {
	fmt.Printf("%s%s %s\n", leaderPolled, op.Owner.Name, op.ID)
	return operations.Progress{}, nil
}

func (printTracker) Cancel(context.Context, operations.Operation) error { return nil }

// seedNeverDone creates killedRuns waiting runs of killedRunOps operations each.
func seedNeverDone(t *testing.T, cfg *rest.Config, ns string) {
	t.Helper()
	ctx := context.Background()
	s, err := kubestore.Open(ctx, cfg, ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Now()
	for i := range killedRuns {
		o := operations.Owner{Kind: phase.Backup, Name: fmt.Sprintf("run-%d", i), UID: "uid"}
		r := operations.Run{Owner: o, Phase: phase.New, Created: now}
		if err := r.SetPhase(phase.WaitingForPluginOperations, "seeded", now); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateRun(ctx, r); err != nil {
			t.Fatal(err)
		}
		ops := make([]operations.Operation, killedRunOps)
		for j := range ops {
			ops[j] = operations.Operation{Owner: o, Action: leaderAction, ID: fmt.Sprintf("op-%d", j),
				Status: operations.Status{Phase: operations.OperationNew, Created: now}}
		}
		if err := s.PutOperations(ctx, o, ops); err != nil {
			t.Fatal(err)
		}
	}
}

// pollLog records the Progress calls of one manager's Monitor: the time of each
// operation's first call, and how many calls there were.
type pollLog struct {
	mu    sync.Mutex
	first map[string]time.Time // by run and operation
	n     int
	all   chan struct{} // closed once every operation was polled
}

func newPollLog() *pollLog {
	return &pollLog{first: make(map[string]time.Time), all: make(chan struct{})}
}

func (p *pollLog) record(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	if _, ok := p.first[key]; ok {
		return
	}
	p.first[key] = time.Now()
	if len(p.first) == killedRuns*killedRunOps {
		close(p.all)
	}
}

// read records the calls that the leader prints on r, until r ends.
func (p *pollLog) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if key, ok := strings.CutPrefix(sc.Text(), leaderPolled); ok {
			p.record(key)
		}
	}
}

// resolver returns the plugin of the standby, which records its calls in p.
func (p *pollLog) resolver() operations.Resolver {
	return operations.ResolverFunc(func(string) (operations.Tracker, error) { return recordTracker{p}, nil })
}

func (p *pollLog) waitAll(d time.Duration) bool {
	select {
	case <-p.all:
		return true
	case <-time.After(d):
		return false
	}
}

func (p *pollLog) calls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

func (p *pollLog) polled() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.first)
}

// firstAndAll returns when the first operation was polled, and when the last of them
// was first polled.
func (p *pollLog) firstAndAll() (first, all time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, at := range p.first {
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(all) {
			all = at
		}
	}
	return first, all
}

// recordTracker is the plugin of the standby: its operations never end.
type recordTracker struct{ p *pollLog }

func (r recordTracker) Progress(_ context.Context, op operations.Operation) (operations.Progress, error) {
	r.p.record(op.Owner.Name + " " + op.ID)
	return operations.Progress{}, nil
}

func (recordTracker) Cancel(context.Context, operations.Operation) error { return nil }
