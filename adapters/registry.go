package adapters

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// A Lookup returns the backup or restore object of owner o, which the registry passes to
// an action's Progress and Cancel: a Velero fork reads its *Backup or *Restore from the
// API server or a cache, an operator its own resource. It should return ctx.Err() soon
// after ctx ends.
type Lookup[T any] func(ctx context.Context, o operations.Owner) (T, error)

// A Registry holds the plugins of a host by name: backup item actions, restore item
// actions and volume snapshotters, each registered as v1 (and adapted) or v2. It lists
// the actions that apply to an item, and it is the [operations.Resolver] of a
// [github.com/itemops/itemops/operations/monitor.Monitor]: an operation's Action names
// the plugin asked about it.
//
// B and R are the types of the backup and restore objects the actions take. The
// operations the Monitor holds name only their owner, so the registry fetches the object
// with the [Lookup] of the owner's kind before it calls Progress or Cancel.
//
// Names: backup item actions and volume snapshotters share one space of names, since
// both own backup operations; restore item actions have their own, so one plugin may
// register a backup and a restore action under the same name. Within a kind, a name may
// hold one v1 and one v2 plugin: the native v2 is the one used, whatever the order of
// registration, and the name keeps the place of its first registration.
//
// A Registry is safe for concurrent use. Its zero value is an empty registry whose
// lookups return the zero B and R; [NewRegistry] sets them.
type Registry[B, R any] struct {
	backups  Lookup[B]
	restores Lookup[R]

	// pluginsMu guards the three tables.
	pluginsMu    sync.RWMutex
	backupItems  table[BackupItemAction[B]]
	restoreItems table[RestoreItemAction[R]]
	snapshotters table[VolumeSnapshotter]
}

var _ operations.Resolver = (*Registry[struct{}, struct{}])(nil)

// NewRegistry returns an empty Registry that finds the backup and restore objects its
// trackers pass to actions with backups and restores. A nil Lookup passes the zero value
// of its type, which suits actions that ignore the object.
func NewRegistry[B, R any](backups Lookup[B], restores Lookup[R]) *Registry[B, R] {
	return &Registry[B, R]{backups: backups, restores: restores}
}

// table holds the plugins of one kind, in the order of their names' first registration.
type table[P any] struct {
	order  []*slot[P]
	byName map[string]*slot[P]
}

// slot holds the plugins registered under one name.
type slot[P any] struct {
	name                  string
	native, adapted       P
	hasNative, hasAdapted bool
	// matcher caches the selector of the plugin in use; gen counts changes of that
	// plugin, so that a matcher computed for an older one is not stored.
	matcher *Matcher
	gen     int
}

// plugin returns the plugin in use under the slot's name: the native one if any.
func (s *slot[P]) plugin() P {
	if s.hasNative {
		return s.native
	}
	return s.adapted
}

func (t *table[P]) get(name string) (P, bool) {
	s := t.byName[name]
	if s == nil {
		var zero P
		return zero, false
	}
	return s.plugin(), true
}

// add registers p under name; the caller holds the lock and has checked p and name.
func (t *table[P]) add(kind, name string, p P, native bool) error {
	s := t.byName[name]
	if s == nil {
		if t.byName == nil {
			t.byName = make(map[string]*slot[P])
		}
		s = &slot[P]{name: name}
		t.byName[name] = s
		t.order = append(t.order, s)
	}
	switch {
	case native && s.hasNative:
		return fmt.Errorf("%s %q: a v2 plugin is already registered under that name: %w", kind, name, ErrDuplicatePlugin)
	case !native && s.hasAdapted:
		return fmt.Errorf("%s %q: a v1 plugin is already registered under that name: %w", kind, name, ErrDuplicatePlugin)
	case native:
		s.native, s.hasNative = p, true
		s.matcher, s.gen = nil, s.gen+1
	default:
		s.adapted, s.hasAdapted = p, true
		if !s.hasNative {
			s.matcher, s.gen = nil, s.gen+1
		}
	}
	return nil
}

const (
	kindBackupItemAction  = "backup item action"
	kindRestoreItemAction = "restore item action"
	kindVolumeSnapshotter = "volume snapshotter"
)

// RegisterBackupItemAction registers the v2 action a under a.Name(). It fails with an
// error wrapping [ErrInvalidPlugin] when a is nil or its name is empty, and with one
// wrapping [ErrDuplicatePlugin] when a v2 backup item action already has the name or a
// volume snapshotter does. A v1 action registered under the same name stays registered
// but is no longer used.
func (r *Registry[B, R]) RegisterBackupItemAction(a BackupItemAction[B]) error {
	if a == nil {
		return fmt.Errorf("%s: nil: %w", kindBackupItemAction, ErrInvalidPlugin)
	}
	return r.addBackupItemAction(a.Name(), a, true)
}

// RegisterBackupItemActionV1 registers the v1 action a under name, adapted by
// [BackupItemActionFromV1]. It fails as [Registry.RegisterBackupItemAction] does, a
// duplicate being a v1 backup item action of the same name. When a v2 action has the
// name, it stays the one used.
func (r *Registry[B, R]) RegisterBackupItemActionV1(name string, a BackupItemActionV1[B]) error {
	if a == nil {
		return fmt.Errorf("%s %q: nil: %w", kindBackupItemAction, name, ErrInvalidPlugin)
	}
	return r.addBackupItemAction(name, BackupItemActionFromV1(name, a), false)
}

func (r *Registry[B, R]) addBackupItemAction(name string, a BackupItemAction[B], native bool) error {
	if name == "" {
		return fmt.Errorf("%s: empty name: %w", kindBackupItemAction, ErrInvalidPlugin)
	}
	r.pluginsMu.Lock()
	defer r.pluginsMu.Unlock()
	if _, ok := r.snapshotters.get(name); ok {
		return fmt.Errorf("%s %q: a volume snapshotter has that name: %w", kindBackupItemAction, name, ErrDuplicatePlugin)
	}
	return r.backupItems.add(kindBackupItemAction, name, a, native)
}

// RegisterRestoreItemAction registers the v2 action a under a.Name(). It fails with an
// error wrapping [ErrInvalidPlugin] when a is nil or its name is empty, and with one
// wrapping [ErrDuplicatePlugin] when a v2 restore item action already has the name. A v1
// action registered under the same name stays registered but is no longer used.
func (r *Registry[B, R]) RegisterRestoreItemAction(a RestoreItemAction[R]) error {
	if a == nil {
		return fmt.Errorf("%s: nil: %w", kindRestoreItemAction, ErrInvalidPlugin)
	}
	return r.addRestoreItemAction(a.Name(), a, true)
}

// RegisterRestoreItemActionV1 registers the v1 action a under name, adapted by
// [RestoreItemActionFromV1]. It fails as [Registry.RegisterRestoreItemAction] does, a
// duplicate being a v1 restore item action of the same name. When a v2 action has the
// name, it stays the one used.
func (r *Registry[B, R]) RegisterRestoreItemActionV1(name string, a RestoreItemActionV1[R]) error {
	if a == nil {
		return fmt.Errorf("%s %q: nil: %w", kindRestoreItemAction, name, ErrInvalidPlugin)
	}
	return r.addRestoreItemAction(name, RestoreItemActionFromV1(name, a), false)
}

func (r *Registry[B, R]) addRestoreItemAction(name string, a RestoreItemAction[R], native bool) error {
	if name == "" {
		return fmt.Errorf("%s: empty name: %w", kindRestoreItemAction, ErrInvalidPlugin)
	}
	r.pluginsMu.Lock()
	defer r.pluginsMu.Unlock()
	return r.restoreItems.add(kindRestoreItemAction, name, a, native)
}

// RegisterVolumeSnapshotter registers the v2 snapshotter s under s.Name(). It fails with
// an error wrapping [ErrInvalidPlugin] when s is nil or its name is empty, and with one
// wrapping [ErrDuplicatePlugin] when a v2 snapshotter already has the name or a backup
// item action does. A v1 snapshotter registered under the same name stays registered but
// is no longer used. The registry does not call Init: initialise s first.
func (r *Registry[B, R]) RegisterVolumeSnapshotter(s VolumeSnapshotter) error {
	if s == nil {
		return fmt.Errorf("%s: nil: %w", kindVolumeSnapshotter, ErrInvalidPlugin)
	}
	return r.addVolumeSnapshotter(s.Name(), s, true)
}

// RegisterVolumeSnapshotterV1 registers the v1 snapshotter s under name, adapted by
// [VolumeSnapshotterFromV1]. It fails as [Registry.RegisterVolumeSnapshotter] does, a
// duplicate being a v1 snapshotter of the same name. When a v2 snapshotter has the name,
// it stays the one used.
func (r *Registry[B, R]) RegisterVolumeSnapshotterV1(name string, s VolumeSnapshotterV1) error {
	if s == nil {
		return fmt.Errorf("%s %q: nil: %w", kindVolumeSnapshotter, name, ErrInvalidPlugin)
	}
	return r.addVolumeSnapshotter(name, VolumeSnapshotterFromV1(name, s), false)
}

func (r *Registry[B, R]) addVolumeSnapshotter(name string, s VolumeSnapshotter, native bool) error {
	if name == "" {
		return fmt.Errorf("%s: empty name: %w", kindVolumeSnapshotter, ErrInvalidPlugin)
	}
	r.pluginsMu.Lock()
	defer r.pluginsMu.Unlock()
	if _, ok := r.backupItems.get(name); ok {
		return fmt.Errorf("%s %q: a backup item action has that name: %w", kindVolumeSnapshotter, name, ErrDuplicatePlugin)
	}
	return r.snapshotters.add(kindVolumeSnapshotter, name, s, native)
}

// BackupItemAction returns the backup item action in use under name, or an error
// wrapping [ErrUnknownPlugin].
func (r *Registry[B, R]) BackupItemAction(name string) (BackupItemAction[B], error) {
	r.pluginsMu.RLock()
	defer r.pluginsMu.RUnlock()
	if a, ok := r.backupItems.get(name); ok {
		return a, nil
	}
	return nil, fmt.Errorf("%s %q: %w", kindBackupItemAction, name, ErrUnknownPlugin)
}

// RestoreItemAction returns the restore item action in use under name, or an error
// wrapping [ErrUnknownPlugin].
func (r *Registry[B, R]) RestoreItemAction(name string) (RestoreItemAction[R], error) {
	r.pluginsMu.RLock()
	defer r.pluginsMu.RUnlock()
	if a, ok := r.restoreItems.get(name); ok {
		return a, nil
	}
	return nil, fmt.Errorf("%s %q: %w", kindRestoreItemAction, name, ErrUnknownPlugin)
}

// VolumeSnapshotter returns the volume snapshotter in use under name, or an error
// wrapping [ErrUnknownPlugin].
func (r *Registry[B, R]) VolumeSnapshotter(name string) (VolumeSnapshotter, error) {
	r.pluginsMu.RLock()
	defer r.pluginsMu.RUnlock()
	if s, ok := r.snapshotters.get(name); ok {
		return s, nil
	}
	return nil, fmt.Errorf("%s %q: %w", kindVolumeSnapshotter, name, ErrUnknownPlugin)
}

// BackupItemActionsFor returns the backup item actions that apply to item, an object of
// resource gr, in the order their names were first registered (see [Matcher.MatchesItem]
// for how items are matched).
//
// Each action's AppliesTo is called once, the first time the registry needs it, and its
// selector is kept while the action stays the one used under its name, as Velero
// resolves its actions once per backup. A failing AppliesTo, or a selector that
// [NewMatcher] refuses, fails the call with an error naming the action; nothing is kept,
// so the next call asks again. BackupItemActionsFor returns ctx.Err() if ctx is done
// before it is through.
func (r *Registry[B, R]) BackupItemActionsFor(ctx context.Context, gr schema.GroupResource, item runtime.Unstructured) ([]BackupItemAction[B], error) {
	return applicable(ctx, &r.pluginsMu, &r.backupItems, kindBackupItemAction, gr, item)
}

// RestoreItemActionsFor returns the restore item actions that apply to item, an object
// of resource gr, in the order their names were first registered. It asks for and keeps
// selectors, and fails, as [Registry.BackupItemActionsFor] does.
func (r *Registry[B, R]) RestoreItemActionsFor(ctx context.Context, gr schema.GroupResource, item runtime.Unstructured) ([]RestoreItemAction[R], error) {
	return applicable(ctx, &r.pluginsMu, &r.restoreItems, kindRestoreItemAction, gr, item)
}

type selectorSource interface {
	AppliesTo(ctx context.Context) (ResourceSelector, error)
}

// applicable lists the plugins of t that apply to item. mu guards t.
func applicable[P selectorSource](ctx context.Context, mu *sync.RWMutex, t *table[P], kind string, gr schema.GroupResource, item runtime.Unstructured) ([]P, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	type candidate struct {
		s       *slot[P]
		p       P
		matcher *Matcher
		gen     int
	}
	mu.RLock()
	cands := make([]candidate, len(t.order))
	for i, s := range t.order {
		cands[i] = candidate{s: s, p: s.plugin(), matcher: s.matcher, gen: s.gen}
	}
	mu.RUnlock()

	var out []P
	for _, c := range cands {
		if c.matcher == nil {
			// Asked outside the lock: AppliesTo may call into a plugin process.
			sel, err := c.p.AppliesTo(ctx)
			if err == nil {
				c.matcher, err = NewMatcher(sel)
			}
			if err != nil {
				if ctxErr := ctx.Err(); ctxErr != nil {
					return nil, ctxErr
				}
				return nil, fmt.Errorf("%s %q: applies to: %w", kind, c.s.name, err)
			}
			mu.Lock()
			if c.s.gen == c.gen {
				c.s.matcher = c.matcher
			}
			mu.Unlock()
		}
		if c.matcher.MatchesItem(gr, item) {
			out = append(out, c.p)
		}
	}
	return out, nil
}

// Resolve returns the [operations.Tracker] of the plugins registered under action, for
// the Monitor. The tracker serves an operation by its owner's kind: a backup's from the
// backup item action of that name, or else the volume snapshotter; a restore's from the
// restore item action; an operation of a kind of one's own (see phase.Declare) from
// whichever of those the name has (a name with both backup and restore actions fails
// such operations with ErrUnknownPlugin, since the operation does not say which its kind
// follows). It fetches the owner's object with the registry's [Lookup] and
// passes it to the action's Progress or Cancel; a failing Lookup fails the call with an
// error that wraps the Lookup's.
//
// Resolve fails with an error wrapping [ErrUnknownPlugin] when no plugin of any kind has
// the name; the tracker fails so when the name has no plugin of the operation's kind. The
// tracker uses the plugins registered when Resolve was called.
func (r *Registry[B, R]) Resolve(action string) (operations.Tracker, error) {
	r.pluginsMu.RLock()
	defer r.pluginsMu.RUnlock()
	t := &tracker[B, R]{name: action, backups: r.backups, restores: r.restores}
	t.backupItem, _ = r.backupItems.get(action)
	t.restoreItem, _ = r.restoreItems.get(action)
	t.snapshotter, _ = r.snapshotters.get(action)
	if t.backupItem == nil && t.restoreItem == nil && t.snapshotter == nil {
		return nil, fmt.Errorf("plugin %q: %w", action, ErrUnknownPlugin)
	}
	return t, nil
}

// tracker serves the operations of the plugins registered under one name.
type tracker[B, R any] struct {
	name        string
	backups     Lookup[B]
	restores    Lookup[R]
	backupItem  BackupItemAction[B]  // nil: none
	restoreItem RestoreItemAction[R] // nil: none
	snapshotter VolumeSnapshotter    // nil: none
}

var _ operations.Tracker = (*tracker[struct{}, struct{}])(nil)

func (t *tracker[B, R]) Progress(ctx context.Context, op operations.Operation) (operations.Progress, error) {
	kind, err := t.side(op)
	if err != nil {
		return operations.Progress{}, err
	}
	switch {
	case kind == phase.Backup && t.backupItem != nil:
		b, err := lookup(ctx, t.backups, op.Owner)
		if err != nil {
			return operations.Progress{}, err
		}
		return t.backupItem.Progress(ctx, op.ID, b)
	case kind == phase.Backup && t.snapshotter != nil:
		return t.snapshotter.Progress(ctx, op.ID)
	case kind == phase.Restore && t.restoreItem != nil:
		r, err := lookup(ctx, t.restores, op.Owner)
		if err != nil {
			return operations.Progress{}, err
		}
		return t.restoreItem.Progress(ctx, op.ID, r)
	}
	return operations.Progress{}, t.unknown(op)
}

func (t *tracker[B, R]) Cancel(ctx context.Context, op operations.Operation) error {
	kind, err := t.side(op)
	if err != nil {
		return err
	}
	switch {
	case kind == phase.Backup && t.backupItem != nil:
		b, err := lookup(ctx, t.backups, op.Owner)
		if err != nil {
			return err
		}
		return t.backupItem.Cancel(ctx, op.ID, b)
	case kind == phase.Backup && t.snapshotter != nil:
		return t.snapshotter.Cancel(ctx, op.ID)
	case kind == phase.Restore && t.restoreItem != nil:
		r, err := lookup(ctx, t.restores, op.Owner)
		if err != nil {
			return err
		}
		return t.restoreItem.Cancel(ctx, op.ID, r)
	}
	return t.unknown(op)
}

// side returns whose plugins serve op: Backup's (backup item actions and volume
// snapshotters) or Restore's, as op's owner's kind says. An operation of a kind of one's
// own (see phase.Declare) is served by the plugins the name has: its backup plugins when
// it has only those, its restore item action when it has only that. A name with both
// cannot tell which of them a kind of one's own follows, so side fails then, with an
// error wrapping ErrUnknownPlugin.
func (t *tracker[B, R]) side(op operations.Operation) (phase.Kind, error) {
	if k := op.Owner.Kind; k == phase.Backup || k == phase.Restore {
		return k, nil
	}
	backup := t.backupItem != nil || t.snapshotter != nil
	switch {
	case backup && t.restoreItem != nil:
		return "", fmt.Errorf("plugin %q: has backup and restore actions, so it cannot tell which to call for operations of %s, a kind of one's own: register them under two names: %w", t.name, op.Owner, ErrUnknownPlugin)
	case backup:
		return phase.Backup, nil
	}
	return phase.Restore, nil
}

func (t *tracker[B, R]) unknown(op operations.Operation) error {
	return fmt.Errorf("plugin %q: none for operations of %s: %w", t.name, op.Owner, ErrUnknownPlugin)
}

// lookup fetches the object of owner o with l, or returns the zero T when l is nil.
func lookup[T any](ctx context.Context, l Lookup[T], o operations.Owner) (T, error) {
	if l == nil {
		var zero T
		return zero, nil
	}
	v, err := l(ctx, o)
	if err != nil {
		return v, fmt.Errorf("look up %s: %w", o, err)
	}
	return v, nil
}
