package adapters_test

import (
	"testing"

	"github.com/itemops/itemops/adapters"
	"github.com/itemops/itemops/adapters/adaptertest"
	"github.com/itemops/itemops/clock/clocktest"
)

// newMover returns a data mover on a fake clock and the FinishFunc that moves the clock
// past the end of any operation it started.
func newMover(t *testing.T, o *adaptertest.DataMoverOptions) (*adaptertest.DataMover[*backup, *restore], adaptertest.FinishFunc) {
	clock := clocktest.NewClock(t0)
	m := adaptertest.NewDataMover[*backup, *restore]("example.io/data-mover", clock, o)
	return m, func(string) { clock.Advance(m.Duration()) }
}

// The v2 contract holds for the adapted v1 fakes (which run no operations) and for the
// native data mover, succeeding or failing.
func TestConformanceBackupItemAction(t *testing.T) {
	t.Run("adapted v1", func(t *testing.T) {
		adaptertest.RunBackupItemAction(t, adaptertest.BackupItemActionHarness[*backup]{
			New: func(t *testing.T) (adapters.BackupItemAction[*backup], adaptertest.FinishFunc) {
				return adapters.BackupItemActionFromV1[*backup](v1Name, &adaptertest.BackupItemActionV1[*backup]{}), nil
			},
			Backup: &backup{Name: "nightly"},
		})
	})
	t.Run("data mover", func(t *testing.T) {
		adaptertest.RunBackupItemAction(t, adaptertest.BackupItemActionHarness[*backup]{
			New: func(t *testing.T) (adapters.BackupItemAction[*backup], adaptertest.FinishFunc) {
				m, finish := newMover(t, nil)
				return m.BackupItemAction(), finish
			},
			Backup: &backup{Name: "nightly"},
			Item:   obj("app", "data-0", nil),
		})
	})
	t.Run("failing data mover", func(t *testing.T) {
		adaptertest.RunBackupItemAction(t, adaptertest.BackupItemActionHarness[*backup]{
			New: func(t *testing.T) (adapters.BackupItemAction[*backup], adaptertest.FinishFunc) {
				m, finish := newMover(t, &adaptertest.DataMoverOptions{FailWith: "disk full"})
				return m.BackupItemAction(), finish
			},
		})
	})
}

func TestConformanceRestoreItemAction(t *testing.T) {
	t.Run("adapted v1", func(t *testing.T) {
		adaptertest.RunRestoreItemAction(t, adaptertest.RestoreItemActionHarness[*restore]{
			New: func(t *testing.T) (adapters.RestoreItemAction[*restore], adaptertest.FinishFunc) {
				return adapters.RestoreItemActionFromV1[*restore](v1Name, &adaptertest.RestoreItemActionV1[*restore]{}), nil
			},
			Restore: &restore{Name: "r1"},
		})
	})
	t.Run("data mover", func(t *testing.T) {
		adaptertest.RunRestoreItemAction(t, adaptertest.RestoreItemActionHarness[*restore]{
			New: func(t *testing.T) (adapters.RestoreItemAction[*restore], adaptertest.FinishFunc) {
				m, finish := newMover(t, &adaptertest.DataMoverOptions{Size: 10, Rate: 3, Units: "Files"})
				return m.RestoreItemAction(), finish
			},
			Restore: &restore{Name: "r1"},
		})
	})
}

func TestConformanceVolumeSnapshotter(t *testing.T) {
	t.Run("adapted v1", func(t *testing.T) {
		adaptertest.RunVolumeSnapshotter(t, adaptertest.VolumeSnapshotterHarness{
			New: func(t *testing.T) (adapters.VolumeSnapshotter, adaptertest.FinishFunc) {
				return adapters.VolumeSnapshotterFromV1(v1Name, &adaptertest.VolumeSnapshotterV1{}), nil
			},
			VolumeID: "vol-1", VolumeAZ: "eu-1a",
		})
	})
	t.Run("data mover", func(t *testing.T) {
		adaptertest.RunVolumeSnapshotter(t, adaptertest.VolumeSnapshotterHarness{
			New: func(t *testing.T) (adapters.VolumeSnapshotter, adaptertest.FinishFunc) {
				m, finish := newMover(t, &adaptertest.DataMoverOptions{Rate: 1 << 40})
				return m.VolumeSnapshotter(), finish
			},
			VolumeID: "vol-1", VolumeAZ: "eu-1a",
		})
	})
}
