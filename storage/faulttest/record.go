package faulttest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// A history records every call of the stores that a run of the harness opened: its
// invocation and its response, each stamped by one counter, so that a call that
// returned before another was invoked has the smaller stamps.
type history struct {
	clock atomic.Int64

	mu       sync.Mutex
	calls    []call
	methods  map[string]int // calls by method, ClaimRun included
	problems []string       // what the recorder saw that fails the test at once
}

func newHistory() *history { return &history{methods: make(map[string]int)} }

// A call is one recorded call of a Store method.
type call struct {
	client       int // which recorder: a replica's, or the fresh store's
	start, end   int64
	in           input
	out          output
	listed       []runRec // ListRuns' result, projected onto each owner later
	unknownError error    // the error of a call whose outcome is unknown
}

// count returns how many calls were recorded.
func (h *history) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, c := range h.methods {
		n += c
	}
	return n
}

func (h *history) problem(format string, args ...any) {
	h.mu.Lock()
	h.problems = append(h.problems, fmt.Sprintf(format, args...))
	h.mu.Unlock()
}

// add records c, the call of a method that ended with err. A read that failed says
// nothing about the store and is left out of the history (it is still counted).
func (h *history) add(c call, err error) {
	c.end = h.clock.Add(1)
	if errors.Is(err, operations.ErrCorrupt) {
		h.problem("%s of %s by client %d: %v (the harness damages nothing, so no call may find the store corrupt)",
			c.in.method, c.in.owner, c.client, err)
	}
	c.out.result = classify(err, c.in.updates)
	if c.out.result == unknown {
		c.unknownError = err
		c.end = math.MaxInt64 // it may take effect at any time after its start
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.methods[c.in.method]++
	if !c.in.write() && c.out.result != ok && c.out.result != notFound {
		return
	}
	h.calls = append(h.calls, c)
}

// classify tells what err says of the outcome of a call: a definite answer, or
// unknown. The definite answers are those the contract gives for a call that changed
// nothing (not found, exists, a conflict, an invalid record, or the error of an
// UpdateRun's update function); anything else (a server that did not answer, a lost
// answer, a context that ended) leaves the outcome unknown.
func classify(err error, updates []invocation) result {
	switch {
	case err == nil:
		return ok
	case errors.Is(err, operations.ErrCorrupt):
		return unknown
	case errors.Is(err, operations.ErrNotFound):
		return notFound
	case errors.Is(err, operations.ErrExists):
		return exists
	case errors.Is(err, operations.ErrConflict):
		return conflict
	case errors.Is(err, operations.ErrInvalid), errors.Is(err, phase.ErrInvalidTransition), errors.Is(err, phase.ErrUnknownPhase):
		return refused
	}
	for _, u := range updates {
		if u.err != nil && errors.Is(err, u.err) {
			return refused
		}
	}
	return unknown
}

// recorder is an operations.Store and RunStarter that records every call it passes to
// its store in a history. Its claims pass straight through (claimingRecorder), and are
// counted but not checked: a claim is for efficiency, not safety (see
// operations.RunClaimer).
type recorder struct {
	s      operations.Store
	starts operations.RunStarter
	passer operations.PassReader
	client int
	h      *history
}

var (
	_ operations.Store      = (*recorder)(nil)
	_ operations.RunStarter = (*recorder)(nil)
	_ operations.PassReader = (*recorder)(nil)
	_ operations.RunClaimer = claimingRecorder{}
)

type claimingRecorder struct {
	*recorder
	claimer operations.RunClaimer
}

// record returns s recording its calls in h as client's. s must be a RunStarter and a
// PassReader, as every store of storage/kv is, so that operations.StartRun writes a
// run and its first operations at once and the Monitors' passes read and write as they
// do in production; its claims are kept when it is a RunClaimer.
func record(s operations.Store, client int, h *history) (operations.Store, error) {
	starts, ok := s.(operations.RunStarter)
	if !ok {
		return nil, fmt.Errorf("the store %T is not an operations.RunStarter", s)
	}
	passer, ok := s.(operations.PassReader)
	if !ok {
		return nil, fmt.Errorf("the store %T is not an operations.PassReader", s)
	}
	r := &recorder{s: s, starts: starts, passer: passer, client: client, h: h}
	if c, ok := s.(operations.RunClaimer); ok {
		return claimingRecorder{r, c}, nil
	}
	return r, nil
}

func (r *recorder) begin(in input) call {
	return call{client: r.client, start: r.h.clock.Add(1), in: in}
}

func (r *recorder) CreateRun(ctx context.Context, run operations.Run) error {
	c := r.begin(input{method: "CreateRun", owner: run.Owner, run: normalRun(run)})
	err := r.s.CreateRun(ctx, run)
	r.h.add(c, err)
	return err
}

func (r *recorder) CreateRunWithOperations(ctx context.Context, run operations.Run, ops []operations.Operation) error {
	c := r.begin(input{method: "CreateRunWithOperations", owner: run.Owner, run: normalRun(run), ops: normalOps(ops)})
	err := r.starts.CreateRunWithOperations(ctx, run, ops)
	r.h.add(c, err)
	return err
}

func (r *recorder) GetRun(ctx context.Context, o operations.Owner) (operations.Run, error) {
	c := r.begin(input{method: "GetRun", owner: o})
	run, err := r.s.GetRun(ctx, o)
	if err == nil {
		c.out.run = normalRun(run)
	}
	r.h.add(c, err)
	return run, err
}

func (r *recorder) UpdateRun(ctx context.Context, o operations.Owner, update func(*operations.Run) error) (operations.Run, error) {
	// The store calls update once or more; each call is recorded with the run it was
	// given and what it made of it, so that the model can tell which was written.
	var mu sync.Mutex
	var invs []invocation
	wrapped := update
	if update != nil {
		wrapped = func(run *operations.Run) error {
			before := normalRun(*run)
			err := update(run)
			mu.Lock()
			invs = append(invs, invocation{before: before, after: normalRun(*run), err: err})
			mu.Unlock()
			return err
		}
	}
	c := r.begin(input{method: "UpdateRun", owner: o})
	run, err := r.s.UpdateRun(ctx, o, wrapped)
	mu.Lock()
	c.in.updates = slices.Clone(invs)
	mu.Unlock()
	if err == nil {
		c.out.run = normalRun(run)
	}
	r.h.add(c, err)
	return run, err
}

func (r *recorder) ListRuns(ctx context.Context, f operations.RunFilter) ([]operations.Run, error) {
	c := r.begin(input{method: "ListRuns", runFilter: f})
	runs, err := r.s.ListRuns(ctx, f)
	if err == nil {
		c.listed = make([]runRec, len(runs))
		for i := range runs {
			c.listed[i] = *normalRun(runs[i])
		}
		if msg := checkList(runs, f); msg != "" {
			r.h.problem("ListRuns(%+v) by client %d: %s", f, r.client, msg)
		}
	}
	r.h.add(c, err)
	return runs, err
}

// checkList returns what is wrong with runs as a ListRuns(f) result on its own: a run
// f does not select, a run listed twice, or runs out of their order.
func checkList(runs []operations.Run, f operations.RunFilter) string {
	seen := make(map[operations.Owner]bool)
	for i, run := range runs {
		o := operations.Owner{Kind: run.Owner.Kind, Name: run.Owner.Name}
		switch {
		case !f.Match(run):
			return fmt.Sprintf("lists %s in phase %s, which the filter does not select", o, run.Phase)
		case seen[o]:
			return fmt.Sprintf("lists %s twice", o)
		case i > 0 && !runBefore(runs[i-1].Owner, run.Owner):
			return fmt.Sprintf("lists %s after %s", run.Owner, runs[i-1].Owner)
		}
		seen[o] = true
	}
	return ""
}

// runBefore reports whether ListRuns lists a run of a before one of b: Backup, then
// Restore, then kinds of one's own by name, then by name.
func runBefore(a, b operations.Owner) bool {
	rank := func(k phase.Kind) int {
		switch k {
		case phase.Backup:
			return 0
		case phase.Restore:
			return 1
		}
		return 2
	}
	if ra, rb := rank(a.Kind), rank(b.Kind); ra != rb {
		return ra < rb
	}
	if a.Kind != b.Kind {
		return a.Kind < b.Kind
	}
	return a.Name < b.Name
}

func (r *recorder) DeleteRun(ctx context.Context, o operations.Owner) error {
	c := r.begin(input{method: "DeleteRun", owner: o})
	err := r.s.DeleteRun(ctx, o)
	r.h.add(c, err)
	return err
}

func (r *recorder) PutOperations(ctx context.Context, o operations.Owner, ops []operations.Operation) error {
	c := r.begin(input{method: "PutOperations", owner: o, ops: normalOps(ops)})
	err := r.s.PutOperations(ctx, o, ops)
	r.h.add(c, err)
	return err
}

func (r *recorder) GetOperation(ctx context.Context, o operations.Owner, id string) (operations.Operation, error) {
	c := r.begin(input{method: "GetOperation", owner: o, id: id})
	op, err := r.s.GetOperation(ctx, o, id)
	if err == nil {
		c.out.ops = normalOps([]operations.Operation{op})
	}
	r.h.add(c, err)
	return op, err
}

func (r *recorder) ListOperations(ctx context.Context, o operations.Owner, f operations.OperationFilter) ([]operations.Operation, error) {
	c := r.begin(input{method: "ListOperations", owner: o, opFilter: f})
	ops, err := r.s.ListOperations(ctx, o, f)
	if err == nil {
		c.out.ops = normalOps(ops)
	}
	r.h.add(c, err)
	return ops, err
}

// ReadPass records each run of each page as a read of its owner (method ReadPass)
// that began when the page's read began (when ReadPass was called, or when fn returned
// the page before) and ended when fn got the page. Each PassRun's Snapshot then holds
// the run and operations read, for CommitPass to record.
func (r *recorder) ReadPass(ctx context.Context, f operations.RunFilter, fn func([]operations.PassRun) error) error {
	start := r.h.clock.Add(1)
	err := r.passer.ReadPass(ctx, f, func(page []operations.PassRun) error {
		for i := range page {
			pr := &page[i]
			c := call{client: r.client, start: start, in: input{method: "ReadPass", owner: pr.Run.Owner, runFilter: f}}
			read := &state{run: normalRun(pr.Run), ops: normalOps(pr.Operations)}
			c.out.run, c.out.ops = read.run, read.ops
			if !f.Match(pr.Run) {
				r.h.problem("ReadPass(%+v) by client %d gives %s in phase %s, which the filter does not select", f, r.client, pr.Run.Owner, pr.Run.Phase)
			}
			r.h.add(c, nil)
			pr.Snapshot = recordedSnapshot{inner: pr.Snapshot, read: read}
		}
		err := fn(page)
		start = r.h.clock.Add(1)
		return err
	})
	return err
}

// recordedSnapshot is the Snapshot of a PassRun that a recorder's ReadPass gave: the
// store's own, and the run and operations read.
type recordedSnapshot struct {
	inner any
	read  *state
}

// CommitPass records a write of ops on condition that the run is as it was read
// (method CommitPass).
func (r *recorder) CommitPass(ctx context.Context, pr operations.PassRun, ops []operations.Operation) error {
	c := r.begin(input{method: "CommitPass", owner: pr.Run.Owner, ops: normalOps(ops)})
	if snap, ok := pr.Snapshot.(recordedSnapshot); ok {
		c.in.read, pr.Snapshot = snap.read, snap.inner
	}
	err := r.passer.CommitPass(ctx, pr, ops)
	r.h.add(c, err)
	return err
}

func (r claimingRecorder) ClaimRun(ctx context.Context, o operations.Owner) (func(), bool, error) {
	release, ok, err := r.claimer.ClaimRun(ctx, o)
	if errors.Is(err, operations.ErrCorrupt) {
		r.h.problem("ClaimRun(%s) by client %d: %v", o, r.client, err)
	}
	r.h.mu.Lock()
	r.h.methods["ClaimRun"]++
	r.h.mu.Unlock()
	return release, ok, err
}
