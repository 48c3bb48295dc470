package boltstore

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/itemops/itemops/internal/testutil/racebuild"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// The crash test runs its writer in a child process: this test binary, started again with
// these variables set, which TestMain sends to crashChild instead of the tests.
const (
	envCrashPath = "ITEMOPS_BOLTSTORE_CRASH_PATH" // the store file; set only in the child
	envCrashSeed = "ITEMOPS_BOLTSTORE_CRASH_SEED" // the plan's seed
	envCrashFrom = "ITEMOPS_BOLTSTORE_CRASH_FROM" // the first step the child takes
)

func TestMain(m *testing.M) {
	if os.Getenv(envCrashPath) != "" {
		os.Exit(crashChild())
	}
	if os.Getenv(envCancelPath) != "" {
		os.Exit(cancelChild())
	}
	if os.Getenv(envGroupPath) != "" {
		os.Exit(groupChild())
	}
	code := m.Run()
	closeFixtures()
	if code == 0 {
		// No test leaves a goroutine behind: not the Monitors of the cancel tests, not
		// the stores.
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// A crashPlan is the deterministic sequence of writes the child makes and the parent
// replays in its model. Step s (from 1) is, for n = (s+1)/2, PutOperations of batch n
// when s is odd and UpdateRun number n when s is even. Step n of either sort goes to run
// n%3. Every operation of batch n records n and the batch's size, so a batch seen in part
// does not match the model with or without it.
type crashPlan struct{ seed uint64 }

var crashOwners = []operations.Owner{
	{Kind: phase.Backup, Name: "b0", UID: "u-b0"},
	{Kind: phase.Backup, Name: "b1", UID: "u-b1"},
	{Kind: phase.Restore, Name: "r0", UID: "u-r0"},
}

// crashPool is how many operation IDs each run draws from: batches mostly replace
// earlier operations, so the file stays small while the index changes all the time.
const crashPool = 3000

func (p crashPlan) owner(n int) operations.Owner { return crashOwners[n%len(crashOwners)] }

// finishAt is the batch from which operation j is finished; from then on it is always
// written with the same final phase.
func (p crashPlan) finishAt(j int) (int, operations.OperationPhase) {
	r := rand.New(rand.NewPCG(p.seed, uint64(j)<<32))
	final := operations.OperationCompleted
	if j%5 == 0 {
		final = operations.OperationFailed
	}
	return 20 + r.IntN(400), final
}

// batch returns batch n: 1 to 200 operations, now and then 1,000 to 3,000.
func (p crashPlan) batch(n int) []operations.Operation {
	r := rand.New(rand.NewPCG(p.seed, uint64(n)))
	size := 1 + r.IntN(200)
	if r.IntN(20) == 0 {
		size = 1000 + r.IntN(2001)
	}
	o := p.owner(n)
	picked := make(map[int]bool, size)
	ops := make([]operations.Operation, 0, size)
	for len(ops) < size {
		j := r.IntN(crashPool)
		if picked[j] {
			continue
		}
		picked[j] = true
		ph := operations.OperationInProgress
		if (n+j)%3 == 0 {
			ph = operations.OperationNew
		}
		if at, final := p.finishAt(j); n >= at {
			ph = final
		}
		ops = append(ops, operations.Operation{
			Owner:    o,
			Action:   "example.io/crash-plugin",
			Resource: operations.ResourceIdentifier{Resource: "pods", Namespace: "ns", Name: "item-" + strconv.Itoa(j)},
			ID:       fmt.Sprintf("op-%04d", j),
			Status: operations.Status{
				Phase:       ph,
				NCompleted:  int64(n),
				NTotal:      int64(size),
				Description: fmt.Sprintf("batch %d of %d operations", n, size),
				Created:     t0.Add(time.Duration(j) * time.Second),
				Updated:     t0.Add(time.Duration(n) * time.Minute),
			},
		})
	}
	return ops
}

// update returns the update function of UpdateRun number n.
func (p crashPlan) update(n int) func(*operations.Run) error {
	to := phase.New
	switch {
	case n >= 150:
		to = phase.WaitingForPluginOperations
	case n >= 60:
		to = phase.InProgress
	}
	return func(r *operations.Run) error {
		r.ItemsDone, r.ItemsTotal, r.Warnings = n, 2*n, n%7
		return r.SetPhase(to, "step "+strconv.Itoa(n), t0.Add(time.Duration(n)*time.Minute))
	}
}

// digest is a short name for what a step writes, the same in the child and the model.
func digest(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return fmt.Sprintf("%x", sha256.Sum256(b))
}

func digestOps(ops []operations.Operation) string { return digest(ops) }

func digestRun(r operations.Run) string { return digest(r) }

// crashChild writes the plan's steps from envCrashFrom on, forever, printing
// "ack <step> <digest>" only after each call has returned nil. It returns only on failure.
func crashChild() int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "crash child: "+format+"\n", args...)
		return 2
	}
	seed, err := strconv.ParseUint(os.Getenv(envCrashSeed), 10, 64)
	if err != nil {
		return fail("seed: %v", err)
	}
	from, err := strconv.Atoi(os.Getenv(envCrashFrom))
	if err != nil {
		return fail("from: %v", err)
	}
	s, err := Open(os.Getenv(envCrashPath), &Options{Timeout: 10 * time.Second})
	if err != nil {
		return fail("open: %v", err)
	}
	fmt.Println("ready")
	plan := crashPlan{seed: seed}
	ctx := context.Background()
	for step := from; ; step++ {
		n := (step + 1) / 2
		if step%2 == 1 {
			batch := plan.batch(n)
			if err := s.PutOperations(ctx, plan.owner(n), batch); err != nil {
				return fail("step %d: %v", step, err)
			}
			fmt.Printf("ack %d %s\n", step, digestOps(batch))
		} else {
			r, err := s.UpdateRun(ctx, plan.owner(n), plan.update(n))
			if err != nil {
				return fail("step %d: %v", step, err)
			}
			fmt.Printf("ack %d %s\n", step, digestRun(r))
		}
	}
}

// A crashModel is what the store must hold after a prefix of the plan's steps.
type crashModel struct {
	plan crashPlan
	runs map[string]*operations.Run
	ops  map[string]*modelOps
}

type modelOps struct {
	order []string // IDs in first-put order
	byID  map[string]operations.Operation
}

func newCrashModel(plan crashPlan) *crashModel {
	m := &crashModel{plan: plan, runs: map[string]*operations.Run{}, ops: map[string]*modelOps{}}
	for _, o := range crashOwners {
		r := operations.Run{Owner: o, Phase: phase.New, Created: t0}
		m.runs[o.String()] = &r
		m.ops[o.String()] = &modelOps{byID: map[string]operations.Operation{}}
	}
	return m
}

// apply applies step to the model and returns the digest the child prints for it.
func (m *crashModel) apply(step int) (string, error) {
	n := (step + 1) / 2
	o := m.plan.owner(n)
	if step%2 == 1 {
		batch := m.plan.batch(n)
		mo := m.ops[o.String()]
		for _, op := range batch {
			if _, ok := mo.byID[op.ID]; !ok {
				mo.order = append(mo.order, op.ID)
			}
			mo.byID[op.ID] = op
		}
		return digestOps(batch), nil
	}
	r := m.runs[o.String()]
	if err := m.plan.update(n)(r); err != nil {
		return "", err
	}
	return digestRun(*r), nil
}

// crashState is what the parent reads back: each run, its operations, and its
// unfinished operations as the index lists them.
type crashState struct {
	Runs       []operations.Run
	Ops        map[string][]operations.Operation
	Unfinished map[string][]operations.Operation
}

func (m *crashModel) state() crashState {
	st := crashState{Ops: map[string][]operations.Operation{}, Unfinished: map[string][]operations.Operation{}}
	for _, o := range crashOwners {
		st.Runs = append(st.Runs, *m.runs[o.String()])
		st.Ops[o.String()], st.Unfinished[o.String()] = nil, nil // as ListOperations returns none
		mo := m.ops[o.String()]
		for _, id := range mo.order {
			op := mo.byID[id]
			st.Ops[o.String()] = append(st.Ops[o.String()], op)
			if !op.Status.Phase.Finished() {
				st.Unfinished[o.String()] = append(st.Unfinished[o.String()], op)
			}
		}
	}
	return st
}

// sameState reports whether a and b are equal as the contract compares them: a nil list
// equals an empty one, times are equal instants. reflect.DeepEqual is exact and fast
// (the plan's times are all UTC, as the store returns them, and readCrashState keeps no
// empty list); cmp, twenty times slower on these states, settles what it finds unequal.
func sameState(a, b crashState) bool {
	return reflect.DeepEqual(a, b) || cmp.Equal(a, b, cmpopts.EquateEmpty())
}

// readCrashState reads what the model's state holds, with empty lists made nil as the
// model makes them.
func readCrashState(ctx context.Context, s *Store) (crashState, error) {
	st := crashState{Ops: map[string][]operations.Operation{}, Unfinished: map[string][]operations.Operation{}}
	runs, err := s.ListRuns(ctx, operations.RunFilter{})
	if err != nil {
		return st, err
	}
	st.Runs = runs
	unfinished := operations.OperationFilter{Phases: []operations.OperationPhase{operations.OperationNew, operations.OperationInProgress}}
	for _, o := range crashOwners {
		if st.Ops[o.String()], err = s.ListOperations(ctx, o, operations.OperationFilter{}); err != nil {
			return st, err
		}
		if st.Unfinished[o.String()], err = s.ListOperations(ctx, o, unfinished); err != nil {
			return st, err
		}
		for _, m := range []map[string][]operations.Operation{st.Ops, st.Unfinished} {
			if len(m[o.String()]) == 0 {
				m[o.String()] = nil
			}
		}
	}
	return st, nil
}

// crashRound is one child process: its acknowledgements and how it ended.
type crashRound struct {
	acks   []string // "ack <step> <digest>" lines
	stderr string
	killed bool
}

// startChild starts this test binary again as a child process with the variables env
// set, which TestMain sends to a child's function. It returns the child, its standard
// output line by line (closed when the child's output ends), and its standard error.
func startChild(t *testing.T, env ...string) (*exec.Cmd, <-chan string, *strings.Builder) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(racebuild.Environ(), env...)
	stderr := new(strings.Builder)
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	lines := make(chan string, 1024)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	return cmd, lines, stderr
}

// runChild starts a child from step from and kills it with SIGKILL: when early, after a
// random delay from its start (perhaps before it has opened the store), else after a
// random delay from its first acknowledgement.
func runChild(t *testing.T, path string, seed uint64, from int, early bool, r *rand.Rand) crashRound {
	t.Helper()
	cmd, lines, stderr := startChild(t,
		envCrashPath+"="+path,
		envCrashSeed+"="+strconv.FormatUint(seed, 10),
		envCrashFrom+"="+strconv.Itoa(from),
	)
	var round crashRound
	collect := func(line string) {
		if strings.HasPrefix(line, "ack ") {
			round.acks = append(round.acks, line)
		}
	}
	if !early {
		// Wait for the first acknowledgement (or the child's end), with a guard
		// against a child that hangs.
		guard := time.NewTimer(2 * time.Minute)
	wait:
		for {
			select {
			case line, ok := <-lines:
				if !ok {
					break wait
				}
				collect(line)
				if len(round.acks) > 0 {
					break wait
				}
			case <-guard.C:
				_ = cmd.Process.Kill()
				t.Fatalf("child made no acknowledgement in 2 minutes; stderr:\n%s", stderr.String())
			}
		}
		guard.Stop()
	}
	time.Sleep(time.Duration(r.Int64N(int64(40 * time.Millisecond))))
	_ = cmd.Process.Signal(syscall.SIGKILL)
	for line := range lines {
		collect(line)
	}
	err := cmd.Wait()
	round.stderr = stderr.String()
	if ee, ok := err.(*exec.ExitError); ok {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			round.killed = true
		}
	}
	return round
}

// TestKillAtRandomMoments kills a writing child process with SIGKILL at least 30 times.
// After each kill it reopens the file and checks it: bbolt's consistency check and the
// store's indexes pass, every acknowledged step is there whole, and the one step that may
// have been under way is there whole or not at all.
func TestKillAtRandomMoments(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a child process 40 times (about a minute); runs without -short")
	}
	const rounds = 40
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	plan := crashPlan{seed: seed}
	path := filepath.Join(t.TempDir(), "store.db")
	ctx := context.Background()

	s, err := Open(path, nil)
	require.NoError(t, err)
	model := newCrashModel(plan)
	for _, o := range crashOwners {
		require.NoError(t, s.CreateRun(ctx, *model.runs[o.String()]))
	}
	require.NoError(t, s.Close())

	committed := 0      // steps known to be in the store
	inFlightLanded := 0 // rounds whose unacknowledged step turned out committed
	for i := 0; i < rounds; i++ {
		round := runChild(t, path, seed, committed+1, i%5 == 0, r)
		require.True(t, round.killed, "round %d: the child ended by itself; stderr:\n%s", i, round.stderr)

		// Every acknowledgement is the next step, with the content the model expects.
		for _, line := range round.acks {
			var step int
			var digest string
			_, err := fmt.Sscanf(line, "ack %d %s", &step, &digest)
			require.NoError(t, err, "round %d: line %q", i, line)
			require.Equal(t, committed+1, step, "round %d: acknowledged steps out of order", i)
			want, err := model.apply(step)
			require.NoError(t, err)
			require.Equal(t, want, digest, "round %d step %d: the child wrote other content than the model's", i, step)
			committed = step
		}

		s, err := Open(path, &Options{Timeout: 10 * time.Second})
		require.NoError(t, err, "round %d: reopen after kill", i)
		require.NoError(t, checkInvariants(s), "round %d: consistency after kill", i)
		got, err := readCrashState(ctx, s)
		require.NoError(t, err, "round %d: read back", i)
		require.NoError(t, s.Close())

		if want := model.state(); !sameState(want, got) {
			// The store differs from the acknowledged steps: it must hold exactly the
			// one step that was under way at the kill.
			_, err := model.apply(committed + 1)
			require.NoError(t, err)
			if with := model.state(); !sameState(with, got) {
				t.Fatalf("round %d: store matches neither the %d acknowledged steps nor those and step %d.\nwithout it (-want +got):\n%s\nwith it (-want +got):\n%s",
					i, committed, committed+1, cmp.Diff(want, got, cmpopts.EquateEmpty()), cmp.Diff(with, got, cmpopts.EquateEmpty()))
			}
			committed++
			inFlightLanded++
		}
	}
	t.Logf("%d rounds, %d steps committed, %d kills fell after a commit and before its acknowledgement", rounds, committed, inFlightLanded)
	// Four rounds in five waited for an acknowledgement before killing, so each of them
	// committed at least one step.
	require.GreaterOrEqual(t, committed, rounds-(rounds+4)/5, "steps committed over all rounds")
}
