package kv_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/kv"
	"github.com/itemops/itemops/storage/memstore"
)

var update = flag.Bool("update", false, "write the golden files of TestLayoutGolden and TestBackendCallTrace")

// goldenLimits are small enough that the workload's larger batches are staged.
var goldenLimits = kv.Limits{MaxOps: 8, MaxBytes: 64 << 10}

var goldenBase = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func goldenOp(o operations.Owner, id string, p operations.OperationPhase) operations.Operation {
	return operations.Operation{
		Owner:    o,
		Action:   "example.io/volume-snapshotter",
		Resource: operations.ResourceIdentifier{Resource: "persistentvolumeclaims", Namespace: "app", Name: "data-" + id},
		ID:       id,
		Status:   operations.Status{Phase: p, NTotal: 100, Created: goldenBase, Updated: goldenBase.Add(time.Minute)},
	}
}

func goldenOps(o operations.Owner, from, to int, p operations.OperationPhase) []operations.Operation {
	var ops []operations.Operation
	for i := from; i < to; i++ {
		ops = append(ops, goldenOp(o, fmt.Sprintf("op-%03d", i), p))
	}
	return ops
}

// goldenStore opens the engine over b, numbering its staged batches 1, 2, 3...
func goldenStore(t *testing.T, b kv.Backend) *kv.Store {
	t.Helper()
	n := uint64(0)
	s, err := kv.Open(context.Background(), b, kv.BatchNumbers(func() uint64 { n++; return n }))
	require.NoError(t, err)
	return s
}

// goldenWorkload makes the same calls on s every time, each checked: runs of Backup,
// Restore and a kind of one's own, batches that fit one commit and batches that are
// staged, operations that finish, phase changes, a cancel, a create that finds its run,
// reads of each kind, and a delete.
func goldenWorkload(t *testing.T, s *kv.Store) {
	t.Helper()
	ctx := context.Background()
	snapshot, err := phase.Declare("Snapshot", phase.Backup)
	require.NoError(t, err)
	bk := operations.Owner{Kind: phase.Backup, Name: "nightly", UID: "u-b"}
	rs := operations.Owner{Kind: phase.Restore, Name: "nightly", UID: "u-r"}
	sn := operations.Owner{Kind: "Snapshot", Name: "db/main", UID: "u-s"}
	run := func(o operations.Owner, profile phase.Profile) operations.Run {
		return operations.Run{Owner: o, Phase: phase.New, Profile: profile, Created: goldenBase, Updated: goldenBase}
	}
	at := func(m int) time.Time { return goldenBase.Add(time.Duration(m) * time.Minute) }
	setPhase := func(o operations.Owner, p phase.Phase, m int) {
		t.Helper()
		_, err := s.UpdateRun(ctx, o, func(r *operations.Run) error { return r.SetPhase(p, "golden", at(m)) })
		require.NoError(t, err)
	}

	require.NoError(t, s.CreateRun(ctx, run(bk, phase.Profile{})))
	require.NoError(t, s.CreateRunWithOperations(ctx, run(rs, phase.Profile{}), goldenOps(rs, 0, 3, operations.OperationNew)))
	require.NoError(t, s.CreateRunWithOperations(ctx, run(sn, snapshot), goldenOps(sn, 0, 20, operations.OperationNew)))
	require.ErrorIs(t, s.CreateRun(ctx, run(bk, phase.Profile{})), operations.ErrExists)

	// A batch that fits: updates in place, one that finishes, and new operations.
	batch := goldenOps(rs, 0, 5, operations.OperationInProgress)
	batch[1].Status.Phase = operations.OperationCompleted
	require.NoError(t, s.PutOperations(ctx, rs, batch))
	// A staged batch: finished, in progress and new operations.
	batch = goldenOps(sn, 10, 30, operations.OperationInProgress)
	for i := range 6 {
		batch[i].Status.Phase = operations.OperationFailed
		batch[i].Status.Error = "disk full"
	}
	require.NoError(t, s.PutOperations(ctx, sn, batch))
	require.NoError(t, s.PutOperations(ctx, bk, goldenOps(bk, 0, 2, operations.OperationNew)))

	setPhase(bk, phase.InProgress, 2)
	setPhase(bk, phase.WaitingForPluginOperations, 3)
	setPhase(rs, phase.InProgress, 2)
	setPhase(sn, phase.InProgress, 2)
	setPhase(sn, phase.WaitingForPluginOperations, 4)
	_, err = s.UpdateRun(ctx, rs, func(r *operations.Run) error { r.ItemsDone = 7; return nil })
	require.NoError(t, err)
	_, err = operations.RequestCancel(ctx, s, bk, "stopped by a test", at(5))
	require.NoError(t, err)

	_, err = s.GetRun(ctx, sn)
	require.NoError(t, err)
	_, err = s.GetOperation(ctx, sn, "op-015")
	require.NoError(t, err)
	for _, f := range []operations.OperationFilter{{}, {Phases: []operations.OperationPhase{operations.OperationNew, operations.OperationInProgress}}} {
		_, err = s.ListOperations(ctx, sn, f)
		require.NoError(t, err)
	}
	for _, f := range []operations.RunFilter{
		{},
		{Kind: "Snapshot"},
		{Phases: []phase.Phase{phase.WaitingForPluginOperations, phase.InProgress, phase.WaitingForPluginOperations}},
		{Kind: phase.Backup, Phases: []phase.Phase{phase.WaitingForPluginOperations}},
	} {
		_, err = s.ListRuns(ctx, f)
		require.NoError(t, err)
	}

	require.NoError(t, s.DeleteRun(ctx, rs))
	require.ErrorIs(t, s.DeleteRun(ctx, rs), operations.ErrNotFound)
}

// tracer is a Backend that writes a line of trace for every call made on b, and for
// what each Read reads, and passes every call on.
type tracer struct {
	b     kv.Backend
	mu    sync.Mutex
	trace bytes.Buffer
}

func (tr *tracer) printf(format string, args ...any) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	fmt.Fprintf(&tr.trace, format, args...)
}

func (tr *tracer) Read(ctx context.Context, fn func(kv.Reader) error) error {
	tr.printf("read\n")
	err := tr.b.Read(ctx, func(r kv.Reader) error { return fn(traceReader{r, tr}) })
	tr.printf("  = %v\n", errText(err))
	return err
}

type traceReader struct {
	r  kv.Reader
	tr *tracer
}

func (r traceReader) Get(ctx context.Context, key []byte) ([]byte, kv.Version, error) {
	v, ver, err := r.r.Get(ctx, key)
	r.tr.printf("  get %q: %q v%d %v\n", key, v, ver, errText(err))
	return v, ver, err
}

func (r traceReader) Scan(ctx context.Context, start, end []byte, fn func(key, value []byte, v kv.Version) error) error {
	r.tr.printf("  scan %q %q\n", start, end)
	return r.r.Scan(ctx, start, end, func(k, v []byte, ver kv.Version) error {
		r.tr.printf("    %q v%d\n", k, ver)
		return fn(k, v, ver)
	})
}

func (tr *tracer) Commit(ctx context.Context, conds []kv.Condition, writes []kv.Write) error {
	var b strings.Builder
	b.WriteString("commit\n")
	for _, c := range conds {
		fmt.Fprintf(&b, "  if %q v%d\n", c.Key, c.Version)
	}
	for _, w := range writes {
		switch {
		case w.Delete && len(w.End) > 0:
			fmt.Fprintf(&b, "  delete %q to %q\n", w.Key, w.End)
		case w.Delete:
			fmt.Fprintf(&b, "  delete %q\n", w.Key)
		default:
			fmt.Fprintf(&b, "  put %q %q\n", w.Key, w.Value)
		}
	}
	err := tr.b.Commit(ctx, conds, writes)
	fmt.Fprintf(&b, "  = %v\n", errText(err))
	tr.printf("%s", b.String())
	return err
}

func (tr *tracer) Limits() kv.Limits { return tr.b.Limits() }

// errText names the sentinel that err wraps, or gives its text.
func errText(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, kv.ErrConditionFailed):
		return "condition failed"
	}
	return err.Error()
}

// dump lists every key of b, with its version and value, in key order.
func dump(t *testing.T, b kv.Backend) []byte {
	t.Helper()
	var out bytes.Buffer
	require.NoError(t, b.Read(context.Background(), func(r kv.Reader) error {
		return r.Scan(context.Background(), nil, nil, func(k, v []byte, ver kv.Version) error {
			fmt.Fprintf(&out, "%q v%d %q\n", k, ver, v)
			return nil
		})
	}))
	return out.Bytes()
}

// checkGolden compares got with testdata/name, or writes it there under -update.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	if diff := cmp.Diff(strings.Split(string(want), "\n"), strings.Split(string(got), "\n")); diff != "" {
		t.Errorf("%s differs from what the workload gives (-want +got):\n%s", path, diff)
	}
}

// TestLayoutGolden holds the engine's layout on a flat Backend: every key, version and
// value that a fixed workload leaves in memstore's backend, with limits small enough
// that batches are staged, is what testdata/layout.golden holds.
func TestLayoutGolden(t *testing.T) {
	b := memstore.NewBackend(goldenLimits)
	goldenWorkload(t, goldenStore(t, b))
	checkGolden(t, "layout.golden", dump(t, b))
}

// TestBackendCallTrace holds the engine's calls on a flat Backend: every Read, with
// the keys it gets and the ranges it scans, and every Commit, with its conditions and
// writes in order, that the workload of TestLayoutGolden makes is what
// testdata/calls.golden holds.
func TestBackendCallTrace(t *testing.T) {
	tr := &tracer{b: memstore.NewBackend(goldenLimits)}
	goldenWorkload(t, goldenStore(t, tr))
	checkGolden(t, "calls.golden", tr.trace.Bytes())
}
