package velero

import (
	"context"
	"fmt"
	"strings"

	velerov1api "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"
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

// A Resolver is an [operations.Resolver] over Velero's plugins: the Tracker it gives
// for a plugin name gets the backup or restore item action of that name from the
// plugin manager, and the run's object from [Objects], at each call, as Velero's
// operations controllers do at each reconcile, and calls the action's Progress and
// Cancel with the operation's ID.
//
// Velero's plugins report two conditions by their message alone: the Trackers turn
// an error whose text is AsyncOperationsNotSupportedError's into one that matches
// [operations.ErrAsyncOperationsNotSupported], and one whose text is
// InvalidOperationIDError's for the operation's ID into one that matches
// [operations.ErrInvalidOperationID], with errors.Is; the text is kept, so the
// failed operation records the plugin's own message, as Velero does. Every other
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

// Resolve returns the Tracker of the plugin named action. It never fails: the plugin
// is looked up at each call, so a plugin that is missing fails the operations that
// name it (with the plugin manager's error), as in Velero.
func (r *Resolver) Resolve(action string) (operations.Tracker, error) {
	return tracker{r: r, action: action}, nil
}

type tracker struct {
	r      *Resolver
	action string
}

var _ operations.Tracker = tracker{}

func (t tracker) Progress(ctx context.Context, op operations.Operation) (operations.Progress, error) {
	var (
		p   operations.Progress
		err error
	)
	switch op.Owner.Kind {
	case phase.Backup:
		var a biav2.BackupItemAction
		var b *velerov1api.Backup
		if a, b, err = t.backup(ctx, op); err == nil {
			vp, perr := a.Progress(op.ID, b)
			p, err = FromProgress(vp), perr
		}
	case phase.Restore:
		var a riav2.RestoreItemAction
		var rs *velerov1api.Restore
		if a, rs, err = t.restore(ctx, op); err == nil {
			vp, perr := a.Progress(op.ID, rs)
			p, err = FromProgress(vp), perr
		}
	default:
		err = notVeleroKind(op)
	}
	if err != nil {
		return operations.Progress{}, t.pluginError(op, err)
	}
	return p, nil
}

func (t tracker) Cancel(ctx context.Context, op operations.Operation) error {
	var err error
	switch op.Owner.Kind {
	case phase.Backup:
		var a biav2.BackupItemAction
		var b *velerov1api.Backup
		if a, b, err = t.backup(ctx, op); err == nil {
			err = a.Cancel(op.ID, b)
		}
	case phase.Restore:
		var a riav2.RestoreItemAction
		var rs *velerov1api.Restore
		if a, rs, err = t.restore(ctx, op); err == nil {
			err = a.Cancel(op.ID, rs)
		}
	default:
		err = notVeleroKind(op)
	}
	if err != nil {
		return t.pluginError(op, err)
	}
	return nil
}

func (t tracker) backup(ctx context.Context, op operations.Operation) (biav2.BackupItemAction, *velerov1api.Backup, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if t.r.objects.Backup == nil {
		return nil, nil, fmt.Errorf("velero: no way to fetch backup %q: %w", op.Owner.Name, operations.ErrInvalid)
	}
	a, err := t.r.plugins.GetBackupItemActionV2(t.action)
	if err != nil {
		return nil, nil, err
	}
	b, err := t.r.objects.Backup(ctx, op.Owner)
	if err != nil {
		return nil, nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	return a, b, nil
}

func (t tracker) restore(ctx context.Context, op operations.Operation) (riav2.RestoreItemAction, *velerov1api.Restore, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if t.r.objects.Restore == nil {
		return nil, nil, fmt.Errorf("velero: no way to fetch restore %q: %w", op.Owner.Name, operations.ErrInvalid)
	}
	a, err := t.r.plugins.GetRestoreItemActionV2(t.action)
	if err != nil {
		return nil, nil, err
	}
	rs, err := t.r.objects.Restore(ctx, op.Owner)
	if err != nil {
		return nil, nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	return a, rs, nil
}

// pluginError maps Velero's two plugin conditions to itemops's errors. Velero's
// constructors are the same for backup and restore actions; over gRPC the message
// may come wrapped, so it is looked for anywhere in the text.
func (t tracker) pluginError(op operations.Operation, err error) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, biav2.AsyncOperationsNotSupportedError().Error()):
		return &PluginError{Err: err, Is: operations.AsyncOperationsNotSupported(t.action, op.ID)}
	case strings.Contains(msg, biav2.InvalidOperationIDError(op.ID).Error()):
		return &PluginError{Err: err, Is: operations.InvalidOperationID(t.action, op.ID)}
	}
	return err
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
