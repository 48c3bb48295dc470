package main

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

var t0 = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

// claim returns a persistent volume claim requesting storage.
func claim(ns, name, storage string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "PersistentVolumeClaim",
		"spec": map[string]any{"resources": map[string]any{"requests": map[string]any{"storage": storage}}},
	}}
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

func TestJobID(t *testing.T) {
	j := job{verb: "upload", seq: 3, size: 5 << 30, start: t0.Add(123 * time.Millisecond), dur: 2400 * time.Millisecond, fate: fateHang}
	got, ok := parseJob(j.id())
	require.True(t, ok, "parse %q", j.id())
	if diff := cmp.Diff(j, got, cmp.AllowUnexported(job{}), cmp.Comparer(time.Time.Equal)); diff != "" {
		t.Errorf("parseJob(id()) (-want +got):\n%s", diff)
	}

	for _, bad := range []string{
		"", "upload", "operation-1.1.1.1.ok", "upload-x.1.1.1.ok", "upload-1.zz.1.1.ok", "upload-1.0.1.1.ok",
		"upload-1.1.1.0.ok", "upload-1.1.1.1.maybe", "upload-1.1.1.1.ok.extra", "upload-1.-5.1.1.ok",
	} {
		if _, ok := parseJob(bad); ok {
			t.Errorf("parseJob(%q) succeeded, want a refusal", bad)
		}
	}
}

func TestJobProgress(t *testing.T) {
	const size = 1000
	dur := 10 * time.Second
	tests := []struct {
		name    string
		fate    fate
		elapsed time.Duration
		want    operations.Progress
	}{
		{"ok, half way", fateOK, 5 * time.Second, operations.Progress{NCompleted: 500, Description: "uploading", Updated: t0.Add(5 * time.Second)}},
		{"ok, just before the end is not done", fateOK, dur - time.Millisecond, operations.Progress{NCompleted: 999, Description: "uploading", Updated: t0.Add(dur - time.Millisecond)}},
		{"ok, at the end", fateOK, dur, operations.Progress{Completed: true, NCompleted: size, Description: "completed", Updated: t0.Add(dur)}},
		{"ok, long after", fateOK, time.Hour, operations.Progress{Completed: true, NCompleted: size, Description: "completed", Updated: t0.Add(dur)}},
		{"fail, before 60%", fateFail, 5 * time.Second, operations.Progress{NCompleted: 500, Description: "uploading", Updated: t0.Add(5 * time.Second)}},
		{"fail, at 60%", fateFail, time.Hour, operations.Progress{Completed: true, Err: "connection to the object store reset (failure injected by -fail-rate)",
			NCompleted: 600, Description: "failed", Updated: t0.Add(6 * time.Second)}},
		{"hang, stalled at 90%", fateHang, time.Hour, operations.Progress{NCompleted: 900, Description: "stalled", Updated: t0.Add(9 * time.Second)}},
		{"before its start", fateOK, -time.Second, operations.Progress{NCompleted: 0, Description: "uploading", Updated: t0.Add(-time.Second)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j := job{verb: "upload", seq: 1, size: size, start: t0, dur: dur, fate: tc.fate}
			want := tc.want
			want.NTotal, want.OperationUnits, want.Started = size, "Bytes", t0
			if diff := cmp.Diff(want, j.progressAt(t0.Add(tc.elapsed))); diff != "" {
				t.Errorf("progressAt (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMoverCancel(t *testing.T) {
	ctx := context.Background()
	clock := clocktest.NewClock(t0)
	m := newMover(clock, moverConfig{minDuration: 10 * time.Second, maxDuration: 10 * time.Second, failRate: 0})
	id, err := m.start(ctx, "download", "restore-1.1", claim("shop", "data-0", "1Ki"))
	require.NoError(t, err)
	clock.Advance(4 * time.Second)
	require.NoError(t, m.cancel(ctx, id))
	clock.Advance(time.Hour)
	p, err := m.progress(ctx, id)
	require.NoError(t, err)
	want := operations.Progress{Completed: true, Err: "cancelled", Description: "cancelled", NCompleted: 409, NTotal: 1024,
		OperationUnits: "Bytes", Started: t0, Updated: t0.Add(4 * time.Second)}
	if diff := cmp.Diff(want, p); diff != "" {
		t.Errorf("progress after cancel (-want +got):\n%s", diff)
	}

	// An operation that ended is not changed by Cancel.
	done, err := m.start(ctx, "download", "restore-1.1", claim("shop", "data-1", "1Ki"))
	require.NoError(t, err)
	clock.Advance(10 * time.Second)
	before, err := m.progress(ctx, done)
	require.NoError(t, err)
	require.NoError(t, m.cancel(ctx, done))
	after, err := m.progress(ctx, done)
	require.NoError(t, err)
	require.Equal(t, before, after)
	require.True(t, after.Completed)
	require.Empty(t, after.Err)

	require.ErrorIs(t, m.cancel(ctx, "no-such-job"), operations.ErrInvalidOperationID)
	_, err = m.progress(ctx, "no-such-job")
	require.ErrorIs(t, err, operations.ErrInvalidOperationID)
}

func TestMoverStart(t *testing.T) {
	ctx := context.Background()
	m := newMover(clocktest.NewClock(t0), moverConfig{minDuration: time.Second, maxDuration: 3 * time.Second, failRate: 0.5})
	tests := []struct {
		name    string
		item    *unstructured.Unstructured
		wantErr string
	}{
		{"a claim", claim("shop", "data-0", "5Gi"), ""},
		{"no storage request", func() *unstructured.Unstructured {
			u := claim("shop", "x", "1Gi")
			delete(u.Object, "spec")
			return u
		}(), "requests no storage"},
		{"a request that is not a size", claim("shop", "x", "lots"), `storage request "lots" is not a size`},
		{"a request of nothing", claim("shop", "x", "0"), "is not a size"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id, err := m.start(ctx, "upload", "backup-1.1", tc.item)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			j, ok := parseJob(id)
			require.True(t, ok)
			require.Equal(t, int64(5<<30), j.size)
			require.True(t, j.dur >= time.Second && j.dur <= 3*time.Second, "duration %v", j.dur)
			again, err := m.start(ctx, "upload", "backup-1.1", tc.item)
			require.NoError(t, err)
			j2, _ := parseJob(again)
			require.NotEqual(t, id, again, "each start is a new operation")
			require.Equal(t, j.dur, j2.dur, "the same owner and claim always take as long")
			require.Equal(t, j.fate, j2.fate, "and end the same way")
		})
	}
	_, err := m.start(ctx, "upload", "b", nil)
	require.Error(t, err)
	ctxDone, cancel := context.WithCancel(ctx)
	cancel()
	_, err = m.start(ctxDone, "upload", "b", claim("a", "b", "1Gi"))
	require.ErrorIs(t, err, context.Canceled)
}

// The share of failing operations follows -fail-rate, and both ways of failing occur.
func TestMoverFailRate(t *testing.T) {
	ctx := context.Background()
	m := newMover(clocktest.NewClock(t0), moverConfig{minDuration: time.Second, maxDuration: time.Second, failRate: 0.3})
	fates := map[fate]int{}
	const n = 2000
	for i := range n {
		id, err := m.start(ctx, "upload", "backup-1.1", claim("ns", "claim-"+string(rune('a'+i%26))+string(rune('a'+i/26%26))+string(rune('a'+i/676)), "1Gi"))
		require.NoError(t, err)
		j, _ := parseJob(id)
		fates[j.fate]++
	}
	failing := fates[fateFail] + fates[fateHang]
	require.InDelta(t, 0.3, float64(failing)/n, 0.05, "fates %v", fates)
	require.Positive(t, fates[fateFail])
	require.Positive(t, fates[fateHang])
}

func TestMoverConformance(t *testing.T) {
	cfg := moverConfig{minDuration: time.Second, maxDuration: 5 * time.Second}
	t.Run("BackupItemAction", func(t *testing.T) {
		adaptertest.RunBackupItemAction(t, adaptertest.BackupItemActionHarness[*backupObject]{
			New: func(t *testing.T) (adapters.BackupItemAction[*backupObject], adaptertest.FinishFunc) {
				clock := clocktest.NewClock(t0)
				return backupAction{newMover(clock, cfg)}, func(string) { clock.Advance(cfg.maxDuration) }
			},
			Backup: &backupObject{Name: "backup-1.1"},
			Item:   claim("shop", "data-0", "3Gi"),
		})
	})
	t.Run("RestoreItemAction", func(t *testing.T) {
		adaptertest.RunRestoreItemAction(t, adaptertest.RestoreItemActionHarness[*restoreObject]{
			New: func(t *testing.T) (adapters.RestoreItemAction[*restoreObject], adaptertest.FinishFunc) {
				clock := clocktest.NewClock(t0)
				return restoreAction{newMover(clock, cfg)}, func(string) { clock.Advance(cfg.maxDuration) }
			},
			Restore: &restoreObject{Name: "restore-1.1"},
			Item:    claim("shop", "data-0", "3Gi"),
		})
	})
}

// The registry serves the mover for both kinds and the labeler, adapted, for backups;
// the labeler labels namespaced items only.
func TestRegistry(t *testing.T) {
	ctx := context.Background()
	reg, err := newRegistry(newMover(clocktest.NewClock(t0), moverConfig{minDuration: time.Second, maxDuration: time.Second}))
	require.NoError(t, err)

	actions, err := reg.BackupItemActionsFor(ctx, grPVC, claim("shop", "data-0", "1Gi"))
	require.NoError(t, err)
	var names []string
	for _, a := range actions {
		names = append(names, a.Name())
	}
	require.Equal(t, []string{labelerName, moverName}, names)
	labelerAction, err := reg.BackupItemAction(labelerName)
	require.NoError(t, err)
	require.True(t, adapters.IsV1(labelerAction))

	updated, _, id, _, err := labelerAction.Execute(ctx, claim("shop", "data-0", "1Gi"), &backupObject{Name: "backup-1.1"})
	require.NoError(t, err)
	require.Empty(t, id)
	require.Equal(t, "backup-1.1", updated.(*unstructured.Unstructured).GetLabels()["demo.itemops.io/backup"])

	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace"}}
	ns.SetName("shop")
	updated, _, _, _, err = labelerAction.Execute(ctx, ns, &backupObject{Name: "backup-1.1"})
	require.NoError(t, err)
	require.Empty(t, updated.(*unstructured.Unstructured).GetLabels())

	restores, err := reg.RestoreItemActionsFor(ctx, grPVC, claim("shop", "data-0", "1Gi"))
	require.NoError(t, err)
	require.Len(t, restores, 1)
	other, err := reg.RestoreItemActionsFor(ctx, grNamespaces, ns)
	require.NoError(t, err)
	require.Empty(t, other)

	tracker, err := reg.Resolve(moverName)
	require.NoError(t, err)
	_, err = tracker.Progress(ctx, operations.Operation{Owner: operations.Owner{Kind: "Restore", Name: "r"}, ID: "bogus"})
	require.True(t, errors.Is(err, operations.ErrInvalidOperationID), "%v", err)
}
