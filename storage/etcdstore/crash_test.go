package etcdstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/etcdstore"
	"github.com/itemops/itemops/storage/etcdstore/internal/etcdtest"
)

// envCrashKills sets how many times TestCrashServer kills etcd; the default is 30, and
// 5 with -short.
const envCrashKills = "ITEMOPS_ETCD_CRASH_KILLS"

// TestCrashServer kills the etcd server with SIGKILL at random moments while a client
// writes through a Store: run updates, small batches, and batches far larger than one
// transaction (so the engine stages them). After each restart on the same data
// directory, once the client has finished the write it was making (it retries a write
// that failed until it succeeds, as every write here may be repeated), the store must
// hold exactly what the writes made: no write that returned nil is lost, and no batch
// is visible in part.
func TestCrashServer(t *testing.T) {
	kills := 30
	if testing.Short() {
		kills = 5
	}
	if v := os.Getenv(envCrashKills); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, envCrashKills)
		kills = n
	}
	// The server's own process, with fsync on, its data in t.TempDir().
	srv, err := etcdtest.StartProcess(etcdstore.ServerBin(), t.TempDir(), false)
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	client := etcdstore.NewClient(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var s *etcdstore.Store
	require.Eventually(t, func() bool {
		s, err = etcdstore.Open(ctx, client, "crash/", &etcdstore.Options{MaxTxnOps: 16, MaxRequestBytes: 16 * 1024, RequestTimeout: time.Second})
		return err == nil
	}, time.Minute, 20*time.Millisecond, "Open: %v", err)
	t.Cleanup(func() { s.Close() })

	plan := crashPlan{seed: rand.Uint64()}
	t.Logf("plan seed %d", plan.seed)
	w := &crashWriter{plan: plan, s: s, model: newCrashModel()}
	for _, o := range crashOwners {
		w.do(ctx, t, func() error {
			err := s.CreateRun(ctx, operations.Run{Owner: o, Phase: phase.WaitingForPluginOperations})
			if errors.Is(err, operations.ErrExists) { // the first try was made
				return nil
			}
			return err
		})
	}
	done := make(chan error, 1)
	go func() { done <- w.run(ctx) }()

	rng := rand.New(rand.NewPCG(plan.seed, 0))
	for k := range kills {
		before := w.steps.Load()
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
		srv.Kill()
		require.NoError(t, srv.Restart())
		w.mu.Lock() // the writer has finished its step
		w.model.check(t, ctx, s, fmt.Sprintf("after kill %d", k+1))
		w.mu.Unlock()
		if t.Failed() {
			break
		}
		// Each kill comes while writes go on: wait for one more step if none was made.
		for w.steps.Load() == before && !t.Failed() {
			time.Sleep(5 * time.Millisecond)
		}
	}
	cancel()
	require.NoError(t, <-done)
	t.Logf("%d kills, %d steps, %d batches of %d operations or more, %d writes failed and retried",
		kills, w.steps.Load(), w.large.Load(), crashLarge, w.retries.Load())
	require.Greater(t, w.steps.Load(), int64(kills), "steps written")
	require.Positive(t, w.large.Load(), "large batches written")
}

var crashOwners = []operations.Owner{
	{Kind: phase.Backup, Name: "b0", UID: "u-b0"},
	{Kind: phase.Backup, Name: "b1", UID: "u-b1"},
	{Kind: phase.Restore, Name: "r0", UID: "u-r0"},
}

const (
	crashPool  = 400 // operation IDs per run: batches mostly rewrite earlier operations
	crashLarge = 100 // a large batch has at least this many operations
)

// A crashPlan is the deterministic sequence of writes: step n (from 1) goes to run n%3;
// it is a batch when n is odd, else a run update.
type crashPlan struct{ seed uint64 }

func (p crashPlan) owner(n int) operations.Owner { return crashOwners[n%len(crashOwners)] }

// batch returns batch n: 1 to 40 operations, now and then 100 to 300. Each records n
// and the batch's size, so a batch seen in part does not match the model. Operation j
// finishes at a step of its own and stays finished.
func (p crashPlan) batch(n int) []operations.Operation {
	r := rand.New(rand.NewPCG(p.seed, uint64(n)))
	size := 1 + r.IntN(40)
	if r.IntN(6) == 0 {
		size = crashLarge + r.IntN(201)
	}
	o := p.owner(n)
	t0 := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	ops := make([]operations.Operation, 0, size)
	for _, j := range r.Perm(crashPool)[:size] {
		ph := operations.OperationInProgress
		if n >= 20+int(rand.New(rand.NewPCG(p.seed, uint64(j)<<32)).IntN(1500)) {
			ph = operations.OperationCompleted
		}
		ops = append(ops, operations.Operation{
			Owner: o, Action: "example.io/mover", ID: fmt.Sprintf("op-%03d", j),
			Resource: operations.ResourceIdentifier{Resource: "pvc", Namespace: "app", Name: fmt.Sprintf("data-%03d", j)},
			Status: operations.Status{Phase: ph, NCompleted: int64(n), NTotal: int64(size),
				Description: fmt.Sprintf("batch %d of %d", n, size), Created: t0},
		})
	}
	return ops
}

// update is step n's run update: it appends n to the run's FailureReason and counts it
// in Errors, unless the run already ends with n (a retry of a write that was made).
func update(n int) func(r *operations.Run) error {
	return func(r *operations.Run) error {
		if strings.HasSuffix(r.FailureReason, " "+strconv.Itoa(n)) {
			return nil
		}
		r.FailureReason += " " + strconv.Itoa(n)
		r.Errors++
		return nil
	}
}

// crashWriter takes the plan's steps one by one, each until it succeeds, holding mu
// while it does.
type crashWriter struct {
	plan crashPlan
	s    *etcdstore.Store

	mu    sync.Mutex // held while a step is made; guards model
	model *crashModel

	steps, large, retries atomic.Int64
}

func (w *crashWriter) run(ctx context.Context) error {
	for n := 1; ; n++ {
		w.mu.Lock()
		err := w.step(ctx, n)
		w.mu.Unlock()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		w.steps.Add(1)
	}
}

// step makes step n, trying again after errors etcd's absence explains, and records it
// in the model once made.
func (w *crashWriter) step(ctx context.Context, n int) error {
	o := w.plan.owner(n)
	var write func() error
	var ops []operations.Operation
	if n%2 == 1 {
		ops = w.plan.batch(n)
		write = func() error { return w.s.PutOperations(ctx, o, ops) }
	} else {
		write = func() error { _, err := w.s.UpdateRun(ctx, o, update(n)); return err }
	}
	if err := w.retry(ctx, write); err != nil {
		return fmt.Errorf("step %d: %w", n, err)
	}
	if ops != nil {
		w.model.put(o, ops)
		if len(ops) >= crashLarge {
			w.large.Add(1)
		}
	} else {
		w.model.update(o, update(n))
	}
	return nil
}

// retry calls write until it succeeds, while its errors are those of a server that is
// down or just restarted.
func (w *crashWriter) retry(ctx context.Context, write func() error) error {
	for {
		err := write()
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, etcdstore.ErrUnavailable), errors.Is(err, operations.ErrConflict):
			w.retries.Add(1)
			time.Sleep(10 * time.Millisecond)
		default:
			return err
		}
	}
}

// do makes a write before the writer starts, with the same retries.
func (w *crashWriter) do(ctx context.Context, t *testing.T, write func() error) {
	t.Helper()
	require.NoError(t, w.retry(ctx, write))
}

// crashModel is what the store must hold: each run's record and its operations in
// first-put order.
type crashModel struct {
	runs map[operations.Owner]operations.Run
	ops  map[operations.Owner][]operations.Operation
}

func newCrashModel() *crashModel {
	m := &crashModel{runs: map[operations.Owner]operations.Run{}, ops: map[operations.Owner][]operations.Operation{}}
	for _, o := range crashOwners {
		m.runs[o] = operations.Run{Owner: o, Phase: phase.WaitingForPluginOperations}
	}
	return m
}

func (m *crashModel) put(o operations.Owner, ops []operations.Operation) {
	for _, op := range ops {
		i := slices.IndexFunc(m.ops[o], func(x operations.Operation) bool { return x.ID == op.ID })
		if i < 0 {
			m.ops[o] = append(m.ops[o], op)
		} else {
			m.ops[o][i] = op
		}
	}
}

func (m *crashModel) update(o operations.Owner, f func(*operations.Run) error) {
	r := m.runs[o]
	_ = f(&r)
	m.runs[o] = r
}

// check compares the store with the model.
func (m *crashModel) check(t *testing.T, ctx context.Context, s operations.Store, when string) {
	t.Helper()
	for _, o := range crashOwners {
		var r operations.Run
		var all, open []operations.Operation
		err := (&crashWriter{}).retry(ctx, func() (err error) {
			if r, err = s.GetRun(ctx, o); err != nil {
				return err
			}
			if all, err = s.ListOperations(ctx, o, operations.OperationFilter{}); err != nil {
				return err
			}
			open, err = s.ListOperations(ctx, o, operations.OperationFilter{Phases: []operations.OperationPhase{operations.OperationInProgress}})
			return err
		})
		require.NoError(t, err, "%s: read %s", when, o)
		want := m.runs[o]
		if r.FailureReason != want.FailureReason || r.Errors != want.Errors {
			t.Errorf("%s: run %s holds updates %q (%d), want %q (%d)", when, o, r.FailureReason, r.Errors, want.FailureReason, want.Errors)
		}
		if d := cmp.Diff(m.ops[o], all, cmpopts.EquateEmpty()); d != "" {
			t.Errorf("%s: operations of %s (-want +got):\n%s", when, o, d)
		}
		wantOpen := slices.DeleteFunc(slices.Clone(m.ops[o]), func(op operations.Operation) bool { return op.Status.Phase.Finished() })
		if d := cmp.Diff(wantOpen, open, cmpopts.EquateEmpty()); d != "" {
			t.Errorf("%s: unfinished operations of %s (-want +got):\n%s", when, o, d)
		}
	}
}
