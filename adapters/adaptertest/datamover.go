package adaptertest

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/itemops/itemops/adapters"
	"github.com/itemops/itemops/clock"
	"github.com/itemops/itemops/operations"
)

// Defaults of [DataMoverOptions].
const (
	DefaultMoverSize  = 1 << 30  // units each operation moves: 1 GiB
	DefaultMoverRate  = 64 << 20 // units moved per second: 64 MiB, so an operation takes 16s
	DefaultMoverUnits = "Bytes"
)

// DataMoverOptions configure a [DataMover]. A nil *DataMoverOptions means all defaults.
type DataMoverOptions struct {
	// Size is how many units each operation moves. Zero or less means
	// [DefaultMoverSize].
	Size int64
	// Rate is how many units an operation moves per second of the mover's clock. Zero
	// or less means [DefaultMoverRate].
	Rate int64
	// Units names what Size and Rate count. Empty means [DefaultMoverUnits].
	Units string
	// Selector is what the actions' AppliesTo returns. The zero selector selects every
	// item.
	Selector adapters.ResourceSelector
	// FailWith, when not empty, makes every operation end failed, with this error, when
	// it would have completed.
	FailWith string
}

// A DataMover is a fake v2 data-mover plugin whose operations move data at a steady rate
// by an injected clock, so that a test, or a demonstration, moves them forward by
// advancing the clock. One DataMover serves as a backup item action
// ([DataMover.BackupItemAction]), a restore item action ([DataMover.RestoreItemAction])
// and a volume snapshotter ([DataMover.VolumeSnapshotter]); each Execute or
// CreateSnapshot starts an operation with an ID unique within the mover ("<name>/1",
// "<name>/2", ...).
//
// An operation reports Started when it started, NCompleted growing in proportion to the
// time elapsed, NTotal the size, and Completed once [DataMover.Duration] has elapsed
// (failed with DataMoverOptions.FailWith when that is set). Cancel ends a running
// operation, failed with the error "cancelled"; it changes nothing once an operation has
// ended. Progress and Cancel of an ID the mover does not know return an error wrapping
// [operations.ErrInvalidOperationID]. Operations live in memory only.
//
// A DataMover is safe for concurrent use. Its zero value is not usable: call
// [NewDataMover].
type DataMover[B, R any] struct {
	name     string
	clock    clock.Clock
	size     int64
	units    string
	selector adapters.ResourceSelector
	failWith string
	duration time.Duration

	// movesMu guards moves and seq.
	movesMu sync.Mutex
	moves   map[string]*move
	seq     int
}

// move is one operation of a DataMover.
type move struct {
	started time.Time
	// ended is set by Cancel, with the units moved by then.
	cancelled bool
	ended     time.Time
	moved     int64
}

// NewDataMover returns a DataMover registered as name, whose time is clock's (nil: the
// system clock), configured by o (nil: all defaults).
func NewDataMover[B, R any](name string, clock clock.Clock, o *DataMoverOptions) *DataMover[B, R] {
	if o == nil {
		o = &DataMoverOptions{}
	}
	m := &DataMover[B, R]{
		name:     name,
		clock:    clock,
		size:     o.Size,
		units:    o.Units,
		selector: o.Selector,
		failWith: o.FailWith,
		moves:    make(map[string]*move),
	}
	if m.clock == nil {
		m.clock = systemClock{}
	}
	if m.size <= 0 {
		m.size = DefaultMoverSize
	}
	rate := o.Rate
	if rate <= 0 {
		rate = DefaultMoverRate
	}
	if m.units == "" {
		m.units = DefaultMoverUnits
	}
	m.duration = time.Duration(math.Ceil(float64(m.size) / float64(rate) * float64(time.Second)))
	return m
}

type systemClock struct{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Name returns the name the mover was created with.
func (m *DataMover[B, R]) Name() string { return m.name }

// Duration returns how long each operation runs, by the mover's clock.
func (m *DataMover[B, R]) Duration() time.Duration { return m.duration }

// Start starts an operation now and returns its ID, as the actions' Execute does.
func (m *DataMover[B, R]) Start() string {
	now := m.clock.Now()
	m.movesMu.Lock()
	defer m.movesMu.Unlock()
	m.seq++
	id := fmt.Sprintf("%s/%d", m.name, m.seq)
	m.moves[id] = &move{started: now}
	return id
}

// Progress reports how operation id is doing at the clock's now. It returns ctx.Err()
// when ctx is done, and an error wrapping [operations.ErrInvalidOperationID] for an
// unknown ID.
func (m *DataMover[B, R]) Progress(ctx context.Context, id string) (operations.Progress, error) {
	if err := ctx.Err(); err != nil {
		return operations.Progress{}, err
	}
	now := m.clock.Now()
	m.movesMu.Lock()
	defer m.movesMu.Unlock()
	mv, ok := m.moves[id]
	if !ok {
		return operations.Progress{}, operations.InvalidOperationID(m.name, id)
	}
	p := operations.Progress{NTotal: m.size, OperationUnits: m.units, Started: mv.started}
	switch {
	case mv.cancelled:
		p.Completed, p.Err, p.Description = true, "cancelled", "cancelled"
		p.NCompleted, p.Updated = mv.moved, mv.ended
	case now.Sub(mv.started) >= m.duration:
		p.Completed, p.Description = true, "completed"
		p.NCompleted, p.Updated = m.size, mv.started.Add(m.duration)
		if m.failWith != "" {
			p.Err, p.Description = m.failWith, "failed"
		}
	default:
		p.Description = "moving data"
		p.NCompleted, p.Updated = m.moved(now.Sub(mv.started)), now
	}
	return p, nil
}

// moved returns the units an operation has moved after running for elapsed, short of
// its end.
func (m *DataMover[B, R]) moved(elapsed time.Duration) int64 {
	if elapsed <= 0 {
		return 0
	}
	n := int64(float64(m.size) * (float64(elapsed) / float64(m.duration)))
	return min(n, m.size-1)
}

// Cancel ends operation id, failed with "cancelled", if it is still running. It returns
// ctx.Err() when ctx is done, and an error wrapping [operations.ErrInvalidOperationID]
// for an unknown ID.
func (m *DataMover[B, R]) Cancel(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	now := m.clock.Now()
	m.movesMu.Lock()
	defer m.movesMu.Unlock()
	mv, ok := m.moves[id]
	if !ok {
		return operations.InvalidOperationID(m.name, id)
	}
	if mv.cancelled || now.Sub(mv.started) >= m.duration {
		return nil
	}
	mv.cancelled, mv.ended, mv.moved = true, now, m.moved(now.Sub(mv.started))
	return nil
}

// forget drops operation id; it reports whether the mover knew it.
func (m *DataMover[B, R]) forget(id string) bool {
	m.movesMu.Lock()
	defer m.movesMu.Unlock()
	_, ok := m.moves[id]
	delete(m.moves, id)
	return ok
}

// completed reports whether operation id has completed without error.
func (m *DataMover[B, R]) completed(ctx context.Context, id string) error {
	p, err := m.Progress(ctx, id)
	switch {
	case err != nil:
		return err
	case !p.Completed:
		return fmt.Errorf("snapshot %q not ready: %d of %d %s moved", id, p.NCompleted, p.NTotal, p.OperationUnits)
	case p.Err != "":
		return fmt.Errorf("snapshot %q: %s", id, p.Err)
	}
	return nil
}

// BackupItemAction returns the mover as a v2 backup item action: Execute starts an
// operation and returns the item unchanged with the operation's ID and no additional or
// post-operation items; Progress and Cancel are the mover's and ignore the backup.
func (m *DataMover[B, R]) BackupItemAction() adapters.BackupItemAction[B] {
	return moverBackup[B, R]{m}
}

type moverBackup[B, R any] struct{ m *DataMover[B, R] }

var _ adapters.BackupItemAction[struct{}] = moverBackup[struct{}, struct{}]{}

func (a moverBackup[B, R]) Name() string { return a.m.name }

func (a moverBackup[B, R]) AppliesTo(ctx context.Context) (adapters.ResourceSelector, error) {
	return a.m.selector, ctx.Err()
}

func (a moverBackup[B, R]) Execute(ctx context.Context, item runtime.Unstructured, _ B) (runtime.Unstructured, []operations.ResourceIdentifier, string, []operations.ResourceIdentifier, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, "", nil, err
	}
	return item, nil, a.m.Start(), nil, nil
}

func (a moverBackup[B, R]) Progress(ctx context.Context, id string, _ B) (operations.Progress, error) {
	return a.m.Progress(ctx, id)
}

func (a moverBackup[B, R]) Cancel(ctx context.Context, id string, _ B) error {
	return a.m.Cancel(ctx, id)
}

// RestoreItemAction returns the mover as a v2 restore item action: Execute starts an
// operation and returns the input's item with the operation's ID; Progress and Cancel
// are the mover's and ignore the restore; AreAdditionalItemsReady returns true.
func (m *DataMover[B, R]) RestoreItemAction() adapters.RestoreItemAction[R] {
	return moverRestore[B, R]{m}
}

type moverRestore[B, R any] struct{ m *DataMover[B, R] }

var _ adapters.RestoreItemAction[struct{}] = moverRestore[struct{}, struct{}]{}

func (a moverRestore[B, R]) Name() string { return a.m.name }

func (a moverRestore[B, R]) AppliesTo(ctx context.Context) (adapters.ResourceSelector, error) {
	return a.m.selector, ctx.Err()
}

func (a moverRestore[B, R]) Execute(ctx context.Context, in adapters.RestoreItemActionInput[R]) (adapters.RestoreItemActionOutput, error) {
	if err := ctx.Err(); err != nil {
		return adapters.RestoreItemActionOutput{}, err
	}
	return adapters.RestoreItemActionOutput{UpdatedItem: in.Item, OperationID: a.m.Start()}, nil
}

func (a moverRestore[B, R]) Progress(ctx context.Context, id string, _ R) (operations.Progress, error) {
	return a.m.Progress(ctx, id)
}

func (a moverRestore[B, R]) Cancel(ctx context.Context, id string, _ R) error {
	return a.m.Cancel(ctx, id)
}

func (a moverRestore[B, R]) AreAdditionalItemsReady(ctx context.Context, _ []operations.ResourceIdentifier, _ R) (bool, error) {
	return ctx.Err() == nil, ctx.Err()
}

// VolumeSnapshotter returns the mover as a v2 volume snapshotter: CreateSnapshot starts
// an operation and returns its ID as the snapshot ID; Progress and Cancel are the
// mover's; DeleteSnapshot forgets the snapshot (an unknown one is an error wrapping
// [operations.ErrInvalidOperationID]); CreateVolumeFromSnapshot returns "vol-" and the
// snapshot ID once the snapshot's operation completed, and an error before; Init does
// nothing, GetVolumeID returns the persistent volume's name, SetVolumeID returns it
// unchanged and GetVolumeInfo returns "standard" and no IOPS.
func (m *DataMover[B, R]) VolumeSnapshotter() adapters.VolumeSnapshotter {
	return moverSnapshotter[B, R]{m}
}

type moverSnapshotter[B, R any] struct{ m *DataMover[B, R] }

var _ adapters.VolumeSnapshotter = moverSnapshotter[struct{}, struct{}]{}

func (s moverSnapshotter[B, R]) Name() string { return s.m.name }

func (s moverSnapshotter[B, R]) Init(ctx context.Context, _ map[string]string) error {
	return ctx.Err()
}

func (s moverSnapshotter[B, R]) CreateVolumeFromSnapshot(ctx context.Context, snapshotID, _, _ string, _ *int64) (string, error) {
	if err := s.m.completed(ctx, snapshotID); err != nil {
		return "", err
	}
	return "vol-" + snapshotID, nil
}

func (s moverSnapshotter[B, R]) GetVolumeID(ctx context.Context, pv runtime.Unstructured) (string, error) {
	return itemName(pv), ctx.Err()
}

func (s moverSnapshotter[B, R]) SetVolumeID(ctx context.Context, pv runtime.Unstructured, _ string) (runtime.Unstructured, error) {
	return pv, ctx.Err()
}

func (s moverSnapshotter[B, R]) GetVolumeInfo(ctx context.Context, _, _ string) (string, *int64, error) {
	return "standard", nil, ctx.Err()
}

func (s moverSnapshotter[B, R]) CreateSnapshot(ctx context.Context, _, _ string, _ map[string]string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	return s.m.Start(), nil
}

func (s moverSnapshotter[B, R]) DeleteSnapshot(ctx context.Context, snapshotID string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !s.m.forget(snapshotID) {
		return operations.InvalidOperationID(s.m.name, snapshotID)
	}
	return nil
}

func (s moverSnapshotter[B, R]) Progress(ctx context.Context, snapshotID string) (operations.Progress, error) {
	return s.m.Progress(ctx, snapshotID)
}

func (s moverSnapshotter[B, R]) Cancel(ctx context.Context, snapshotID string) error {
	return s.m.Cancel(ctx, snapshotID)
}
