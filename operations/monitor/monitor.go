package monitor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/itemops/itemops/internal/textlimit"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// TimeoutMessage is the error message an operation records when it ran past its
// timeout, as Velero writes it.
const TimeoutMessage = "Asynchronous action timed out"

// StallPrefix begins the error an operation records when it made no progress within its
// stall timeout (see [WithStallTimeout]): "no progress for 30m0s: last 12 of 100 GiB at
// 10:42:07Z".
const StallPrefix = "no progress for "

// CanceledPrefix begins the error an operation records when its run was cancelled (the
// cancel request's reason follows) or failed on a restart. Velero's operations have no
// Canceled phase, so such an operation is Failed, and its error says why.
const CanceledPrefix = "Canceled: "

// A Monitor watches the unfinished operations of waiting runs, records what their plugins
// report, and moves each run to its next phase, as Velero's backup and restore operations
// controllers do, but polling many operations at once, bounding every plugin call, and
// surviving restarts.
//
// A Monitor is safe for concurrent use, and several Monitors may share one
// [operations.Store]: the store's atomic updates make sure a run is advanced once and
// that a finished operation is never overwritten by a late report. When the store is also
// a [operations.RunClaimer] (a store that several processes share, such as
// storage/etcdstore), a Monitor polls or finalizes a run only while it holds the run's
// claim, and skips the runs another Monitor holds: each run is then worked on by one
// Monitor at a time, and the runs of a Monitor whose process died are taken over once its
// claims expire.
type Monitor struct {
	store    operations.Store
	claimer  operations.RunClaimer  // the store, when it is one; else nil
	keeper   operations.ClaimKeeper // the store, when it is one; else nil
	passer   operations.PassReader  // the store, when it is one; else nil
	resolver operations.Resolver
	cfg      config
	pool     *pool[hungKey] // the workers that make the plugin calls (see check)
	lost     lostWrites
	progress progressWrites // when each run was last written (WithProgressWriteInterval)
	// wake holds a wake-up for Run (see Wake): one at most, so that wakes merge.
	wake chan struct{}
	// once is the claim session of RunOnce (see WithKeptClaims).
	once onceSession
	held heldRuns // what was last logged of the runs that others' claims hold
}

// runKey names a run in the Monitor's maps.
type runKey struct {
	kind phase.Kind
	name string
}

func keyOf(o operations.Owner) runKey { return runKey{o.Kind, o.Name} }

var (
	unfinished = operations.OperationFilter{Phases: []operations.OperationPhase{operations.OperationNew, operations.OperationInProgress}}
	failedOnly = operations.OperationFilter{Phases: []operations.OperationPhase{operations.OperationFailed}}
	waiting    = operations.RunFilter{Phases: []phase.Phase{phase.WaitingForPluginOperations, phase.WaitingForPluginOperationsPartiallyFailed}}
	finalizing = operations.RunFilter{Phases: []phase.Phase{phase.Finalizing, phase.FinalizingPartiallyFailed}}
)

// errNoChange aborts an UpdateRun that has nothing to write.
var errNoChange = errors.New("no change")

// New returns a Monitor of the runs in s whose plugins r resolves. See the Option
// functions for the defaults. An option given an invalid value (see [WithRetryPolicy]
// and [WithStallTimeout]) does not stop New: every method of the Monitor that works on
// the store (Run, RunOnce, Poll, Finalize, Recover, StartRun and RequestCancel) returns
// its error instead, before it touches the store.
func New(s operations.Store, r operations.Resolver, opts ...Option) *Monitor {
	cfg := newConfig(opts)
	claimer, _ := s.(operations.RunClaimer)
	keeper, _ := s.(operations.ClaimKeeper)
	passer, _ := s.(operations.PassReader)
	return &Monitor{
		store:    s,
		claimer:  claimer,
		keeper:   keeper,
		passer:   passer,
		resolver: r,
		cfg:      cfg,
		pool:     newPool[hungKey](cfg.workers, cfg.callTimeout),
		progress: progressWrites{every: cfg.progressEvery},
		wake:     make(chan struct{}, 1),
	}
}

// PollResult is what one [Monitor.Poll] found. Running counts the run's operations still
// unfinished after the poll; Completed and Failed count those that ended in it; NewErrors
// is how many errors the poll added to the run (another Monitor may have counted some
// first); Phase is the run's phase afterwards. Skipped is true when the poll did nothing
// because another Monitor holds the run's claim (see [operations.RunClaimer]); the counts
// are then zero and Phase is the phase the run had.
//
// Deferred counts the running operations that the poll left alone because they wait for
// their next poll after a Progress error (see [RetryPolicy]): no plugin call and no
// write. NextDue is the earliest time one of the running operations waits for: its next
// poll, or, when sooner, the end of its stall window or of its timeout, at which it is
// checked whatever its wait; the zero time when none waits.
//
// ProgressHeld is true when the poll changed nothing but progress and, under
// [WithProgressWriteInterval], left it for a later poll to write: the run was not written.
type PollResult struct {
	Running, Completed, Failed, NewErrors int
	Phase                                 phase.Phase
	Skipped                               bool
	Deferred                              int
	NextDue                               time.Time
	ProgressHeld                          bool
}

// Poll makes one pass over the unfinished operations (New or InProgress) of the run of o,
// with Velero's rules for each:
//
//   - the plugin cannot be resolved, or Progress returns an error: the operation fails
//     with that error, unless a retry policy retries it ([WithRetryPolicy]);
//   - Progress reports completion: Completed, or Failed with the reported error;
//   - still running past Created plus the run's OperationTimeout (or the default): Cancel
//     is called once and the operation fails with [TimeoutMessage];
//   - still running with a start time reported: New becomes InProgress;
//   - with a stall timeout ([WithStallTimeout]), still running with no progress for the
//     window: Cancel is called once and the operation fails with a message that begins
//     with [StallPrefix].
//
// An operation that waits for its next poll after a retried error is not checked (see
// [PollResult]), unless its timeout or its stall window has ended or its run is being
// cancelled.
//
// Each operation's check resolves its plugin once and makes all its calls on that one
// Tracker: Progress, then Cancel when the operation timed out (Cancel alone when the run
// is being cancelled). A Resolver may thus give a Tracker that serves a single check.
//
// Counters, units, description and times are copied from every report; NCompleted
// above NTotal is recorded as reported, as Velero records it. A report that no store
// accepts fails the operation, with an error that says why, and none of it is recorded:
// a negative count, or a Started or Updated time outside years 0000 to 9999 in UTC,
// which an itemoperations file cannot hold (Velero records such a time and writes a
// file that it cannot read back, as RFC 3339 has four digits for the year). A plugin
// that panics or does not answer within the call timeout fails only its own operation.
// The changed operations are written in one batch; then the run's error count grows by
// the newly failed operations and its phase moves by [phase.AfterPoll], recorded in its
// history.
//
// A run that is not waiting is left alone: Poll returns its phase and no counts. When the
// store is a [operations.RunClaimer], Poll holds the run's claim from before it lists the
// operations until it has written the run, and when another Monitor holds the claim it
// does nothing and returns Skipped. Poll fails with the store's errors (a failure to
// claim included), and with ctx.Err() when ctx ends first; operations checked before that
// are not written, and the next poll checks them again. When an option was given an
// invalid value, Poll returns its error, which wraps [operations.ErrInvalid], and does
// nothing else.
func (m *Monitor) Poll(ctx context.Context, o operations.Owner) (PollResult, error) {
	if err := m.cfg.invalid; err != nil {
		return PollResult{}, err
	}
	res, _, err := m.poll(ctx, o, nil)
	return res, err
}

// poll is Poll, with the run claimed under session when it is not nil (a pass of Run on
// a store that keeps claims); it also returns how many of the operations still running
// are New, and whether it wrote operations.
func (m *Monitor) poll(ctx context.Context, o operations.Owner, session operations.ClaimSession) (PollResult, pollInfo, error) {
	var release func()
	if session != nil {
		// The session keeps this Monitor's claims and knows most runs another replica
		// holds without a request: claim the run before reading it, and read only the
		// runs this Monitor holds. (The result of a skipped run has no phase then.)
		var ok bool
		var err error
		if release, ok, err = m.claim(ctx, o, session); err != nil {
			return PollResult{}, pollInfo{}, fmt.Errorf("claim run %s: %w", o, err)
		} else if !ok {
			return PollResult{Skipped: true}, pollInfo{}, nil
		}
		defer release()
	}
	run, err := m.store.GetRun(ctx, o)
	if err != nil {
		return PollResult{}, pollInfo{}, err
	}
	if !phase.IsWaiting(run.Phase) {
		return PollResult{Phase: run.Phase}, pollInfo{}, nil
	}
	if release == nil {
		var ok bool
		if release, ok, err = m.claim(ctx, o, nil); err != nil {
			return PollResult{}, pollInfo{}, fmt.Errorf("claim run %s: %w", o, err)
		} else if !ok {
			return PollResult{Phase: run.Phase, Skipped: true}, pollInfo{}, nil
		}
		defer release()
	}
	ops, err := m.store.ListOperations(ctx, o, unfinished)
	if err != nil {
		return PollResult{}, pollInfo{}, err
	}
	return m.pollOps(ctx, run, ops, nil)
}

// pollRead is poll for a run that a pass read with the store's PassReader: it claims
// the run (under session when it is not nil), then polls the operations the pass read,
// without reading the run again, and writes what changed on condition that the run is
// as read (see writeBatch).
func (m *Monitor) pollRead(ctx context.Context, pr operations.PassRun, session operations.ClaimSession) (PollResult, pollInfo, error) {
	release, ok, err := m.claim(ctx, pr.Run.Owner, session)
	if err != nil {
		return PollResult{}, pollInfo{}, fmt.Errorf("claim run %s: %w", pr.Run.Owner, err)
	} else if !ok {
		return PollResult{Phase: pr.Run.Phase, Skipped: true}, pollInfo{}, nil
	}
	defer release()
	return m.pollOps(ctx, pr.Run, pr.Operations, &pr)
}

// pollOps polls ops, the unfinished operations of run, a waiting run whose claim the
// Monitor holds, writes what changed (see writeBatch; pr is the run as a pass read
// it, or nil) and moves the run. It returns what poll returns.
//
// The run is moved only when it may need to be: when an operation failed in this poll,
// or none is left running, or its cancel was requested. Otherwise phase.AfterPoll keeps
// the phase, and the poll neither reads the run's failed operations nor writes the
// run; a failure that another Monitor wrote without counting it (it stopped between
// the two writes) is counted by the next poll that moves the run.
//
// Under WithProgressWriteInterval, a batch that changes nothing but progress is not
// written until the run is due (see progressWrites); the poll then reports ProgressHeld.
func (m *Monitor) pollOps(ctx context.Context, run operations.Run, ops []operations.Operation, pr *operations.PassRun) (PollResult, pollInfo, error) {
	o := run.Owner
	timeout := run.OperationTimeout
	if timeout <= 0 {
		timeout = m.cfg.operationTimeout
	}
	// Under a policy, an operation's Monitor state is what this Monitor last saw of it
	// when the store missed a write (see lostWrites); recalled holds, for those, the
	// state the store holds.
	var recalled map[int]operations.MonitorState
	if m.cfg.policies {
		recalled = m.lost.recall(keyOf(o), ops)
	}
	due := len(ops) // ops[:due] are checked, ops[due:] wait for their next poll
	if m.cfg.policies && !run.CancelRequested() {
		due = m.dueFirst(ops, stamp(m.cfg.clock), timeout)
	}

	c, err := m.check(ctx, ops[:due], timeout, run.Cancel.Reason)
	if err != nil {
		return PollResult{}, pollInfo{}, err
	}

	var (
		res   PollResult
		fresh int                   // the running operations still New
		batch = ops[:0]             // the changed operations, moved to the front of ops
		first *operations.Operation // the first operation that failed in this poll
		lost  map[string]lostWrite  // what the batch is to record, should its write fail
		moves bool                  // whether the batch changes more than progress
	)
	for i := range ops {
		op := &ops[i]
		// An operation whose state the store missed is written too, checked or not.
		stored, stale := recalled[i]
		changed := i < due && c.changed[i] != unchanged || stale
		if m.cfg.policies {
			if w, ok := c.knew(i, op, stored, stale); ok {
				if lost == nil {
					lost = make(map[string]lostWrite)
				}
				lost[op.ID] = w
			}
		}
		switch {
		case !op.Status.Phase.Finished():
			res.Running++
			if op.Status.Phase == operations.OperationNew {
				fresh++
			}
			if i >= due {
				res.Deferred++
			}
			if m.cfg.policies {
				res.NextDue = earliest(res.NextDue, m.dueAt(op, timeout))
			}
		case changed && op.Status.Phase == operations.OperationCompleted:
			res.Completed++
		case changed:
			res.Failed++
			if first == nil {
				failed := *op // a copy: putBatch may reorder ops
				first = &failed
			}
		}
		if changed {
			batch = append(batch, *op)
			moves = moves || stale || c.changed[i] == moved
		}
	}
	if len(batch) > 0 && !moves && !m.progress.due(keyOf(o), m.cfg.clock.Now()) {
		res.ProgressHeld, batch = true, nil
	}
	err = m.writeBatch(ctx, o, pr, batch)
	if err == nil && len(batch) > 0 {
		m.progress.wrote(keyOf(o), m.cfg.clock.Now())
	}
	if m.cfg.policies {
		m.lost.written(keyOf(o), lost, err)
	}
	if err != nil {
		return PollResult{}, pollInfo{}, err
	}
	switch {
	case run.CancelRequested():
		res.NewErrors, res.Phase, err = m.failCancelled(ctx, run)
	case res.Running > 0 && res.Failed == 0:
		res.Phase = run.Phase
	default:
		res.NewErrors, res.Phase, err = m.advance(ctx, run, res.Running, first)
	}
	if res.Phase != run.Phase {
		m.progress.forget(keyOf(o))
	}
	info := pollInfo{fresh: fresh, wrote: len(batch) > 0}
	if run.CancelRequested() {
		info.cancel = run.Cancel
	}
	return res, info, err
}

// pollInfo is what a poll tells a pass beside its PollResult: fresh counts the running
// operations still New, wrote says whether the poll wrote operations of the run, and
// cancel is the run's cancel request when the poll acted upon one.
type pollInfo struct {
	fresh  int
	wrote  bool
	cancel operations.CancelRequest
}

// writeBatch writes the operations a poll changed. When a pass read the run with the
// store's PassReader (pr is not nil), it writes them with CommitPass, on condition that
// the run is as the pass read it; when the run changed since (operations.ErrStale), or
// without pr, it writes them as putBatch does, which reads what is stored first.
func (m *Monitor) writeBatch(ctx context.Context, o operations.Owner, pr *operations.PassRun, batch []operations.Operation) error {
	if pr != nil && len(batch) > 0 {
		for i := range batch {
			fitTexts(&batch[i])
		}
		if err := m.passer.CommitPass(ctx, *pr, batch); !errors.Is(err, operations.ErrStale) {
			return err
		}
	}
	return m.putBatch(ctx, o, batch)
}

// check checks ops, asking each plugin for progress, or, when cancelReason is set,
// cancelling each operation, and returns when every operation is checked, or, when ctx
// ends first, with ctx.Err() once the calls in flight have returned or been given up;
// the operations are then not all checked.
//
// The checks are the tasks of one batch of the Monitor's pool, whose workers every poll
// in flight shares, first come first served, and which gives up a call that outlasts
// the call timeout (see pool). A call given up fails its operation (see
// pluginCall.givenUp); one given up because ctx ended leaves it as it is.
func (m *Monitor) check(ctx context.Context, ops []operations.Operation, timeout time.Duration, cancelReason string) (*checks, error) {
	c := &checks{m: m, ctx: ctx, ops: ops, changed: make([]change, len(ops)), timeout: timeout, cancelReason: cancelReason}
	if m.cfg.tracer.Call != nil {
		c.queued = m.cfg.clock.Now()
	}
	err := m.pool.run(ctx, len(ops), c.check)
	return c, err
}

// cancelOperations cancels the unfinished operations of the run of o, for reason, and
// writes them Failed; a plugin that refuses or hangs does not stop it (see check).
func (m *Monitor) cancelOperations(ctx context.Context, o operations.Owner, reason string) error {
	ops, err := m.store.ListOperations(ctx, o, unfinished)
	if err != nil || len(ops) == 0 {
		return err
	}
	c, err := m.check(ctx, ops, m.cfg.operationTimeout, reason)
	if err != nil {
		return err
	}
	batch := ops[:0]
	for i := range ops {
		if c.changed[i] != unchanged {
			batch = append(batch, ops[i])
		}
	}
	return m.putBatch(ctx, o, batch)
}

// failCancelled moves a run whose cancel was requested, and whose operations have all
// ended, to Failed, with the request's reason as its FailureReason, counting its failed
// operations into its errors. It returns the errors it added and the run's phase.
func (m *Monitor) failCancelled(ctx context.Context, run operations.Run) (int, phase.Phase, error) {
	failed, err := m.store.ListOperations(ctx, run.Owner, failedOnly)
	if err != nil {
		return 0, "", err
	}
	now := stamp(m.cfg.clock)
	var newErrors int
	current := run.Phase
	r, err := m.store.UpdateRun(ctx, run.Owner, func(r *operations.Run) error {
		current = r.Phase
		if phase.IsTerminal(r.Phase) {
			return errNoChange
		}
		newErrors = max(len(failed)-r.FailedOperations, 0)
		r.Errors += newErrors
		r.FailedOperations += newErrors
		r.FailureReason = r.Cancel.Reason
		return r.SetPhase(phase.Failed, CanceledPrefix+r.Cancel.Reason, now)
	})
	switch {
	case errors.Is(err, errNoChange):
		return 0, current, nil
	case err != nil:
		return 0, "", err
	}
	return newErrors, r.Phase, nil
}

// putBatch writes the operations a poll changed. When another Monitor finished one of
// them first, the store refuses the batch with ErrConflict; those operations are then left
// as the other Monitor wrote them and the rest is written again.
func (m *Monitor) putBatch(ctx context.Context, o operations.Owner, batch []operations.Operation) error {
	for i := range batch {
		fitTexts(&batch[i])
	}
	for attempt := 0; len(batch) > 0; attempt++ {
		err := m.store.PutOperations(ctx, o, batch)
		if err == nil || !errors.Is(err, operations.ErrConflict) || attempt == 3 {
			return err
		}
		kept := batch[:0]
		for _, op := range batch {
			stored, err := m.store.GetOperation(ctx, o, op.ID)
			if err != nil {
				return err
			}
			if !stored.Status.Phase.Finished() {
				kept = append(kept, op)
			}
		}
		batch = kept
	}
	return nil
}

// fitTexts cuts the texts of op, which come from plugins (or from a store written before
// the limits of package operations), to operations.MaxTextBytes, visibly, so that no
// plugin can make the Monitor's writes fail.
func fitTexts(op *operations.Operation) {
	s := &op.Status
	s.Error = textlimit.Fit(s.Error, operations.MaxTextBytes)
	s.OperationUnits = textlimit.Fit(s.OperationUnits, operations.MaxTextBytes)
	s.Description = textlimit.Fit(s.Description, operations.MaxTextBytes)
	op.Monitor.LastError = textlimit.Fit(op.Monitor.LastError, operations.MaxTextBytes)
}

// advance counts the failed operations of run into its errors and moves its phase by
// phase.AfterPoll, given the number of its operations still running. run is the record as the poll
// found it; first, when not nil, is an operation that failed in this poll, named in the
// reason. The run is written only when something changes.
func (m *Monitor) advance(ctx context.Context, run operations.Run, running int, first *operations.Operation) (int, phase.Phase, error) {
	o := run.Owner
	// The failures are counted from the store rather than from this poll, so that a
	// failure written by a Monitor that died before this step is still counted, and one
	// counted by another Monitor is not counted twice.
	failed, err := m.store.ListOperations(ctx, o, failedOnly)
	if err != nil {
		return 0, "", err
	}
	// The record the poll read can only lag behind the stored one (errors and phases
	// only move forward), so when it needs no change, neither does the stored one.
	if _, _, change, err := afterPoll(&run, len(failed), running); err != nil || !change {
		return 0, run.Phase, err
	}
	now := stamp(m.cfg.clock)
	var (
		newErrors int
		current   phase.Phase
	)
	r, err := m.store.UpdateRun(ctx, o, func(r *operations.Run) error {
		current = r.Phase
		var (
			next   phase.Phase
			change bool
			err    error
		)
		newErrors, next, change, err = afterPoll(r, len(failed), running)
		if err != nil || !change {
			newErrors = 0
			return cmp.Or(err, errNoChange) // nothing to do, or another Monitor advanced it
		}
		r.Errors += newErrors
		r.FailedOperations += newErrors
		return r.SetPhase(next, pollReason(newErrors, running, first, failed), now)
	})
	switch {
	case errors.Is(err, errNoChange):
		return 0, current, nil
	case err != nil:
		return 0, "", err
	}
	if current != r.Phase {
		m.cfg.logger.InfoContext(ctx, "run advanced", "run", o.String(), "from", current, "to", r.Phase)
	}
	return newErrors, r.Phase, nil
}

// afterPoll says what a poll does to r when the store holds failed operations of it that
// number failed, and running of its operations still run: the errors it adds and the
// phase it moves to. change is false when r needs no write, as when it no longer waits.
func afterPoll(r *operations.Run, failed, running int) (newErrors int, next phase.Phase, change bool, err error) {
	if !phase.IsWaiting(r.Phase) {
		return 0, r.Phase, false, nil
	}
	newErrors = max(failed-r.FailedOperations, 0)
	next, err = phase.AfterPoll(r.Owner.Kind, r.Phase, newErrors, running, r.Profile)
	if err != nil {
		return 0, "", false, err
	}
	return newErrors, next, newErrors > 0 || next != r.Phase, nil
}

// pollReason says why a poll moved a run.
func pollReason(newErrors, running int, first *operations.Operation, failed []operations.Operation) string {
	var s string
	if newErrors > 0 {
		op := first
		if op == nil {
			op = &failed[len(failed)-1]
		}
		s = fmt.Sprintf("operation %q of %s failed: %s", op.ID, op.Action, op.Status.Error)
		if newErrors > 1 {
			s += fmt.Sprintf(" (and %d more)", newErrors-1)
		}
		if running > 0 {
			return s
		}
		s += "; "
	}
	return s + "all operations ended"
}

// postOperationItems returns the PostOperationItems of ops in order, without repeats.
func postOperationItems(ops []operations.Operation) []operations.ResourceIdentifier {
	var items []operations.ResourceIdentifier
	for _, op := range ops {
		for _, it := range op.PostOperationItems {
			if !slices.Contains(items, it) {
				items = append(items, it)
			}
		}
	}
	return items
}
