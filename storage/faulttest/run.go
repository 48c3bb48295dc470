package faulttest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/phase"
)

// The environment variables that replay a run of the harness and set its length.
const (
	// SeedEnv, when set, is the seed of the run (a decimal int64); else the seed is
	// drawn from the clock, and printed.
	SeedEnv = "ITEMOPS_FAULT_SEED"
	// CallsEnv, when set, is the number of store calls the workload makes before it
	// stops (Config.Calls when unset).
	CallsEnv = "ITEMOPS_FAULT_OPS"
)

// Config is what [Run] needs of a store, and the size of its workload.
type Config struct {
	// Open opens the store of replica i (0 <= i < Replicas) over the store's backend
	// that every replica shares (one etcd prefix, one Kubernetes namespace), through a
	// channel that asks faults what to do to each request it sends (see
	// [Faults.RoundTripper]). Open is called before faults are on; the store it
	// returns must be an operations.RunStarter. The caller closes it (t.Cleanup).
	Open func(i int, faults *Faults) (operations.Store, error)
	// Fresh opens a store over the same backend without faults, for the final read.
	Fresh func() (operations.Store, error)
	// Calls is how many store calls the workload makes, those of StartRun and of the
	// Monitors' passes included (at least; the calls under way when the count is
	// reached end). Zero means 2,000; ITEMOPS_FAULT_OPS overrides it.
	Calls int
	// Replicas is how many stores Open opens, each with a Monitor. Zero means 3.
	Replicas int
	// Owners is how many owners the runs belong to: few, so that calls collide. Zero
	// means 12 for every 2,000 calls (at least 12), so that each owner's history, which
	// porcupine searches alone, holds about 170 calls whatever the length: porcupine's
	// search grows steeply with the calls of unknown outcome in one history (with 6
	// owners, a check of kubestore's 2,000 calls once took over its 2 minutes).
	Owners int
	// Workers is how many goroutines call the stores at once. Zero means 6.
	Workers int
	// CheckTimeout bounds porcupine's search; a check that does not end in time fails
	// the test, as its result is unknown. Zero means 2 minutes for every 2,000 calls
	// (at least 2 minutes), as each owner's history searched is as long whatever the
	// number of calls, and there are as many more of them.
	CheckTimeout time.Duration
	// Server, when set, is the server that the stores share, which the harness pauses
	// and restarts while the workload runs (see [Server]). Nil: it does neither.
	Server Server
}

// A Server is the process of the server that the stores share, for the harness to
// pause and restart. While the workload runs, [Run] acts on it every 300 to 700 ms:
// first a pause, then a restart, then either at random, one restart in three. A pause
// lasts 50 to 500 ms. An error of a method ends the harness with that error.
type Server interface {
	// Pause stops the server's process (SIGSTOP): it neither answers nor refuses, and
	// connections to it stay open, until Resume (SIGCONT).
	Pause() error
	Resume() error
	// Restart kills the process that holds the server's data (SIGKILL), as a crash
	// does, starts it again on the same data, and returns once it serves: etcd itself,
	// or the etcd under a kube-apiserver.
	Restart() error
}

// A Report is what a run of the harness did.
type Report struct {
	Seed int64
	// Calls counts the store calls by method, the final read's included.
	Calls map[string]int
	// Requests counts the requests the channels sent while faults were on, and Faults
	// the faults injected, by kind.
	Requests int
	Faults   map[string]int
	// Unknown counts the calls whose outcome was unknown (an error that is not a
	// definite answer).
	Unknown int
	// Pauses and Restarts count what the harness did to Config.Server.
	Pauses, Restarts int
	// Workload is how long the workload took, Check how long the checks took.
	Workload, Check time.Duration
}

// TotalCalls returns the sum of r.Calls.
func (r Report) TotalCalls() int {
	n := 0
	for _, c := range r.Calls {
		n += c
	}
	return n
}

func (r Report) String() string {
	methods := make([]string, 0, len(r.Calls))
	for m := range r.Calls {
		methods = append(methods, m)
	}
	slices.Sort(methods)
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: %d store calls (", r.Seed, r.TotalCalls())
	for i, m := range methods {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d", m, r.Calls[m])
	}
	faulted := 0
	for k := Delay; k < numKinds; k++ {
		faulted += r.Faults[k.String()]
	}
	fmt.Fprintf(&b, "), %d requests, %d faulted (%.1f%%:", r.Requests, faulted, 100*float64(faulted)/float64(max(r.Requests, 1)))
	for k := Delay; k < numKinds; k++ {
		fmt.Fprintf(&b, " %s %d", k, r.Faults[k.String()])
	}
	fmt.Fprintf(&b, "), %d server pauses, %d server restarts, %d outcomes unknown; workload %s, checks %s",
		r.Pauses, r.Restarts, r.Unknown, r.Workload.Round(time.Millisecond), r.Check.Round(time.Millisecond))
	return b.String()
}

// Run runs a seeded random workload on the stores of cfg under faults, checks its
// history, logs its Report and returns it. It fails t, printing the seed and how to
// replay it, when the history is not linearizable or an invariant fails (see the
// package documentation), and when the workload made fewer than Config.Calls calls or
// fewer than 5% of its requests were faulted (a store whose requests do not pass
// through faults).
func Run(t *testing.T, cfg Config) Report {
	t.Helper()
	seed := time.Now().UnixNano()
	if v := os.Getenv(SeedEnv); v != "" {
		var err error
		if seed, err = strconv.ParseInt(v, 10, 64); err != nil {
			t.Fatalf("%s=%q: %v", SeedEnv, v, err)
		}
	}
	if v := os.Getenv(CallsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("%s=%q: want a positive number", CallsEnv, v)
		}
		cfg.Calls = n
	}
	cfg = withDefaults(cfg)
	t.Logf("fault harness: seed %d (replay: %s=%d go test -run '^%s$' in this package's directory)", seed, SeedEnv, seed, t.Name())
	rep, problems, err := execute(seed, cfg)
	if err != nil {
		t.Fatalf("fault harness, seed %d: %v", seed, err)
	}
	t.Log(rep)
	// The harness checks its own channel: a store whose requests do not pass through
	// faults (Config.Open not wired) shows too few faults, and is tested for nothing.
	if n := rep.TotalCalls(); n < cfg.Calls {
		problems = append(problems, fmt.Sprintf("%d store calls, want at least %d", n, cfg.Calls))
	}
	faulted := 0
	for _, n := range rep.Faults {
		faulted += n
	}
	if faulted*20 < rep.Requests || rep.Requests == 0 {
		problems = append(problems, fmt.Sprintf("%d of %d requests faulted, want at least 5%%: does Config.Open send the store's requests through faults?", faulted, rep.Requests))
	}
	if cfg.Server != nil && (rep.Pauses == 0 || rep.Restarts == 0) {
		problems = append(problems, fmt.Sprintf("the server was paused %d times and restarted %d times, want both at least once: the workload ended too soon", rep.Pauses, rep.Restarts))
	}
	if len(problems) > 0 {
		shown := problems
		if len(shown) > 20 {
			shown = append(shown[:20:20], fmt.Sprintf("... and %d more", len(problems)-20))
		}
		t.Errorf("fault harness, seed %d: %d failures:\n%s\nreplay: %s=%d %s=%d go test -run '^%s$' in this package's directory",
			seed, len(problems), strings.Join(shown, "\n"), SeedEnv, seed, CallsEnv, cfg.Calls, t.Name())
	}
	return rep
}

// execute is Run without a testing.T: it returns the report and what failed, or an
// error when the harness could not run at all.
func execute(seed int64, cfg Config) (Report, []string, error) {
	cfg = withDefaults(cfg)
	faults := NewFaults(seed)
	h := newHistory()
	w := &workload{cfg: cfg, h: h, owners: owners(cfg.Owners), ids: make(map[operations.Owner][]string), replaced: make(map[string]bool)}
	for i := range cfg.Replicas {
		s, err := cfg.Open(i, faults)
		if err != nil {
			return Report{}, nil, fmt.Errorf("open replica %d: %w", i, err)
		}
		rs, err := record(s, i, h)
		if err != nil {
			return Report{}, nil, err
		}
		w.stores = append(w.stores, rs)
		w.monitors = append(w.monitors, monitor.New(rs, progressing{},
			monitor.WithWorkers(2), monitor.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))))
	}

	start := time.Now()
	faults.Start()
	rep := Report{Seed: seed, Faults: make(map[string]int)}
	stop := make(chan struct{})
	disturbed := make(chan error, 1)
	go func() {
		if cfg.Server == nil {
			disturbed <- nil
			return
		}
		disturbed <- disturb(rand.New(rand.NewSource(seed-1)), cfg.Server, stop, &rep)
	}()
	var wg sync.WaitGroup
	for i := range cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.work(rand.New(rand.NewSource(seed + int64(i))))
		}()
	}
	wg.Wait()
	close(stop)
	err := <-disturbed
	faults.Stop()
	rep.Workload = time.Since(start)
	if err != nil {
		return rep, nil, fmt.Errorf("pause or restart the server: %w", err)
	}
	var byKind [numKinds]int
	rep.Requests, byKind = faults.Counts()
	for k := Delay; k < numKinds; k++ {
		rep.Faults[k.String()] = byKind[k]
	}

	start = time.Now()
	fresh, err := cfg.Fresh()
	if err != nil {
		return rep, nil, fmt.Errorf("open a fresh store: %w", err)
	}
	final, err := record(fresh, cfg.Replicas, h)
	if err != nil {
		return rep, nil, err
	}
	problems := w.finalRead(final)

	h.mu.Lock()
	calls := slices.Clone(h.calls)
	recorded := slices.Clone(h.problems)
	rep.Calls = make(map[string]int)
	for m, n := range h.methods {
		rep.Calls[m] = n
	}
	h.mu.Unlock()
	for _, c := range calls {
		if c.out.result == unknown {
			rep.Unknown++
		}
	}
	problems = append(problems, checkBatches(calls, w.batches, w.replaced, w.finalOps)...)
	m := model()
	history := operationsOf(calls, w.owners)
	switch porcupine.CheckOperationsTimeout(m, history, cfg.CheckTimeout) {
	case porcupine.Illegal:
		problems = append(problems, "the history is not linearizable"+illegal(m, history, min(cfg.CheckTimeout, time.Minute)))
	case porcupine.Unknown:
		problems = append(problems, fmt.Sprintf("the linearizability check did not end within %s", cfg.CheckTimeout))
	}
	rep.Check = time.Since(start)
	return rep, append(problems, recorded...), nil
}

// illegal says which owners' histories are not linearizable, writes each of them to a
// text file, one call a line with its invocation and return stamps ("?": unknown
// outcome), and has porcupine draw the whole history; it returns what to add to the
// failure's message.
func illegal(m porcupine.Model, history []porcupine.Operation, timeout time.Duration) string {
	var b strings.Builder
	for _, part := range m.Partition(history) {
		if porcupine.CheckOperationsTimeout(m, part, timeout) != porcupine.Illegal {
			continue
		}
		o := part[0].Input.(*input).owner
		fmt.Fprintf(&b, "; the calls of %s", o)
		f, err := os.CreateTemp("", "itemops-faulttest-*.txt")
		if err != nil {
			continue
		}
		for _, op := range part {
			end := "?"
			if op.Return != math.MaxInt64 {
				end = strconv.FormatInt(op.Return, 10)
			}
			fmt.Fprintf(f, "%d-%s client %d: %s\n", op.Call, end, op.ClientId, m.DescribeOperation(op.Input, op.Output))
		}
		longest(f, m, part, timeout)
		f.Close()
		fmt.Fprintf(&b, " are in %s", f.Name())
	}
	res, info := porcupine.CheckOperationsVerbose(m, history, timeout)
	if res != porcupine.Illegal {
		return b.String()
	}
	f, err := os.CreateTemp("", "itemops-faulttest-*.html")
	if err != nil {
		return b.String()
	}
	defer f.Close()
	if err := porcupine.Visualize(m, info, f); err != nil {
		return b.String()
	}
	return b.String() + "; porcupine's drawing of the history: " + f.Name()
}

// longest writes to w the end of the longest linearization porcupine found of part, a
// history that is not linearizable, with the states the model may be in after each
// call, and the calls that could not follow it.
func longest(w io.Writer, m porcupine.Model, part []porcupine.Operation, timeout time.Duration) {
	_, info := porcupine.CheckOperationsVerbose(m, part, timeout)
	lins := info.PartialLinearizations()
	if len(lins) == 0 {
		return
	}
	var best []int
	for _, l := range lins[0] {
		if len(l) > len(best) {
			best = l
		}
	}
	fmt.Fprintf(w, "\nthe longest linearization found holds %d of the %d calls; it ends with:\n", len(best), len(part))
	state := m.Init()
	done := make(map[int]bool)
	for i, k := range best {
		_, state = m.Step(state, part[k].Input, part[k].Output)
		done[k] = true
		if i >= len(best)-12 {
			fmt.Fprintf(w, "  %d client %d: %s\n    -> %s\n", part[k].Call, part[k].ClientId, m.DescribeOperation(part[k].Input, part[k].Output), m.DescribeState(state))
		}
	}
	fmt.Fprintf(w, "calls that do not follow it:\n")
	n := 0
	for k := range part {
		if !done[k] && n < 12 {
			n++
			fmt.Fprintf(w, "  %d client %d: %s\n", part[k].Call, part[k].ClientId, m.DescribeOperation(part[k].Input, part[k].Output))
		}
	}
}

func withDefaults(cfg Config) Config {
	if cfg.Calls == 0 {
		cfg.Calls = 2000
	}
	if cfg.Replicas == 0 {
		cfg.Replicas = 3
	}
	if cfg.Owners == 0 {
		cfg.Owners = max(12, 12*cfg.Calls/2000)
	}
	if cfg.Workers == 0 {
		cfg.Workers = 6
	}
	if cfg.CheckTimeout == 0 {
		cfg.CheckTimeout = max(2*time.Minute, time.Duration(cfg.Calls/2000)*2*time.Minute)
	}
	return cfg
}

// owners returns n owners, backups and restores.
func owners(n int) []operations.Owner {
	out := make([]operations.Owner, n)
	for i := range out {
		kind := phase.Backup
		if i%3 == 2 {
			kind = phase.Restore
		}
		name := fmt.Sprintf("run-%d", i)
		out[i] = operations.Owner{Kind: kind, Name: name, UID: "uid-" + name}
	}
	return out
}

// A batch is a batch of operations the workload wrote: the IDs it inserted (IDs no
// other batch uses), and the call that wrote it.
type batch struct {
	owner operations.Owner
	ids   []string
	start int64 // the stamp before the call
	acked bool
}

// workload is the random workload of Run.
type workload struct {
	cfg      Config
	h        *history
	owners   []operations.Owner
	stores   []operations.Store
	monitors []*monitor.Monitor

	batchSeq atomic.Int64

	mu       sync.Mutex
	ids      map[operations.Owner][]string // every ID put, for replacements and reads
	batches  []batch
	replaced map[string]bool // IDs a batch other than their first put
	finalOps map[operations.Owner][]operations.Operation
}

// t0 is the time stamped on what the workload writes.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)

// work makes calls until the history holds cfg.Calls of them. One call in 30 gets a
// deadline of less than 20 ms, which may end it at any point of its requests, as a
// caller that gives up would.
func (w *workload) work(rng *rand.Rand) {
	for w.h.count() < w.cfg.Calls {
		d := 30 * time.Second
		if rng.Intn(30) == 0 {
			d = time.Duration(rng.Int63n(int64(20 * time.Millisecond)))
		}
		ctx, cancel := context.WithTimeout(context.Background(), d)
		w.call(ctx, rng)
		cancel()
	}
}

func (w *workload) call(ctx context.Context, rng *rand.Rand) {
	i := rng.Intn(len(w.stores))
	s := w.stores[i]
	o := w.owners[rng.Intn(len(w.owners))]
	switch n := rng.Intn(100); {
	case n < 12:
		w.start(ctx, rng, s, o)
	case n < 22:
		_, _ = s.GetRun(ctx, o)
	case n < 34:
		w.update(ctx, rng, s, o)
	case n < 54:
		w.put(ctx, rng, s, o)
	case n < 62:
		_, _ = s.GetOperation(ctx, o, w.someID(rng, o))
	case n < 72:
		f := operations.OperationFilter{}
		if rng.Intn(2) == 0 {
			f.Phases = []operations.OperationPhase{operations.OperationNew, operations.OperationInProgress}
		}
		_, _ = s.ListOperations(ctx, o, f)
	case n < 80:
		f := operations.RunFilter{}
		switch rng.Intn(3) {
		case 0:
			f.Kind = o.Kind
		case 1:
			f.Phases = []phase.Phase{phase.WaitingForPluginOperations, phase.InProgress}
		}
		_, _ = s.ListRuns(ctx, f)
	case n < 84:
		_ = s.DeleteRun(ctx, o)
	default:
		_, _ = w.monitors[i].RunOnce(ctx)
	}
}

// newOps returns n operations of o with IDs no other batch has, and records them.
func (w *workload) newOps(rng *rand.Rand, o operations.Owner, n int) []operations.Operation {
	b := w.batchSeq.Add(1)
	ops := make([]operations.Operation, n)
	for i := range ops {
		id := fmt.Sprintf("b%d-%d", b, i)
		ops[i] = operations.Operation{
			Owner: o, Action: "example.io/mover", ID: id,
			Resource: operations.ResourceIdentifier{Resource: "persistentvolumeclaims", Namespace: "app", Name: "data-" + id},
			Status: operations.Status{Phase: operations.OperationNew, NTotal: 3, OperationUnits: "Bytes",
				Description: "copying " + id + " " + noise(rng), Created: t0},
		}
	}
	w.mu.Lock()
	for _, op := range ops {
		w.ids[o] = append(w.ids[o], op.ID)
	}
	w.mu.Unlock()
	return ops
}

// noise returns 256 hex digits at random: a text that does not compress, so that a
// run of a dozen operations outgrows a small inline limit and spills (kubestore).
func noise(rng *rand.Rand) string {
	var b strings.Builder
	for range 16 {
		fmt.Fprintf(&b, "%016x", rng.Uint64())
	}
	return b.String()
}

func (w *workload) someID(rng *rand.Rand, o operations.Owner) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	ids := w.ids[o]
	if len(ids) == 0 {
		return "none"
	}
	return ids[rng.Intn(len(ids))]
}

func (w *workload) addBatch(o operations.Owner, ops []operations.Operation, fresh int, start int64, err error) {
	b := batch{owner: o, start: start, acked: err == nil}
	for _, op := range ops[:fresh] {
		b.ids = append(b.ids, op.ID)
	}
	w.mu.Lock()
	for _, op := range ops[fresh:] {
		w.replaced[op.ID] = true
	}
	w.batches = append(w.batches, b)
	w.mu.Unlock()
}

// start starts the run of o with StartRun, with a batch of new operations.
func (w *workload) start(ctx context.Context, rng *rand.Rand, s operations.Store, o operations.Owner) {
	ops := w.newOps(rng, o, 1+rng.Intn(4))
	start := w.h.clock.Load()
	var called bool
	_, err := operations.StartRun(ctx, s, operations.Run{Owner: o, Created: t0}, func(context.Context) (operations.MainRun, error) {
		called = true
		return operations.MainRun{Operations: ops}, nil
	})
	if called {
		// StartRun answers nil when another call started the run first, with that
		// call's operations: its batch is checked whole, and the model checks the
		// rest.
		w.addBatch(o, ops, len(ops), start, errors.Join(err, errors.New("not acknowledged alone")))
	}
}

// update makes one of the workload's updates: a phase change or a cancel request.
func (w *workload) update(ctx context.Context, rng *rand.Rand, s operations.Store, o operations.Owner) {
	at := t0.Add(time.Duration(rng.Intn(1000)) * time.Second)
	if rng.Intn(3) == 0 {
		_, _ = s.UpdateRun(ctx, o, func(r *operations.Run) error {
			return r.RequestCancel("cancelled by the fault harness", at)
		})
		return
	}
	all := phase.Phases()
	to := all[rng.Intn(len(all))]
	_, _ = s.UpdateRun(ctx, o, func(r *operations.Run) error {
		return r.SetPhase(to, "moved by the fault harness", at)
	})
}

// put writes a batch of new operations and replacements of known ones.
func (w *workload) put(ctx context.Context, rng *rand.Rand, s operations.Store, o operations.Owner) {
	ops := w.newOps(rng, o, rng.Intn(4))
	if len(ops) == 0 && rng.Intn(2) == 0 {
		ops = w.newOps(rng, o, 1)
	}
	fresh := len(ops)
	for range rng.Intn(3) {
		id := w.someID(rng, o)
		if id == "none" || slices.ContainsFunc(ops, func(op operations.Operation) bool { return op.ID == id }) {
			continue
		}
		p := []operations.OperationPhase{operations.OperationInProgress, operations.OperationInProgress, operations.OperationCompleted, operations.OperationFailed}[rng.Intn(4)]
		ops = append(ops, operations.Operation{
			Owner: o, Action: "example.io/mover", ID: id,
			Resource: operations.ResourceIdentifier{Resource: "persistentvolumeclaims", Namespace: "app", Name: "data-" + id},
			Status: operations.Status{Phase: p, NCompleted: int64(1 + rng.Intn(3)), NTotal: 3, OperationUnits: "Bytes",
				Description: "replaced " + noise(rng), Created: t0},
		})
	}
	start := w.h.clock.Load()
	err := s.PutOperations(ctx, o, ops)
	w.addBatch(o, ops, fresh, start, err)
}

// finalRead reads every run and operation with s, a fresh store without faults, and
// returns what it finds wrong: a run that ListRuns and GetRun disagree on.
func (w *workload) finalRead(s operations.Store) []string {
	ctx := context.Background()
	var problems []string
	listed, err := s.ListRuns(ctx, operations.RunFilter{})
	if err != nil {
		return []string{fmt.Sprintf("final read: ListRuns: %v", err)}
	}
	w.finalOps = make(map[operations.Owner][]operations.Operation)
	for _, o := range w.owners {
		inList := slices.ContainsFunc(listed, func(r operations.Run) bool { return r.Owner.Kind == o.Kind && r.Owner.Name == o.Name })
		_, err := s.GetRun(ctx, o)
		switch {
		case err == nil && !inList:
			problems = append(problems, fmt.Sprintf("final read: GetRun reads %s, which ListRuns leaves out (a hidden run)", o))
		case errors.Is(err, operations.ErrNotFound) && inList:
			problems = append(problems, fmt.Sprintf("final read: ListRuns lists %s, which GetRun does not find", o))
		case err != nil && !errors.Is(err, operations.ErrNotFound):
			problems = append(problems, fmt.Sprintf("final read: GetRun(%s): %v", o, err))
		}
		ops, err := s.ListOperations(ctx, o, operations.OperationFilter{})
		if err != nil && !errors.Is(err, operations.ErrNotFound) {
			problems = append(problems, fmt.Sprintf("final read: ListOperations(%s): %v", o, err))
		}
		w.finalOps[o] = ops
		for _, op := range ops {
			if _, err := s.GetOperation(ctx, o, op.ID); err != nil {
				problems = append(problems, fmt.Sprintf("final read: GetOperation(%s, %s), which ListOperations lists: %v", o, op.ID, err))
			}
		}
	}
	for _, r := range listed {
		if !slices.ContainsFunc(w.owners, func(o operations.Owner) bool { return r.Owner.Kind == o.Kind && r.Owner.Name == o.Name }) {
			problems = append(problems, fmt.Sprintf("final read: ListRuns lists %s, a run no call created", r.Owner))
		}
	}
	return problems
}

// checkBatches returns the batches that the final read finds in part, and the
// acknowledged batches it does not find though no DeleteRun of their owner may have
// come after them.
//
// A batch some of whose IDs a later batch put again is not checked whole: when the run
// was deleted and created again in between, the later batch inserts them anew.
func checkBatches(calls []call, batches []batch, replaced map[string]bool, final map[operations.Owner][]operations.Operation) []string {
	var deletes []call
	for _, c := range calls {
		if c.in.method == "DeleteRun" && c.out.result != notFound {
			deletes = append(deletes, c)
		}
	}
	var problems []string
	for _, b := range batches {
		if len(b.ids) == 0 {
			continue
		}
		n := 0
		for _, op := range final[b.owner] {
			if slices.Contains(b.ids, op.ID) {
				n++
			}
		}
		deleted := slices.ContainsFunc(deletes, func(c call) bool {
			return c.in.owner.Name == b.owner.Name && c.in.owner.Kind == b.owner.Kind && c.end >= b.start
		})
		switch {
		case n != 0 && n != len(b.ids) && !slices.ContainsFunc(b.ids, func(id string) bool { return replaced[id] }):
			problems = append(problems, fmt.Sprintf("final read: %d of the %d new operations %v of a batch of %s (acknowledged: %t)",
				n, len(b.ids), b.ids, b.owner, b.acked))
		case n == 0 && b.acked && !deleted:
			problems = append(problems, fmt.Sprintf("final read: the acknowledged batch %v of %s is lost (no DeleteRun of the run came after it)",
				b.ids, b.owner))
		}
	}
	return problems
}

// progressing is the plugin of the Monitors' passes: each Progress moves an operation
// one step on, out of three, and the operation completes at the third.
type progressing struct{}

func (progressing) Resolve(string) (operations.Tracker, error) { return progressing{}, nil }

func (progressing) Progress(_ context.Context, op operations.Operation) (operations.Progress, error) {
	n := min(op.Status.NCompleted+1, 3)
	return operations.Progress{Completed: n == 3, NCompleted: n, NTotal: 3, OperationUnits: "Bytes",
		Description: fmt.Sprintf("step %d", n), Started: t0, Updated: t0.Add(time.Duration(n) * time.Second)}, nil
}

func (progressing) Cancel(context.Context, operations.Operation) error { return nil }
