package velero

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	velerov1api "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"
	"github.com/vmware-tanzu/velero/pkg/itemoperation"
	biav2 "github.com/vmware-tanzu/velero/pkg/plugin/velero/backupitemaction/v2"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/memstore"
)

// tracked is what BackupOperations and RestoreOperations share: the store holding the
// runs of the objects waiting for their plugins' operations, and what each run has not
// uploaded yet. A run is in the store from the first reconcile that finds its object
// waiting until a reconcile uploads it finalizing or ended, as Velero keeps an object's
// operations in its item-operations map.
type tracked struct {
	kind  phase.Kind
	store operations.Store
	opts  []monitor.Option // given to the Monitor of each reconcile

	mu      sync.Mutex
	pending map[string]*pending // by object name
}

// pending is what a run has not uploaded yet, as Velero's map holds it.
type pending struct {
	owner operations.Owner
	// errs counts the errors found since the last upload (Velero's ErrsSinceUpdate):
	// they are added to the object's status.errors at each reconcile until an upload
	// succeeds.
	errs int
	// changes reports whether the operations changed since the last upload (Velero's
	// ChangesSinceUpdate): a download request then uploads them first.
	changes bool
}

func newTracked(kind phase.Kind, opts []monitor.Option) *tracked {
	return &tracked{kind: kind, store: memstore.New(), opts: opts, pending: map[string]*pending{}}
}

// Store returns the store that holds the runs of the waiting backups or restores; a
// caller may read it (to serve metrics, for instance), and must not write it.
func (t *tracked) Store() operations.Store { return t.store }

// note adds errs and changes to what the run of o has not uploaded, and returns the
// errors not uploaded.
func (t *tracked) note(o operations.Owner, errs int, changes bool) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.pending[o.Name]
	if p == nil || p.owner != o {
		p = &pending{owner: o}
		t.pending[o.Name] = p
	}
	p.errs += errs
	p.changes = p.changes || changes
	return p.errs
}

// uploaded records that the run of o has nothing left to upload.
func (t *tracked) uploaded(o operations.Owner) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := t.pending[o.Name]; p != nil && p.owner == o {
		p.errs, p.changes = 0, false
	}
}

// forget removes the run of o, which Velero's operations controller will not see again.
func (t *tracked) forget(ctx context.Context, o operations.Owner) error {
	t.mu.Lock()
	if p := t.pending[o.Name]; p != nil && p.owner == o {
		delete(t.pending, o.Name)
	}
	t.mu.Unlock()
	err := t.store.DeleteRun(ctx, o)
	if errors.Is(err, operations.ErrNotFound) || errors.Is(err, operations.ErrUIDMismatch) {
		return nil // no run, or another object's
	}
	return err
}

// update uploads what the run of the object named name has not uploaded, if anything,
// through bs: what a download request for its operations does first.
func (t *tracked) update(bs BackupStore, name string) error {
	t.mu.Lock()
	p := t.pending[name]
	var o operations.Owner
	if p != nil && (p.changes || p.errs > 0) {
		o = p.owner
	}
	t.mu.Unlock()
	if o.Name == "" {
		return nil
	}
	if err := upload(context.Background(), t.store, bs, o); err != nil {
		return err
	}
	t.uploaded(o)
	return nil
}

// end moves the run of o, whose object is in phase from, to phase to for reason,
// through the store's phase rules: the stored run when there is one, else a check that
// the machine allows the move. It fails, leaving everything as it was, when the move is
// not allowed.
func (t *tracked) end(ctx context.Context, o operations.Owner, profile phase.Profile, from, to phase.Phase, reason string) error {
	_, err := t.store.UpdateRun(ctx, o, func(r *operations.Run) error {
		return r.SetPhase(to, reason, time.Now())
	})
	if errors.Is(err, operations.ErrNotFound) || errors.Is(err, operations.ErrUIDMismatch) { // not loaded
		_, err = phase.Path(o.Kind, from, to, profile)
	}
	return err
}

// poll makes one pass over the run of o, loaded by load, with the plugins of r: what
// one reconcile of Velero's operations controller does with the operations. It returns
// what the pass did, the run's operations afterwards, and whether any of them changed.
func (t *tracked) poll(ctx context.Context, o operations.Owner, r operations.Resolver, log logrus.FieldLogger) (monitor.PollResult, []operations.Operation, bool, error) {
	before, err := t.store.ListOperations(ctx, o, operations.OperationFilter{})
	if err != nil {
		return monitor.PollResult{}, nil, false, err
	}
	m := monitor.New(t.store, cancelIgnored{r}, withLogger(Logger(log), t.opts)...)
	res, err := m.Poll(ctx, o)
	if err != nil {
		return monitor.PollResult{}, nil, false, err
	}
	after, err := t.store.ListOperations(ctx, o, operations.OperationFilter{})
	if err != nil {
		return monitor.PollResult{}, nil, false, err
	}
	return res, after, changed(before, after), nil
}

// changed reports whether any operation's status differs between before and after,
// lists of the same operations in the same order.
func changed(before, after []operations.Operation) bool {
	if len(before) != len(after) {
		return true
	}
	for i := range before {
		if !sameStatus(before[i].Status, after[i].Status) {
			return true
		}
	}
	return false
}

// sameStatus reports whether a and b say the same, times compared as instants.
func sameStatus(a, b operations.Status) bool {
	return a.Created.Equal(b.Created) && a.Started.Equal(b.Started) && a.Updated.Equal(b.Updated) &&
		a.Phase == b.Phase && a.Error == b.Error && a.NCompleted == b.NCompleted && a.NTotal == b.NTotal &&
		a.OperationUnits == b.OperationUnits && a.Description == b.Description
}

// totals counts the Completed and Failed operations of ops, as Velero's status shows
// them.
func totals(ops []operations.Operation) (completed, failed int) {
	for _, op := range ops {
		switch op.Status.Phase {
		case operations.OperationCompleted:
			completed++
		case operations.OperationFailed:
			failed++
		}
	}
	return completed, failed
}

// withLogger returns the Monitor options of a check: the logger l, then opts, the
// options a fork gave, so that a WithLogger among them takes l's place.
func withLogger(l *slog.Logger, opts []monitor.Option) []monitor.Option {
	return append([]monitor.Option{monitor.WithLogger(l)}, opts...)
}

// cancelIgnored is a Resolver whose Trackers report every Cancel as done: Velero calls
// Cancel on an operation past its timeout and fails it with its own text whatever the
// plugin answers.
type cancelIgnored struct{ operations.Resolver }

func (c cancelIgnored) Resolve(action string) (operations.Tracker, error) {
	t, err := c.Resolver.Resolve(action)
	if err != nil || t == nil {
		return t, err
	}
	return cancelIgnoredTracker{t}, nil
}

type cancelIgnoredTracker struct{ operations.Tracker }

func (t cancelIgnoredTracker) Cancel(ctx context.Context, op operations.Operation) error {
	_ = t.Tracker.Cancel(ctx, op)
	return nil
}

// checkOnce checks ops, the operations of the run of o that Velero's main run holds in
// memory, once with the plugins of r, as Velero's getBackupItemOperationProgress does at
// the end of the main run: it returns the operations afterwards, in the same order.
// timeout is the object's spec.itemOperationTimeout, and opts are the Monitor's options.
// When the check cannot run (an invalid option), it returns an error wrapping
// errNotChecked.
func checkOnce(ctx context.Context, o operations.Owner, profile phase.Profile, timeout time.Duration, r operations.Resolver, ops []operations.Operation, opts []monitor.Option) ([]operations.Operation, error) {
	s := memstore.New()
	for i := range ops {
		ops[i].Owner = o
	}
	run := operations.Run{Owner: o, Phase: phase.New, Profile: profile, OperationTimeout: timeout}
	if err := run.SetPhase(phase.WaitingForPluginOperations, "main run ended", time.Now()); err != nil {
		return nil, err
	}
	if err := operations.ValidateBatch(o, ops); err != nil {
		return nil, err
	}
	if err := s.CreateRun(ctx, run); err != nil {
		return nil, err
	}
	if err := s.PutOperations(ctx, o, ops); err != nil {
		return nil, err
	}
	m := monitor.New(s, cancelIgnored{r}, withLogger(Logger(nil), opts)...)
	if _, err := m.Poll(ctx, o); err != nil {
		return nil, fmt.Errorf("%w: %w", errNotChecked, err)
	}
	return s.ListOperations(ctx, o, operations.OperationFilter{})
}

// errNotChecked marks the error of a check that did not run.
var errNotChecked = errors.New("operations not checked")

// mainRunProgress is what BackupItemOperationProgress and RestoreItemOperationProgress
// share: it checks the operations of o, as Velero's records statuses, with a Monitor
// given opts, and writes each changed status back through set. errText gives the text
// Velero reports for an operation that failed. An operation list itemops cannot hold (an
// empty or repeated operation ID, an unknown phase) fails each unfinished operation with
// the reason; an invalid option leaves every status as it was.
func mainRunProgress(o operations.Owner, profile phase.Profile, timeout time.Duration, r operations.Resolver,
	statuses []itemoperation.OperationStatus, ops []operations.Operation, opts []monitor.Option,
	set func(i int, s itemoperation.OperationStatus), errText func(op operations.Operation) string,
) (inProgress, changes bool, completed, failed int, errs []string) {
	after, err := checkOnce(context.Background(), o, profile, timeout, r, ops, opts)
	if errors.Is(err, errNotChecked) {
		// The operations controller's reconcile returns the same error until the
		// options are fixed; nothing is failed for it.
		after, err = ops, nil
	}
	if err != nil {
		after = make([]operations.Operation, len(ops))
		for i, op := range ops {
			if !op.Status.Phase.Finished() {
				op.Status.Phase, op.Status.Error = operations.OperationFailed, fmt.Sprintf("itemops: %v", err)
			}
			after[i] = op
		}
	}
	for i, op := range after {
		was := FromStatus(statuses[i])
		if !sameStatus(op.Status, was) {
			set(i, ToStatus(op.Status))
			changes = true
		}
		switch op.Status.Phase {
		case operations.OperationCompleted:
			completed++
		case operations.OperationFailed:
			failed++
			if !was.Phase.Finished() {
				errs = append(errs, errText(op))
			}
		default:
			inProgress = true
		}
	}
	return inProgress, changes, completed, failed, errs
}

// BackupItemOperationProgress checks the operations of backup in list, which the main
// run of Velero's backup controller holds, once, with the item actions of plugins, and
// updates their statuses in place: what Velero's getBackupItemOperationProgress does
// (the drop-in's shim of that function calls it). It returns whether some are still
// running, whether any status changed, the Completed and Failed totals, and an error
// text for each operation that failed in this check, "<error>, plugin: <name>" as Velero
// writes it. Each operation is checked by the rules of [monitor.Monitor.Poll], which are
// Velero's (see the package documentation for what cannot be identical). It does not
// fail: a plugin's error fails its operation, and a list itemops cannot hold (an empty
// or repeated operation ID) fails each unfinished operation with the reason. It is safe
// for concurrent use on distinct lists.
//
// opts are given to the Monitor of the check, as to [NewBackupOperations]'s: a fork
// that opts in to a stall timeout or a retry policy passes the same options to both
// (see docs/velero-fork.md); without any, the check is Velero's. What the check keeps
// of a retry (the errors in a row, the next poll) is not in Velero's records, so the
// operations controller starts the count again; a stall window starts at the first
// check with a window and is judged by the controller's reconciles. An invalid option
// leaves every status as it was (the operations controller then reports it).
func BackupItemOperationProgress(backup *velerov1api.Backup, plugins Plugins, list []*itemoperation.BackupOperation, opts ...monitor.Option) (bool, bool, int, int, []string) {
	o := operations.Owner{Kind: phase.Backup, Name: backup.Name, UID: string(backup.UID)}
	ops := make([]operations.Operation, len(list))
	statuses := make([]itemoperation.OperationStatus, len(list))
	for i, op := range list {
		ops[i], statuses[i] = FromBackupOperation(op), op.Status
	}
	seen := &seenActions{Plugins: plugins, backup: map[string]biav2.BackupItemAction{}}
	r := NewResolver(seen, Objects{Backup: func(context.Context, operations.Owner) (*velerov1api.Backup, error) { return backup, nil }})
	return mainRunProgress(o, phase.ProfileOf(phase.Backup), backup.Spec.ItemOperationTimeout.Duration, r, statuses, ops, opts,
		func(i int, s itemoperation.OperationStatus) { list[i].Status = s },
		func(op operations.Operation) string { return pluginErrText(op.Status.Error, seen, op.Action) })
}

// RestoreItemOperationProgress does for a restore's operations what
// [BackupItemOperationProgress] does for a backup's: what Velero's
// getRestoreItemOperationProgress does. The error texts are the operations' errors,
// as Velero reports them for a restore. opts are as for BackupItemOperationProgress.
func RestoreItemOperationProgress(restore *velerov1api.Restore, plugins Plugins, list []*itemoperation.RestoreOperation, opts ...monitor.Option) (bool, bool, int, int, []string) {
	o := operations.Owner{Kind: phase.Restore, Name: restore.Name, UID: string(restore.UID)}
	ops := make([]operations.Operation, len(list))
	statuses := make([]itemoperation.OperationStatus, len(list))
	for i, op := range list {
		ops[i], statuses[i] = FromRestoreOperation(op), op.Status
	}
	r := NewResolver(plugins, Objects{Restore: func(context.Context, operations.Owner) (*velerov1api.Restore, error) { return restore, nil }})
	return mainRunProgress(o, phase.ProfileOf(phase.Restore, phase.WithRestoreFinalizing()), restore.Spec.ItemOperationTimeout.Duration, r, statuses, ops, opts,
		func(i int, s itemoperation.OperationStatus) { list[i].Status = s },
		func(op operations.Operation) string { return op.Status.Error })
}

// pluginErrText is Velero's text for a backup operation's error msg: the message, ", "
// when there is one, and "plugin: " with the name of the item action the check got for
// action, or "unknown" when the plugin manager gave none. An action the check did not
// look up (a list itemops cannot hold) is looked up here.
func pluginErrText(msg string, seen *seenActions, action string) string {
	a, ok := seen.backupAction(action)
	if !ok {
		a, _ = seen.GetBackupItemActionV2(action)
	}
	name := "unknown"
	if a != nil {
		name = a.Name()
	}
	if msg != "" {
		msg += ", "
	}
	return msg + "plugin: " + name
}

// seenActions is a Plugins that keeps the backup item action each name last gave, so
// that BackupItemOperationProgress names the plugin of a failed operation with the
// action its check got, as Velero does, and asks the plugin manager once per
// operation. It is safe for concurrent use when its Plugins is.
type seenActions struct {
	Plugins
	mu     sync.Mutex // guards backup
	backup map[string]biav2.BackupItemAction
}

func (s *seenActions) GetBackupItemActionV2(name string) (biav2.BackupItemAction, error) {
	a, err := s.Plugins.GetBackupItemActionV2(name)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.backup[name] = a
	return a, err
}

// backupAction returns the action name last gave, and whether it was asked for.
func (s *seenActions) backupAction(name string) (biav2.BackupItemAction, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.backup[name]
	return a, ok
}
