package adaptertest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/itemops/itemops/adapters"
	"github.com/itemops/itemops/adapters/adaptertest"
	"github.com/itemops/itemops/clock/clocktest"
	"github.com/itemops/itemops/operations"
)

var t0 = time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)

func TestDataMoverProgressOverTime(t *testing.T) {
	const size, rate = 1000, 100 // ten seconds
	tests := []struct {
		name    string
		opts    adaptertest.DataMoverOptions
		cancel  time.Duration // > 0: Cancel after this long
		elapsed time.Duration // then Progress after this long
		want    operations.Progress
	}{
		{
			name: "just started", elapsed: 0,
			want: operations.Progress{NTotal: size, OperationUnits: "Bytes", Description: "moving data", Started: t0, Updated: t0},
		},
		{
			name: "a quarter through", elapsed: 2500 * time.Millisecond,
			want: operations.Progress{NCompleted: 250, NTotal: size, OperationUnits: "Bytes", Description: "moving data", Started: t0, Updated: t0.Add(2500 * time.Millisecond)},
		},
		{
			name: "an instant before the end", elapsed: 10*time.Second - time.Nanosecond,
			want: operations.Progress{NCompleted: size - 1, NTotal: size, OperationUnits: "Bytes", Description: "moving data", Started: t0, Updated: t0.Add(10*time.Second - time.Nanosecond)},
		},
		{
			name: "at the end", elapsed: 10 * time.Second,
			want: operations.Progress{Completed: true, NCompleted: size, NTotal: size, OperationUnits: "Bytes", Description: "completed", Started: t0, Updated: t0.Add(10 * time.Second)},
		},
		{
			name: "long after the end: Updated stays at the end", elapsed: time.Hour,
			want: operations.Progress{Completed: true, NCompleted: size, NTotal: size, OperationUnits: "Bytes", Description: "completed", Started: t0, Updated: t0.Add(10 * time.Second)},
		},
		{
			name: "failing mover fails at the end", opts: adaptertest.DataMoverOptions{FailWith: "disk full"}, elapsed: time.Hour,
			want: operations.Progress{Completed: true, Err: "disk full", NCompleted: size, NTotal: size, OperationUnits: "Bytes", Description: "failed", Started: t0, Updated: t0.Add(10 * time.Second)},
		},
		{
			name: "failing mover runs like the others before", opts: adaptertest.DataMoverOptions{FailWith: "disk full"}, elapsed: 5 * time.Second,
			want: operations.Progress{NCompleted: 500, NTotal: size, OperationUnits: "Bytes", Description: "moving data", Started: t0, Updated: t0.Add(5 * time.Second)},
		},
		{
			name: "cancelled halfway stops there", cancel: 5 * time.Second, elapsed: time.Hour,
			want: operations.Progress{Completed: true, Err: "cancelled", NCompleted: 500, NTotal: size, OperationUnits: "Bytes", Description: "cancelled", Started: t0, Updated: t0.Add(5 * time.Second)},
		},
		{
			name: "cancel after the end changes nothing", cancel: 11 * time.Second, elapsed: time.Hour,
			want: operations.Progress{Completed: true, NCompleted: size, NTotal: size, OperationUnits: "Bytes", Description: "completed", Started: t0, Updated: t0.Add(10 * time.Second)},
		},
		{
			name: "units", opts: adaptertest.DataMoverOptions{Units: "Files"}, elapsed: time.Second,
			want: operations.Progress{NCompleted: 100, NTotal: size, OperationUnits: "Files", Description: "moving data", Started: t0, Updated: t0.Add(time.Second)},
		},
	}
	ctx := context.Background()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := clocktest.NewClock(t0)
			o := tc.opts
			o.Size, o.Rate = size, rate
			m := adaptertest.NewDataMover[string, string]("mover", clock, &o)
			require.Equal(t, 10*time.Second, m.Duration())
			id := m.Start()
			if tc.cancel > 0 {
				clock.Advance(tc.cancel)
				require.NoError(t, m.Cancel(ctx, id))
				clock.Advance(tc.elapsed - tc.cancel)
			} else {
				clock.Advance(tc.elapsed)
			}
			got, err := m.Progress(ctx, id)
			require.NoError(t, err)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Progress after %s (-want +got):\n%s", tc.elapsed, diff)
			}
		})
	}
}

func TestDataMoverDefaults(t *testing.T) {
	for name, o := range map[string]*adaptertest.DataMoverOptions{
		"nil options":      nil,
		"zero options":     {},
		"negative options": {Size: -1, Rate: -1},
	} {
		t.Run(name, func(t *testing.T) {
			clock := clocktest.NewClock(t0)
			m := adaptertest.NewDataMover[string, string]("mover", clock, o)
			require.Equal(t, 16*time.Second, m.Duration(), "1 GiB at 64 MiB/s")
			id := m.Start()
			clock.Advance(8 * time.Second)
			p, err := m.Progress(context.Background(), id)
			require.NoError(t, err)
			require.Equal(t, operations.Progress{
				NCompleted: adaptertest.DefaultMoverSize / 2, NTotal: adaptertest.DefaultMoverSize,
				OperationUnits: adaptertest.DefaultMoverUnits, Description: "moving data",
				Started: t0, Updated: t0.Add(8 * time.Second),
			}, p)
		})
	}
}

func TestDataMoverUnknownAndCancelled(t *testing.T) {
	m := adaptertest.NewDataMover[string, string]("mover", clocktest.NewClock(t0), nil)
	ctx := context.Background()
	_, err := m.Progress(ctx, "mover/9")
	require.ErrorIs(t, err, operations.ErrInvalidOperationID)
	require.ErrorIs(t, m.Cancel(ctx, "mover/9"), operations.ErrInvalidOperationID)

	done, cancel := context.WithCancel(ctx)
	cancel()
	id := m.Start()
	_, err = m.Progress(done, id)
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, m.Cancel(done, id), context.Canceled)
	p, err := m.Progress(ctx, id)
	require.NoError(t, err)
	require.False(t, p.Completed, "a Cancel with a done context stopped the operation")
}

func TestDataMoverIDs(t *testing.T) {
	m := adaptertest.NewDataMover[string, string]("example.io/mover", clocktest.NewClock(t0), nil)
	ctx := context.Background()
	item := &unstructured.Unstructured{Object: map[string]interface{}{"metadata": map[string]interface{}{"name": "pv-1"}}}
	_, _, id1, post, err := m.BackupItemAction().Execute(ctx, item, "backup")
	require.NoError(t, err)
	require.Nil(t, post)
	out, err := m.RestoreItemAction().Execute(ctx, adapters.RestoreItemActionInput[string]{Item: item})
	require.NoError(t, err)
	id3, err := m.VolumeSnapshotter().CreateSnapshot(ctx, "vol", "az", nil)
	require.NoError(t, err)
	require.Equal(t, []string{"example.io/mover/1", "example.io/mover/2", "example.io/mover/3"}, []string{id1, out.OperationID, id3})
	require.Same(t, item, out.UpdatedItem)
}

func TestDataMoverViews(t *testing.T) {
	ctx := context.Background()
	clock := clocktest.NewClock(t0)
	sel := adapters.ResourceSelector{IncludedResources: []string{"persistentvolumeclaims"}}
	m := adaptertest.NewDataMover[string, string]("mover", clock, &adaptertest.DataMoverOptions{Selector: sel})

	for name, a := range map[string]interface {
		AppliesTo(context.Context) (adapters.ResourceSelector, error)
	}{"backup": m.BackupItemAction(), "restore": m.RestoreItemAction()} {
		got, err := a.AppliesTo(ctx)
		require.NoError(t, err, name)
		require.Equal(t, sel, got, name)
	}
	ready, err := m.RestoreItemAction().AreAdditionalItemsReady(ctx, nil, "r")
	require.NoError(t, err)
	require.True(t, ready)

	// Views share the mover's operations.
	id := m.Start()
	clock.Advance(m.Duration())
	for name, progress := range map[string]func() (operations.Progress, error){
		"backup":      func() (operations.Progress, error) { return m.BackupItemAction().Progress(ctx, id, "b") },
		"restore":     func() (operations.Progress, error) { return m.RestoreItemAction().Progress(ctx, id, "r") },
		"snapshotter": func() (operations.Progress, error) { return m.VolumeSnapshotter().Progress(ctx, id) },
	} {
		p, err := progress()
		require.NoError(t, err, name)
		require.True(t, p.Completed, name)
	}
}

func TestDataMoverSnapshotter(t *testing.T) {
	ctx := context.Background()
	clock := clocktest.NewClock(t0)
	m := adaptertest.NewDataMover[string, string]("mover", clock, nil)
	s := m.VolumeSnapshotter()
	require.NoError(t, s.Init(ctx, map[string]string{"a": "b"}))

	pv := &unstructured.Unstructured{Object: map[string]interface{}{"metadata": map[string]interface{}{"name": "pv-1"}}}
	volID, err := s.GetVolumeID(ctx, pv)
	require.NoError(t, err)
	require.Equal(t, "pv-1", volID)
	same, err := s.SetVolumeID(ctx, pv, "vol-2")
	require.NoError(t, err)
	require.Same(t, pv, same)
	typ, iops, err := s.GetVolumeInfo(ctx, "vol-2", "az")
	require.NoError(t, err)
	require.Equal(t, "standard", typ)
	require.Nil(t, iops)

	snap, err := s.CreateSnapshot(ctx, "vol-2", "az", nil)
	require.NoError(t, err)
	_, err = s.CreateVolumeFromSnapshot(ctx, snap, "standard", "az", nil)
	require.ErrorContains(t, err, "not ready", "a volume from a snapshot still moving")
	clock.Advance(m.Duration())
	vol, err := s.CreateVolumeFromSnapshot(ctx, snap, "standard", "az", nil)
	require.NoError(t, err)
	require.Equal(t, "vol-"+snap, vol)

	require.NoError(t, s.DeleteSnapshot(ctx, snap))
	_, err = s.Progress(ctx, snap)
	require.ErrorIs(t, err, operations.ErrInvalidOperationID, "a deleted snapshot is forgotten")
	require.ErrorIs(t, s.DeleteSnapshot(ctx, snap), operations.ErrInvalidOperationID)
	_, err = s.CreateVolumeFromSnapshot(ctx, snap, "standard", "az", nil)
	require.ErrorIs(t, err, operations.ErrInvalidOperationID)

	failing := adaptertest.NewDataMover[string, string]("mover", clock, &adaptertest.DataMoverOptions{FailWith: "lost"})
	snap, err = failing.VolumeSnapshotter().CreateSnapshot(ctx, "v", "az", nil)
	require.NoError(t, err)
	clock.Advance(failing.Duration())
	_, err = failing.VolumeSnapshotter().CreateVolumeFromSnapshot(ctx, snap, "standard", "az", nil)
	require.ErrorContains(t, err, "lost", "a volume from a failed snapshot")
}

func TestDataMoverDoneContext(t *testing.T) {
	m := adaptertest.NewDataMover[string, string]("mover", nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, id, _, err := m.BackupItemAction().Execute(ctx, nil, "b")
	require.ErrorIs(t, err, context.Canceled)
	require.Empty(t, id)
	out, err := m.RestoreItemAction().Execute(ctx, adapters.RestoreItemActionInput[string]{})
	require.ErrorIs(t, err, context.Canceled)
	require.Empty(t, out.OperationID)
	_, err = m.VolumeSnapshotter().CreateSnapshot(ctx, "v", "az", nil)
	require.ErrorIs(t, err, context.Canceled)
	_, err = m.BackupItemAction().AppliesTo(ctx)
	require.ErrorIs(t, err, context.Canceled)
	ready, err := m.RestoreItemAction().AreAdditionalItemsReady(ctx, nil, "r")
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, ready)
	require.True(t, errors.Is(m.VolumeSnapshotter().Init(ctx, nil), context.Canceled))
}
