package faulttest

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/decorate"
	"github.com/itemops/itemops/storage/memstore"
)

// faulty returns s behind faults, as a channel to a server would be: a lost answer
// makes the call and then fails it, a refusal or a reset fails it without making it.
func faulty(s operations.Store, faults *Faults) operations.Store {
	return decorate.Store(s, func(ctx context.Context, c decorate.Call, call func(context.Context) error) error {
		f := faults.Next()
		switch f.Kind {
		case Delay:
			time.Sleep(f.Wait)
		case LoseAnswer:
			if err := call(ctx); err != nil {
				return err
			}
			return errors.New("fault injected: answer lost")
		case Refuse, Reset:
			return errors.New("fault injected: " + f.Kind.String())
		}
		return call(ctx)
	})
}

// memConfig returns a Config of replicas that share the memstore s, each made by wrap.
func memConfig(s operations.Store, wrap func(operations.Store) operations.Store) Config {
	return Config{
		Open: func(_ int, faults *Faults) (operations.Store, error) {
			return faulty(wrap(s), faults), nil
		},
		Fresh: func() (operations.Store, error) { return s, nil },
		Calls: 2000,
	}
}

func TestSoundStorePasses(t *testing.T) {
	t.Parallel()
	for seed := range int64(3) {
		s := memstore.New()
		rep, problems, err := execute(seed, memConfig(s, func(s operations.Store) operations.Store { return s }))
		if err != nil {
			t.Fatal(err)
		}
		t.Log(rep)
		if len(problems) > 0 {
			t.Errorf("seed %d: a sound store fails the harness:\n%s", seed, strings.Join(problems, "\n"))
		}
		if rep.Unknown == 0 || rep.Calls["UpdateRun"] == 0 || rep.Calls["PutOperations"] == 0 {
			t.Errorf("seed %d: the workload left calls out: %v", seed, rep)
		}
	}
}

// dropping acknowledges every tenth PutOperations without writing it.
type dropping struct {
	*memstore.Store
	n atomic.Int64
}

func (d *dropping) PutOperations(ctx context.Context, o operations.Owner, ops []operations.Operation) error {
	if d.n.Add(1)%10 == 0 {
		return nil
	}
	return d.Store.PutOperations(ctx, o, ops)
}

// stale answers every other GetRun with the run it read the time before.
type stale struct {
	*memstore.Store
	mu   sync.Mutex
	n    int
	last map[operations.Owner]operations.Run
}

func (s *stale) GetRun(ctx context.Context, o operations.Owner) (operations.Run, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	if r, ok := s.last[o]; ok && s.n%2 == 0 {
		return r, nil
	}
	r, err := s.Store.GetRun(ctx, o)
	if err == nil {
		s.last[o] = r
	}
	return r, err
}

// halfBatch writes only the first operation of every third batch of more than one,
// whether the batch comes by PutOperations or by a pass's CommitPass.
type halfBatch struct {
	*memstore.Store
	n atomic.Int64
}

func (h *halfBatch) cut(ops []operations.Operation) []operations.Operation {
	if len(ops) > 1 && h.n.Add(1)%3 == 0 {
		return ops[:1]
	}
	return ops
}

func (h *halfBatch) PutOperations(ctx context.Context, o operations.Owner, ops []operations.Operation) error {
	return h.Store.PutOperations(ctx, o, h.cut(ops))
}

func (h *halfBatch) CommitPass(ctx context.Context, r operations.PassRun, ops []operations.Operation) error {
	return h.Store.CommitPass(ctx, r, h.cut(ops))
}

// staleCommit writes a pass's batch whatever happened to its run since the pass read
// it.
type staleCommit struct{ *memstore.Store }

func (s staleCommit) CommitPass(ctx context.Context, r operations.PassRun, ops []operations.Operation) error {
	return s.Store.PutOperations(ctx, r.Run.Owner, ops)
}

// TestBrokenStoresFail shows that the harness catches a store that breaks the contract.
// A seed fixes the workload but not how the workers interleave, so a broken store
// escapes some runs of a seed: measured, 1 in 120 for the stale read and 3 in 120 for
// the stale pass. Each store is run on seeds 0, 1, 2, ... until one catches it, and the
// test fails when five in a row pass it.
func TestBrokenStoresFail(t *testing.T) {
	t.Parallel()
	for name, wrap := range map[string]func(*memstore.Store) operations.Store{
		"acknowledged write dropped": func(s *memstore.Store) operations.Store { return &dropping{Store: s} },
		"stale read": func(s *memstore.Store) operations.Store {
			return &stale{Store: s, last: make(map[operations.Owner]operations.Run)}
		},
		"batch written in part":          func(s *memstore.Store) operations.Store { return &halfBatch{Store: s} },
		"pass committed on a stale read": func(s *memstore.Store) operations.Store { return staleCommit{s} },
	} {
		t.Run(name, func(t *testing.T) {
			for seed := range int64(5) {
				s := memstore.New()
				broken := wrap(s)
				cfg := memConfig(s, func(operations.Store) operations.Store { return broken })
				cfg.Calls = 300
				start := time.Now()
				rep, problems, err := execute(seed, cfg)
				if err != nil {
					t.Fatal(err)
				}
				t.Log(rep, time.Since(start))
				caught := false
				for _, p := range problems {
					// A check that did not end in time found nothing.
					caught = caught || !strings.Contains(p, "did not end")
					t.Logf("seed %d: %s", seed, p)
				}
				if caught {
					return
				}
				t.Logf("seed %d: the harness passes a store whose %s", seed, name)
			}
			t.Errorf("the harness passes a store whose %s on five seeds in a row", name)
		})
	}
}

// TestRoundTripper checks each kind of fault of the transport against a server that
// counts the requests it gets.
func TestRoundTripper(t *testing.T) {
	var got atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		w.Write([]byte("{}"))
	}))
	defer srv.Close()
	for _, tc := range []struct {
		fault   Fault
		method  string
		reached bool
		status  int // 0: a transport error
	}{
		{fault: Fault{Kind: None}, method: "GET", reached: true, status: 200},
		{fault: Fault{Kind: Delay, Wait: time.Millisecond}, method: "GET", reached: true, status: 200},
		{fault: Fault{Kind: LoseAnswer}, method: "PUT", reached: true},
		{fault: Fault{Kind: LoseAnswer, Status: 504}, method: "PUT", reached: true, status: 504},
		{fault: Fault{Kind: Refuse, Status: 409}, method: "PUT", status: 409},
		{fault: Fault{Kind: Refuse, Status: 409}, method: "POST", status: 503},
		{fault: Fault{Kind: Refuse, Status: 429}, method: "POST", status: 429},
		{fault: Fault{Kind: Reset}, method: "DELETE"},
	} {
		rt := faultyTransport{rt: http.DefaultTransport, next: func() Fault { return tc.fault }}
		before := got.Load()
		req, _ := http.NewRequest(tc.method, srv.URL+"/x", strings.NewReader("{}"))
		resp, err := rt.RoundTrip(req)
		if reached := got.Load() > before; reached != tc.reached {
			t.Errorf("%v %s: the server got the request: %t, want %t", tc.fault, tc.method, reached, tc.reached)
		}
		switch {
		case tc.status == 0 && err == nil:
			t.Errorf("%v %s: status %d, want a transport error", tc.fault, tc.method, resp.StatusCode)
		case tc.status != 0 && err != nil:
			t.Errorf("%v %s: %v, want status %d", tc.fault, tc.method, err, tc.status)
		case tc.status != 0 && resp.StatusCode != tc.status:
			t.Errorf("%v %s: status %d, want %d", tc.fault, tc.method, resp.StatusCode, tc.status)
		}
		if resp != nil {
			resp.Body.Close()
		}
	}
}

// gatedServer is a Server over a gate that every store call passes: a pause holds the
// gate until Resume, a restart holds it for a moment. It records what it was asked.
type gatedServer struct {
	gate    sync.RWMutex
	mu      sync.Mutex
	events  []string
	restart error // what Restart returns
}

func (g *gatedServer) record(e string) {
	g.mu.Lock()
	g.events = append(g.events, e)
	g.mu.Unlock()
}

func (g *gatedServer) Pause() error  { g.record("pause"); g.gate.Lock(); return nil }
func (g *gatedServer) Resume() error { g.record("resume"); g.gate.Unlock(); return nil }

func (g *gatedServer) Restart() error {
	g.record("restart")
	g.gate.Lock()
	time.Sleep(10 * time.Millisecond)
	g.gate.Unlock()
	return g.restart
}

// pass makes a store call through the gate, taking 10 ms, as a call to a server would.
// A ReadPass waits at the gate but does not hold it: its call spans the calls that its
// function makes, which would wait behind a pause for a gate the ReadPass holds.
func (g *gatedServer) pass(s operations.Store) operations.Store {
	return decorate.Store(s, func(ctx context.Context, c decorate.Call, call func(context.Context) error) error {
		g.gate.RLock()
		time.Sleep(10 * time.Millisecond)
		if c.Method == "ReadPass" {
			g.gate.RUnlock()
			return call(ctx)
		}
		defer g.gate.RUnlock()
		return call(ctx)
	})
}

// TestServerPausedAndRestarted checks what the harness does to a Config.Server: a
// pause first, then a restart, every pause resumed before anything else happens, the
// server running when the workload ends, the Report's counts true, and an error of the
// server ending the harness.
func TestServerPausedAndRestarted(t *testing.T) {
	t.Parallel() // its calls mostly wait, as calls to a server do
	s := memstore.New()
	srv := &gatedServer{}
	cfg := memConfig(s, srv.pass)
	cfg.Calls = 1200
	cfg.Server = srv
	rep, problems, err := execute(1, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Errorf("a sound store fails the harness:\n%s", strings.Join(problems, "\n"))
	}
	srv.mu.Lock()
	events := slices.Clone(srv.events)
	srv.mu.Unlock()
	t.Log(rep, events)
	if len(events) < 3 || events[0] != "pause" || events[1] != "resume" || events[2] != "restart" {
		t.Fatalf("the server was asked %v; want a pause, its resume and a restart first", events)
	}
	pauses, restarts := 0, 0
	for i, e := range events {
		switch e {
		case "pause":
			pauses++
			if i+1 == len(events) || events[i+1] != "resume" {
				t.Errorf("event %d of %v: a pause not followed by its resume", i, events)
			}
		case "restart":
			restarts++
		}
	}
	if rep.Pauses != pauses || rep.Restarts != restarts {
		t.Errorf("Report says %d pauses and %d restarts; the server saw %d and %d", rep.Pauses, rep.Restarts, pauses, restarts)
	}

	srv = &gatedServer{restart: errors.New("cannot start")}
	cfg = memConfig(memstore.New(), srv.pass)
	cfg.Calls = 1200
	cfg.Server = srv
	if _, _, err := execute(1, cfg); err == nil || !strings.Contains(err.Error(), "cannot start") {
		t.Errorf("execute with a server that cannot restart: %v; want its error", err)
	}
}
