package velero

import (
	"context"
	"fmt"
	"strings"
	"sync"

	velerov1api "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"
	vplugin "github.com/vmware-tanzu/velero/pkg/plugin/velero"
	biav2 "github.com/vmware-tanzu/velero/pkg/plugin/velero/backupitemaction/v2"
	riav2 "github.com/vmware-tanzu/velero/pkg/plugin/velero/restoreitemaction/v2"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// Plugins is the part of Velero's plugin manager (clientmgmt.Manager) that the
// operations controllers use: v2 item actions by name. Velero's manager, and its
// mocks.Manager, satisfy it.
type Plugins interface {
	GetBackupItemActionV2(name string) (biav2.BackupItemAction, error)
	GetRestoreItemActionV2(name string) (riav2.RestoreItemAction, error)
}

// Objects fetches the Backup or Restore an operation belongs to, which Velero's
// plugins receive with each call (from a controller-runtime client or an informer's
// cache, for instance). A nil field refuses every operation of that kind.
type Objects struct {
	Backup  func(ctx context.Context, o operations.Owner) (*velerov1api.Backup, error)
	Restore func(ctx context.Context, o operations.Owner) (*velerov1api.Restore, error)
}

// A Resolver is an [operations.Resolver] over Velero's plugins. The Tracker it gives
// for a plugin name serves one operation's check: its Progress gets the backup or
// restore item action of that name from the plugin manager, and the run's object from
// [Objects], at each call, as Velero's operations controllers do at each reconcile, and
// calls the action's Progress with the operation's ID; its Cancel calls Cancel on the
// action and object the Tracker's last Progress call for the same operation got, as
// Velero calls Progress and then Cancel on the one action it got, and looks them up
// afresh when no such call came first (a run being cancelled). The Monitor resolves each
// operation's plugin once per check and makes that check's Progress and Cancel calls on
// that one Tracker (see monitor.Monitor.Poll), so the plugin manager is asked once per
// operation per pass, as in Velero.
//
// Velero's plugins report two conditions by their message alone: the Trackers turn
// an error whose text is AsyncOperationsNotSupportedError's into one that matches
// [operations.ErrAsyncOperationsNotSupported], and one whose text is
// InvalidOperationIDError's for the operation's ID into one that matches
// [operations.ErrInvalidOperationID], with errors.Is; the text is kept, so the
// failed operation records the plugin's own message, as Velero does. A Progress error
// that carries the gRPC code Unavailable (a plugin process that died or restarts),
// DeadlineExceeded or ResourceExhausted is wrapped with [operations.Retryable], its text
// kept, so that a Monitor with a retry policy asks again later (monitor.Transient); a
// plugin's own error, which Velero's server sends as code Unknown, is not. Every other
// error, from the plugin manager, from Objects or from the plugin, is returned as it
// is. A Velero plugin call takes no context: a Tracker checks ctx before each call,
// and the Monitor's call timeout (monitor.WithCallTimeout) bounds a call that
// hangs.
//
// A Resolver is safe for concurrent use when its Plugins and Objects are: the Monitor
// calls its Trackers from several goroutines at once (monitor.WithWorkers). Velero's
// operations controllers make a plugin manager per reconcile and clean it up after; a
// fork that keeps one for the Monitor's lifetime cleans it up when the Monitor stops.
type Resolver struct {
	plugins Plugins
	objects Objects
}

var _ operations.Resolver = (*Resolver)(nil)

// NewResolver returns a Resolver that finds actions in plugins and run objects with
// objects.
func NewResolver(plugins Plugins, objects Objects) *Resolver {
	return &Resolver{plugins: plugins, objects: objects}
}

// Resolve returns a new Tracker of the plugin named action. It never fails: the plugin
// is looked up at each Progress call, so a plugin that is missing fails the operations
// that name it (with the plugin manager's error), as in Velero.
func (r *Resolver) Resolve(action string) (operations.Tracker, error) {
	return &tracker{r: r, action: action}, nil
}

// A tracker is what Resolver.Resolve returns. Its Cancel uses the target its last
// Progress call looked up for the same operation, so that a check asks the plugin
// manager once, as Velero does.
type tracker struct {
	r      *Resolver
	action string
	// lastMu guards last, the target the last Progress call looked up, and lastOwner
	// and lastID, the operation it was for.
	lastMu    sync.Mutex
	last      target
	lastOwner operations.Owner
	lastID    string
}

var _ operations.Tracker = (*tracker)(nil)

// A target is an item action and the object its calls are about: what one lookup
// finds.
type target interface {
	progress(id string) (vplugin.OperationProgress, error)
	cancel(id string) error
}

type backupTarget struct {
	a biav2.BackupItemAction
	b *velerov1api.Backup
}

func (t backupTarget) progress(id string) (vplugin.OperationProgress, error) {
	return t.a.Progress(id, t.b)
}
func (t backupTarget) cancel(id string) error { return t.a.Cancel(id, t.b) }

type restoreTarget struct {
	a riav2.RestoreItemAction
	r *velerov1api.Restore
}

func (t restoreTarget) progress(id string) (vplugin.OperationProgress, error) {
	return t.a.Progress(id, t.r)
}
func (t restoreTarget) cancel(id string) error { return t.a.Cancel(id, t.r) }

func (t *tracker) Progress(ctx context.Context, op operations.Operation) (operations.Progress, error) {
	tg, err := t.lookup(ctx, op)
	if err != nil {
		return operations.Progress{}, t.progressError(op, err)
	}
	t.lastMu.Lock()
	t.last, t.lastOwner, t.lastID = tg, op.Owner, op.ID
	t.lastMu.Unlock()
	p, err := tg.progress(op.ID)
	if err != nil {
		return operations.Progress{}, t.progressError(op, err)
	}
	return FromProgress(p), nil
}

func (t *tracker) Cancel(ctx context.Context, op operations.Operation) error {
	tg, err := t.takeLast(ctx, op)
	if tg == nil && err == nil {
		tg, err = t.lookup(ctx, op)
	}
	if err == nil {
		err = tg.cancel(op.ID)
	}
	if err != nil {
		return t.pluginError(op, err)
	}
	return nil
}

// takeLast returns, and forgets, the target the last Progress call looked up when it
// was for op, or nil; or ctx.Err() when ctx has ended.
func (t *tracker) takeLast(ctx context.Context, op operations.Operation) (target, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	t.lastMu.Lock()
	defer t.lastMu.Unlock()
	tg := t.last
	if tg == nil || t.lastOwner != op.Owner || t.lastID != op.ID {
		return nil, nil
	}
	t.last = nil
	return tg, nil
}

// lookup gets the action of the tracker's plugin and the object of op's run, for op's
// kind: it fails with ctx.Err() when ctx ends before or during the lookup, with an
// error wrapping operations.ErrInvalid when op's kind is not Velero's or Objects has no
// way to fetch its object, and with the plugin manager's or Objects' error as it is.
func (t *tracker) lookup(ctx context.Context, op operations.Operation) (target, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var (
		tg  target
		err error
	)
	switch op.Owner.Kind {
	case phase.Backup:
		if t.r.objects.Backup == nil {
			return nil, fmt.Errorf("velero: no way to fetch backup %q: %w", op.Owner.Name, operations.ErrInvalid)
		}
		var bt backupTarget
		if bt.a, err = t.r.plugins.GetBackupItemActionV2(t.action); err == nil {
			bt.b, err = t.r.objects.Backup(ctx, op.Owner)
		}
		tg = bt
	case phase.Restore:
		if t.r.objects.Restore == nil {
			return nil, fmt.Errorf("velero: no way to fetch restore %q: %w", op.Owner.Name, operations.ErrInvalid)
		}
		var rt restoreTarget
		if rt.a, err = t.r.plugins.GetRestoreItemActionV2(t.action); err == nil {
			rt.r, err = t.r.objects.Restore(ctx, op.Owner)
		}
		tg = rt
	default:
		return nil, notVeleroKind(op)
	}
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return tg, nil
}

// progressError is the error a Progress call returns for err: Velero's two plugin
// conditions as itemops's errors (see pluginError), else err marked transient when its
// gRPC code says so (see markTransient).
func (t *tracker) progressError(op operations.Operation, err error) error {
	if known := t.knownError(op, err); known != nil {
		return known
	}
	return markTransient(err)
}

// pluginError is the error a Cancel call returns for err: Velero's two plugin
// conditions as itemops's errors, else err as it is.
func (t *tracker) pluginError(op operations.Operation, err error) error {
	if known := t.knownError(op, err); known != nil {
		return known
	}
	return err
}

// knownError maps Velero's two plugin conditions to itemops's errors, and returns nil
// for any other error. Velero's constructors are the same for backup and restore
// actions; over gRPC the message may come wrapped, so it is looked for anywhere in the
// text.
func (t *tracker) knownError(op operations.Operation, err error) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, biav2.AsyncOperationsNotSupportedError().Error()):
		return &PluginError{Err: err, Is: operations.AsyncOperationsNotSupported(t.action, op.ID)}
	case strings.Contains(msg, biav2.InvalidOperationIDError(op.ID).Error()):
		return &PluginError{Err: err, Is: operations.InvalidOperationID(t.action, op.ID)}
	}
	return nil
}

// A PluginError is a Velero plugin's error that means one of the conditions itemops
// names. Its message is the plugin's; errors.Is and errors.As see both the plugin's
// error (Err) and the itemops error (Is, an *operations.OperationError wrapping
// operations.ErrAsyncOperationsNotSupported or operations.ErrInvalidOperationID).
type PluginError struct {
	Err error
	Is  error
}

// Error returns the plugin's message.
func (e *PluginError) Error() string { return e.Err.Error() }

// Unwrap returns the itemops error and the plugin's.
func (e *PluginError) Unwrap() []error { return []error{e.Is, e.Err} }

// notVeleroKind is the error of a call for op, whose owner's kind is neither Backup nor
// Restore (a kind of one's own, see phase.Declare): it wraps operations.ErrInvalid.
func notVeleroKind(op operations.Operation) error {
	return fmt.Errorf("velero: operation %q: %w: kind %q is not Backup or Restore, the only kinds Velero's plugins serve", op.ID, operations.ErrInvalid, op.Owner.Kind)
}
