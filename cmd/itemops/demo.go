package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/boltstore"
)

// demoConfig is what the demo's flags say.
type demoConfig struct {
	db         string
	items      int
	claims     int // -operations: volume claims, so operations per run
	speed      float64
	crashAfter time.Duration
	// cancelAfter requests the cancel of the round's latest unfinished run (the restore,
	// when it has started) this long after the demo starts its work.
	cancelAfter time.Duration
	failRate    float64
	self        string // the command that runs the program again (see selfCommand)
}

// itemRate is how many items a main run handles per second.
func (c demoConfig) itemRate() float64 { return 250 * c.speed }

// moverConfig is how long the data mover's operations take, and how many go wrong.
func (c demoConfig) moverConfig() moverConfig {
	return moverConfig{minDuration: scaled(1500*time.Millisecond, c.speed), maxDuration: scaled(3500*time.Millisecond, c.speed), failRate: c.failRate}
}

// operationTimeout bounds each operation of a run: half again the longest an operation
// takes, so that only the stalled ones time out.
func (c demoConfig) operationTimeout() time.Duration {
	return c.moverConfig().maxDuration * 3 / 2
}

// interval is the time between the Monitor's passes.
func (c demoConfig) interval() time.Duration {
	return max(scaled(150*time.Millisecond, c.speed), 10*time.Millisecond)
}

// bucketDir is the directory beside the store that holds the demo's bucket.
func (c demoConfig) bucketDir() string {
	return strings.TrimSuffix(c.db, filepath.Ext(c.db)) + "-bucket"
}

// maxAttempts is how many runs of one kind a demo starts in a round before it gives up.
const maxAttempts = 3

// wallClock is the system clock.
type wallClock struct{}

func (wallClock) Now() time.Time                         { return time.Now() }
func (wallClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// runDemo runs a backup and a restore of a synthetic application end to end, or
// finishes the ones a crashed demo left.
func runDemo(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("demo", stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: itemops demo [flags]")
		fmt.Fprintln(stderr, "\nbacks up and restores a synthetic application through the itemops packages, on a bbolt store;")
		fmt.Fprintln(stderr, "run it again with the same -db after -crash-after to see it recover and finish\n\nflags:")
		fs.PrintDefaults()
	}
	var cfg demoConfig
	fs.StringVar(&cfg.db, "db", "", "the bbolt store `file` (default: itemops.db in a new temporary directory)")
	fs.IntVar(&cfg.items, "items", 300, "items in the synthetic application")
	fs.IntVar(&cfg.claims, "operations", 6, "volume claims in the application: the data mover's operations per backup and per restore")
	fs.Float64Var(&cfg.speed, "speed", 1, "how much faster than the default pace to go (items per second, operation durations)")
	fs.DurationVar(&cfg.crashAfter, "crash-after", 0, "kill the process this long after the demo starts its work (0: never)")
	fs.DurationVar(&cfg.cancelAfter, "cancel-after", 0, "request the cancel of the round's latest unfinished run (the restore, once it started) this long after the demo starts its work (0: never)")
	fs.Float64Var(&cfg.failRate, "fail-rate", 0, "the share of operations, 0 to 1, that fail or stall until they time out")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case cfg.claims < 0:
		return usageError{"-operations must not be negative"}
	case cfg.items < minItems(cfg.claims):
		return usageError{fmt.Sprintf("-items must be at least %d for %d operations (a storage class, the namespaces, and a claim and a volume per operation)", minItems(cfg.claims), cfg.claims)}
	case !(cfg.speed > 0 && cfg.speed <= 1000):
		return usageError{"-speed must be above 0 and at most 1000"}
	case !(cfg.failRate >= 0 && cfg.failRate <= 1):
		return usageError{"-fail-rate must be between 0 and 1"}
	case cfg.cancelAfter < 0:
		return usageError{"-cancel-after must not be negative"}
	case cfg.crashAfter < 0:
		return usageError{"-crash-after must not be negative"}
	}
	cfg.self = selfCommand()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return demo(ctx, cfg, stdout, stderr)
}

// demo opens the store, recovers what a previous demo left, and finishes a round: the
// latest one if it is unfinished, else a new one.
func demo(ctx context.Context, cfg demoConfig, stdout, stderr io.Writer) error {
	if cfg.self == "" {
		cfg.self = "itemops"
	}
	if cfg.db == "" {
		dir, err := os.MkdirTemp("", "itemops-demo-")
		if err != nil {
			return err
		}
		cfg.db = filepath.Join(dir, "itemops.db")
	}
	store, err := boltstore.Open(cfg.db, &boltstore.Options{NoInit: true})
	if errors.Is(err, boltstore.ErrLocked) {
		return fmt.Errorf("%w; is another demo running on it?", err)
	}
	if err != nil {
		return err
	}
	defer store.Close()

	term, width := terminal(stdout)
	ui := newDisplay(stdout, term, width, store)
	clock := wallClock{}
	reg, err := newRegistry(newMover(clock, cfg.moverConfig()))
	if err != nil {
		return err
	}
	h := &host{store: store, reg: reg, bucket: bucket{cfg.bucketDir()}, clock: clock, cfg: cfg, ui: ui}
	ui.printf("store %s, bucket %s", cfg.db, h.bucket.dir)
	ui.printf("%d items and %s per run, speed %g, fail rate %g, operation timeout %s",
		cfg.items, plural(cfg.claims, "operation"), cfg.speed, cfg.failRate, seconds(cfg.operationTimeout()))

	m := monitor.New(store, reg,
		monitor.WithInterval(cfg.interval()),
		monitor.WithWorkers(8),
		monitor.WithCallTimeout(2*time.Second),
		monitor.WithFinalizer(monitor.FinalizerFunc(h.finalize)))
	h.mon = m
	rec, err := m.Recover(ctx)
	if err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	if err := h.reportRecovery(ctx, rec); err != nil {
		return err
	}

	bg, stopBackground := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); m.Run(bg) }()
	go func() { defer wg.Done(); ui.run(bg, 100*time.Millisecond) }()
	if cfg.crashAfter > 0 {
		t := time.AfterFunc(cfg.crashAfter, func() {
			ui.abort()
			fmt.Fprintf(stderr, "itemops demo: crashing on purpose, %s after the start (-crash-after); run it again (%s demo -db %s) to recover\n", cfg.crashAfter, cfg.self, cfg.db)
			crash()
		})
		defer t.Stop()
	}
	if cfg.cancelAfter > 0 {
		t := time.AfterFunc(cfg.cancelAfter, func() { h.cancelLatest(bg) })
		defer t.Stop()
	}
	round, err := h.finishRound(ctx)
	stopBackground()
	wg.Wait()
	ui.stop(context.Background())
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted (%w); run the demo again with -db %s to recover and finish", ctx.Err(), cfg.db)
		}
		return err
	}
	runs, err := h.roundRuns(ctx, round)
	if err != nil {
		return err
	}
	for _, r := range runs {
		if err := h.bucket.writeOperations(ctx, store, r.Owner); err != nil {
			return err
		}
	}
	return h.summary(ctx, stdout, runs)
}

// cancelLatest requests the cancel of the latest unfinished run of the latest round,
// the restore when it has started: the Monitor then cancels its operations and fails it,
// and the round starts the restore again.
func (h *host) cancelLatest(ctx context.Context) {
	round, err := h.latestRound(ctx)
	if err != nil {
		return
	}
	runs, err := h.roundRuns(ctx, round)
	if err != nil {
		return
	}
	for i := len(runs) - 1; i >= 0; i-- {
		r := runs[i]
		if phase.IsTerminal(r.Phase) {
			continue // runs list restores after backups: the first unfinished from the end is the latest
		}
		reason := fmt.Sprintf("cancelled by the demo (-cancel-after %s)", h.cfg.cancelAfter)
		if _, err := h.mon.RequestCancel(ctx, r.Owner, reason); err == nil {
			h.ui.printf("%s %s: cancel requested; the Monitor cancels its operations and fails it", r.Owner.Kind, r.Owner.Name)
		}
		return
	}
}

// reportRecovery shows what Recover did.
func (h *host) reportRecovery(ctx context.Context, rec monitor.RecoverResult) error {
	if len(rec.Failed) == 0 && len(rec.Resumed) == 0 {
		h.ui.printf("recovered: nothing; no run was left unfinished")
		return nil
	}
	for _, o := range rec.Failed {
		r, err := h.store.GetRun(ctx, o)
		if err != nil {
			return err
		}
		ops, err := h.store.ListOperations(ctx, o, operations.OperationFilter{})
		if err != nil {
			return err
		}
		h.ui.printf("recovered %s: it was InProgress when its process stopped, so it is now %s, its %s no longer monitored (%s)",
			o.Name, r.Phase, plural(len(ops), "operation"), r.FailureReason)
	}
	for _, o := range rec.Resumed {
		r, err := h.store.GetRun(ctx, o)
		if err != nil {
			return err
		}
		all, err := h.store.ListOperations(ctx, o, operations.OperationFilter{})
		if err != nil {
			return err
		}
		unfinished := 0
		for _, op := range all {
			if !op.Status.Phase.Finished() {
				unfinished++
			}
		}
		h.ui.printf("recovered %s: resuming it in %s, %d of %s unfinished", o.Name, r.Phase, unfinished, plural(len(all), "operation"))
		h.ui.watch(ctx, o)
	}
	return nil
}

// runName names the run of kind in round, attempt: "backup-2.1".
func runName(kind phase.Kind, round, attempt int) string {
	return fmt.Sprintf("%s-%d.%d", strings.ToLower(string(kind)), round, attempt)
}

// parseRunName reads a name made by runName; ok is false for runs that are not the
// demo's.
func parseRunName(o operations.Owner) (round, attempt int, ok bool) {
	rest, found := strings.CutPrefix(o.Name, strings.ToLower(string(o.Kind))+"-")
	if !found {
		return 0, 0, false
	}
	r, a, found := strings.Cut(rest, ".")
	if !found {
		return 0, 0, false
	}
	round, err1 := strconv.Atoi(r)
	attempt, err2 := strconv.Atoi(a)
	if err1 != nil || err2 != nil || round < 1 || attempt < 1 {
		return 0, 0, false
	}
	return round, attempt, true
}

// roundRuns returns the runs of round, backups first, each kind by attempt.
func (h *host) roundRuns(ctx context.Context, round int) ([]operations.Run, error) {
	all, err := h.store.ListRuns(ctx, operations.RunFilter{})
	if err != nil {
		return nil, err
	}
	var runs []operations.Run
	for _, r := range all {
		if rd, _, ok := parseRunName(r.Owner); ok && rd == round {
			runs = append(runs, r)
		}
	}
	slices.SortStableFunc(runs, func(a, b operations.Run) int {
		if a.Owner.Kind != b.Owner.Kind {
			return strings.Compare(string(a.Owner.Kind), string(b.Owner.Kind))
		}
		_, x, _ := parseRunName(a.Owner)
		_, y, _ := parseRunName(b.Owner)
		return x - y
	})
	return runs, nil
}

// latestRound returns the highest round in the store, 0 when there is none.
func (h *host) latestRound(ctx context.Context) (int, error) {
	all, err := h.store.ListRuns(ctx, operations.RunFilter{})
	if err != nil {
		return 0, err
	}
	latest := 0
	for _, r := range all {
		if rd, _, ok := parseRunName(r.Owner); ok {
			latest = max(latest, rd)
		}
	}
	return latest, nil
}

// last returns the run of kind with the highest attempt among runs, and that attempt (0
// and false when there is none).
func last(runs []operations.Run, kind phase.Kind) (operations.Run, int, bool) {
	var (
		found operations.Run
		best  int
	)
	for _, r := range runs {
		if _, a, ok := parseRunName(r.Owner); ok && r.Owner.Kind == kind && a > best {
			found, best = r, a
		}
	}
	return found, best, best > 0
}

// finishRound brings a round to its end: a restorable backup, then a restore of it that
// ended. It finishes the latest round if it is unfinished, and otherwise starts a new
// one. A backup or restore that failed (a crash left it InProgress, and Recover failed
// it) is tried again as the next attempt; an unfinished one is waited for while the
// Monitor works on it. It returns the round it finished.
func (h *host) finishRound(ctx context.Context) (int, error) {
	round, err := h.latestRound(ctx)
	if err != nil {
		return 0, err
	}
	if runs, err := h.roundRuns(ctx, round); err != nil {
		return 0, err
	} else if round == 0 || roundDone(runs) {
		round++
		h.ui.printf("round %d: a backup of the application, then a restore of it", round)
	} else {
		h.ui.printf("round %d is unfinished: finishing it", round)
		for _, r := range runs {
			h.ui.watch(ctx, r.Owner)
		}
	}
	started := map[phase.Kind]int{}
	for {
		runs, err := h.roundRuns(ctx, round)
		if err != nil {
			return 0, err
		}
		b, battempt, hasBackup := last(runs, phase.Backup)
		r, rattempt, hasRestore := last(runs, phase.Restore)
		var (
			kind    phase.Kind
			attempt int
			run     operations.Run
		)
		switch {
		case !hasBackup || b.Phase == phase.Failed || b.Phase == phase.FailedValidation:
			kind, attempt = phase.Backup, battempt+1
		case b.Phase == phase.New:
			kind, attempt = phase.Backup, battempt // a crash left it before its start
		case !phase.IsTerminal(b.Phase):
			if err := h.wait(ctx, b.Owner); err != nil {
				return 0, err
			}
			continue
		case !phase.Restorable(b.Phase):
			return 0, fmt.Errorf("backup %s is %s, which cannot be restored", b.Owner.Name, b.Phase)
		case !hasRestore || r.Phase == phase.Failed || r.Phase == phase.FailedValidation:
			kind, attempt, run = phase.Restore, rattempt+1, b
		case r.Phase == phase.New:
			kind, attempt, run = phase.Restore, rattempt, b
		case !phase.IsTerminal(r.Phase):
			if err := h.wait(ctx, r.Owner); err != nil {
				return 0, err
			}
			continue
		default:
			return round, nil
		}
		if started[kind] == maxAttempts {
			return 0, fmt.Errorf("round %d: gave up after %d attempts at a %s", round, maxAttempts, strings.ToLower(string(kind)))
		}
		started[kind]++
		o := operations.Owner{Kind: kind, Name: runName(kind, round, attempt), UID: newUID()}
		if kind == phase.Backup {
			err = h.backup(ctx, o)
		} else {
			err = h.restore(ctx, o, run)
		}
		if err != nil {
			return 0, err
		}
	}
}

// roundDone reports whether a round's runs include a restore that ended, the last step of
// a round.
func roundDone(runs []operations.Run) bool {
	r, _, ok := last(runs, phase.Restore)
	return ok && phase.IsTerminal(r.Phase) && r.Phase != phase.Failed && r.Phase != phase.FailedValidation
}

// wait returns once the run of o has reached a terminal phase, moved by the Monitor.
func (h *host) wait(ctx context.Context, o operations.Owner) error {
	h.ui.watch(ctx, o)
	t := time.NewTicker(25 * time.Millisecond)
	defer t.Stop()
	for {
		r, err := h.store.GetRun(ctx, o)
		if err != nil {
			return err
		}
		if phase.IsTerminal(r.Phase) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// newUID returns a random UID in the form of a Kubernetes object's.
func newUID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return ""
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// summary writes a table of the runs, their phase paths with the time spent in each
// phase, and where to look next.
func (h *host) summary(ctx context.Context, w io.Writer, runs []operations.Run) error {
	var out bytes.Buffer
	fmt.Fprintln(&out, "\nSummary")
	tw := tabwriter.NewWriter(&out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tKIND\tPHASE\tITEMS\tOPERATIONS\tERRORS\tDURATION")
	for _, r := range runs {
		ops, err := h.store.ListOperations(ctx, r.Owner, operations.OperationFilter{})
		if err != nil {
			return err
		}
		byPhase := map[operations.OperationPhase]int{}
		for _, op := range ops {
			byPhase[op.Status.Phase]++
		}
		took := "-"
		if !r.Completed.IsZero() {
			took = seconds(r.Completed.Sub(r.Created))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\t%d\t%s\n", cell(r.Owner.Name), r.Owner.Kind, r.Phase, r.ItemsDone, r.ItemsTotal,
			counts(len(ops), byPhase), r.Errors, took)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(&out, "\nPhases (time spent in each)")
	tw = tabwriter.NewWriter(&out, 0, 0, 2, ' ', 0)
	for _, r := range runs {
		fmt.Fprintf(tw, "%s\t%s\n", cell(r.Owner.Name), phasePath(r))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(&out)
	fmt.Fprintf(&out, "inspect the store:  %s inspect %s\n", h.cfg.self, h.cfg.db)
	for _, r := range runs {
		if f := h.bucket.operationsFile(r.Owner); fileExists(f) {
			fmt.Fprintf(&out, "an operations file: %s inspect %s\n", h.cfg.self, f)
			break
		}
	}
	fmt.Fprintf(&out, "another round:      %s demo -db %s\n", h.cfg.self, h.cfg.db)
	_, err := w.Write(out.Bytes())
	return err
}

// phasePath shows a run's phases in order with the time spent in each:
// "New 0.00s → InProgress 1.21s → … → Completed".
func phasePath(r operations.Run) string {
	if len(r.History) == 0 {
		return string(r.Phase)
	}
	var b strings.Builder
	since := r.Created
	for _, tr := range r.History {
		if tr.From == tr.To {
			continue // a cancel request, not a phase change
		}
		fmt.Fprintf(&b, "%s %s → ", tr.From, seconds(max(tr.Time.Sub(since), 0)))
		since = tr.Time
	}
	b.WriteString(string(r.Phase))
	return b.String()
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
