package adapters_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/itemops/itemops/adapters"
	"github.com/itemops/itemops/adapters/adaptertest"
	"github.com/itemops/itemops/operations"
)

const v1Name = "example.io/v1-action"

// counted is a v1 fake that counts its calls.
type counted interface{ Calls(method string) int }

// adapterCase is one call of an adapted v1 plugin.
type adapterCase[P any, V counted] struct {
	name      string
	v1        func() V                                    // the v1 plugin, fresh for each run
	call      func(ctx context.Context, p P) (any, error) // the v2 call and its results
	want      any                                         // the results when ctx is live
	wantErr   error                                       // nil: no error
	wantCalls map[string]int                              // the v1 calls it makes when ctx is live
}

// runAdapterCases runs each case three ways: with a live context (the results and v1
// calls are as the case says), with a cancelled one (context.Canceled and no v1 call),
// and on an adapter of a nil v1 (ErrInvalidPlugin).
func runAdapterCases[P any, V counted](t *testing.T, adapt func(V) P, adaptNil P, methods []string, cases []adapterCase[P, V]) {
	t.Helper()
	calls := func(v V) map[string]int {
		got := map[string]int{}
		for _, m := range methods {
			if n := v.Calls(m); n > 0 {
				got[m] = n
			}
		}
		return got
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := tc.v1()
			got, err := tc.call(context.Background(), adapt(v))
			if tc.wantErr == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("results (-want +got):\n%s", diff)
			}
			want := tc.wantCalls
			if want == nil {
				want = map[string]int{}
			}
			if diff := cmp.Diff(want, calls(v)); diff != "" {
				t.Errorf("v1 calls (-want +got):\n%s", diff)
			}
		})
		t.Run(tc.name+"/cancelled context", func(t *testing.T) {
			v := tc.v1()
			_, err := tc.call(cancelled(), adapt(v))
			require.ErrorIs(t, err, context.Canceled)
			if diff := cmp.Diff(map[string]int{}, calls(v)); diff != "" {
				t.Errorf("v1 called with a cancelled context (-want +got):\n%s", diff)
			}
		})
		t.Run(tc.name+"/nil v1", func(t *testing.T) {
			_, err := tc.call(context.Background(), adaptNil)
			require.ErrorIs(t, err, adapters.ErrInvalidPlugin)
		})
	}
}

// executed is what a v2 backup item action's Execute returns, but the error.
type executed struct {
	Updated            runtime.Unstructured
	Additional         []operations.ResourceIdentifier
	OperationID        string
	PostOperationItems []operations.ResourceIdentifier
}

func TestBackupItemActionFromV1(t *testing.T) {
	errV1 := errors.New("v1 failed")
	in := obj("app", "web-0", nil)
	out := obj("app", "web-0", map[string]string{"labelled": "by-v1"})
	extra := []operations.ResourceIdentifier{{Resource: "secrets", Namespace: "app", Name: "tls"}}
	b := &backup{Name: "nightly"}
	sel := adapters.ResourceSelector{IncludedResources: []string{"pods"}, LabelSelector: "app"}
	// execute answers when given in and b, and fails otherwise.
	execute := func(updated runtime.Unstructured, additional []operations.ResourceIdentifier, err error) func(runtime.Unstructured, *backup) (runtime.Unstructured, []operations.ResourceIdentifier, error) {
		return func(item runtime.Unstructured, got *backup) (runtime.Unstructured, []operations.ResourceIdentifier, error) {
			if item != in || got != b {
				return nil, nil, fmt.Errorf("v1 Execute got item %v and backup %v", item, got)
			}
			return updated, additional, err
		}
	}
	type A = adapters.BackupItemAction[*backup]
	type V = *adaptertest.BackupItemActionV1[*backup]
	cases := []adapterCase[A, V]{
		{
			name:      "AppliesTo returns the v1 selector",
			v1:        func() V { return &adaptertest.BackupItemActionV1[*backup]{Selector: sel} },
			call:      func(ctx context.Context, a A) (any, error) { return a.AppliesTo(ctx) },
			want:      sel,
			wantCalls: map[string]int{"AppliesTo": 1},
		},
		{
			name: "AppliesTo returns the v1 error",
			v1: func() V {
				return &adaptertest.BackupItemActionV1[*backup]{AppliesToFunc: func() (adapters.ResourceSelector, error) {
					return adapters.ResourceSelector{}, errV1
				}}
			},
			call:      func(ctx context.Context, a A) (any, error) { return a.AppliesTo(ctx) },
			want:      adapters.ResourceSelector{},
			wantErr:   errV1,
			wantCalls: map[string]int{"AppliesTo": 1},
		},
		{
			name: "Execute passes item and backup through, with no operation",
			v1:   func() V { return &adaptertest.BackupItemActionV1[*backup]{ExecuteFunc: execute(out, extra, nil)} },
			call: func(ctx context.Context, a A) (any, error) {
				u, add, id, post, err := a.Execute(ctx, in, b)
				return executed{Updated: u, Additional: add, OperationID: id, PostOperationItems: post}, err
			},
			want:      executed{Updated: out, Additional: extra},
			wantCalls: map[string]int{"Execute": 1},
		},
		{
			name: "Execute returns the v1 error and results",
			v1:   func() V { return &adaptertest.BackupItemActionV1[*backup]{ExecuteFunc: execute(in, nil, errV1)} },
			call: func(ctx context.Context, a A) (any, error) {
				u, add, id, post, err := a.Execute(ctx, in, b)
				return executed{Updated: u, Additional: add, OperationID: id, PostOperationItems: post}, err
			},
			want:      executed{Updated: in},
			wantErr:   errV1,
			wantCalls: map[string]int{"Execute": 1},
		},
		{
			name:    "Progress reports asynchronous operations not supported",
			v1:      func() V { return &adaptertest.BackupItemActionV1[*backup]{} },
			call:    func(ctx context.Context, a A) (any, error) { return a.Progress(ctx, "op-1", b) },
			want:    operations.Progress{},
			wantErr: operations.ErrAsyncOperationsNotSupported,
		},
		{
			name: "Cancel does nothing",
			v1:   func() V { return &adaptertest.BackupItemActionV1[*backup]{} },
			call: func(ctx context.Context, a A) (any, error) { return nil, a.Cancel(ctx, "op-1", b) },
		},
	}
	runAdapterCases(t,
		func(v V) A { return adapters.BackupItemActionFromV1[*backup](v1Name, v) },
		adapters.BackupItemActionFromV1[*backup](v1Name, nil),
		[]string{"AppliesTo", "Execute"}, cases)
}

func TestRestoreItemActionFromV1(t *testing.T) {
	errV1 := errors.New("v1 failed")
	r := &restore{Name: "r1"}
	input := adapters.RestoreItemActionInput[*restore]{Item: obj("app", "web-0", nil), ItemFromBackup: obj("app", "web-0", map[string]string{"orig": "yes"}), Restore: r}
	v1Out := adapters.RestoreItemActionOutputV1{
		UpdatedItem:     obj("app", "web-0", map[string]string{"labelled": "by-v1"}),
		AdditionalItems: []operations.ResourceIdentifier{{Resource: "persistentvolumeclaims", Namespace: "app", Name: "data"}},
		SkipRestore:     true,
	}
	execute := func(out adapters.RestoreItemActionOutputV1, err error) func(adapters.RestoreItemActionInput[*restore]) (adapters.RestoreItemActionOutputV1, error) {
		return func(in adapters.RestoreItemActionInput[*restore]) (adapters.RestoreItemActionOutputV1, error) {
			if in.Item != input.Item || in.ItemFromBackup != input.ItemFromBackup || in.Restore != r {
				return adapters.RestoreItemActionOutputV1{}, fmt.Errorf("v1 Execute got input %+v", in)
			}
			return out, err
		}
	}
	sel := adapters.ResourceSelector{IncludedNamespaces: []string{"app"}}
	type A = adapters.RestoreItemAction[*restore]
	type V = *adaptertest.RestoreItemActionV1[*restore]
	cases := []adapterCase[A, V]{
		{
			name:      "AppliesTo returns the v1 selector",
			v1:        func() V { return &adaptertest.RestoreItemActionV1[*restore]{Selector: sel} },
			call:      func(ctx context.Context, a A) (any, error) { return a.AppliesTo(ctx) },
			want:      sel,
			wantCalls: map[string]int{"AppliesTo": 1},
		},
		{
			name: "AppliesTo returns the v1 error",
			v1: func() V {
				return &adaptertest.RestoreItemActionV1[*restore]{AppliesToFunc: func() (adapters.ResourceSelector, error) {
					return adapters.ResourceSelector{}, errV1
				}}
			},
			call:      func(ctx context.Context, a A) (any, error) { return a.AppliesTo(ctx) },
			want:      adapters.ResourceSelector{},
			wantErr:   errV1,
			wantCalls: map[string]int{"AppliesTo": 1},
		},
		{
			name: "Execute carries the v1 output, with no operation and no wait",
			v1:   func() V { return &adaptertest.RestoreItemActionV1[*restore]{ExecuteFunc: execute(v1Out, nil)} },
			call: func(ctx context.Context, a A) (any, error) { return a.Execute(ctx, input) },
			want: adapters.RestoreItemActionOutput{
				UpdatedItem:     v1Out.UpdatedItem,
				AdditionalItems: v1Out.AdditionalItems,
				SkipRestore:     true,
			},
			wantCalls: map[string]int{"Execute": 1},
		},
		{
			name: "Execute returns the v1 error and output",
			v1: func() V {
				return &adaptertest.RestoreItemActionV1[*restore]{ExecuteFunc: execute(adapters.RestoreItemActionOutputV1{UpdatedItem: input.Item}, errV1)}
			},
			call:      func(ctx context.Context, a A) (any, error) { return a.Execute(ctx, input) },
			want:      adapters.RestoreItemActionOutput{UpdatedItem: input.Item},
			wantErr:   errV1,
			wantCalls: map[string]int{"Execute": 1},
		},
		{
			name:    "Progress reports asynchronous operations not supported",
			v1:      func() V { return &adaptertest.RestoreItemActionV1[*restore]{} },
			call:    func(ctx context.Context, a A) (any, error) { return a.Progress(ctx, "op-1", r) },
			want:    operations.Progress{},
			wantErr: operations.ErrAsyncOperationsNotSupported,
		},
		{
			name: "Cancel does nothing",
			v1:   func() V { return &adaptertest.RestoreItemActionV1[*restore]{} },
			call: func(ctx context.Context, a A) (any, error) { return nil, a.Cancel(ctx, "op-1", r) },
		},
		{
			name: "AreAdditionalItemsReady is always true",
			v1:   func() V { return &adaptertest.RestoreItemActionV1[*restore]{} },
			call: func(ctx context.Context, a A) (any, error) {
				return a.AreAdditionalItemsReady(ctx, v1Out.AdditionalItems, r)
			},
			want: true,
		},
	}
	runAdapterCases(t,
		func(v V) A { return adapters.RestoreItemActionFromV1[*restore](v1Name, v) },
		adapters.RestoreItemActionFromV1[*restore](v1Name, nil),
		[]string{"AppliesTo", "Execute"}, cases)
}

// volumeInfo is what GetVolumeInfo returns, but the error.
type volumeInfo struct {
	Type string
	IOPS *int64
}

func TestVolumeSnapshotterFromV1(t *testing.T) {
	errV1 := errors.New("v1 failed")
	iops := int64(3000)
	pv := obj("", "pv-1", nil)
	renamed := obj("", "pv-1", map[string]string{"volume": "vol-9"})
	type S = adapters.VolumeSnapshotter
	type V = *adaptertest.VolumeSnapshotterV1
	// fake returns a v1 snapshotter whose methods fail unless given the arguments below.
	fake := func() V {
		return &adaptertest.VolumeSnapshotterV1{
			InitFunc: func(config map[string]string) error {
				if config["region"] != "eu-1" {
					return fmt.Errorf("config %v", config)
				}
				return nil
			},
			CreateVolumeFromSnapshotFunc: func(snapshotID, volumeType, volumeAZ string, got *int64) (string, error) {
				if snapshotID != "snap-1" || volumeType != "gp3" || volumeAZ != "eu-1a" || got != &iops {
					return "", fmt.Errorf("args %q %q %q %v", snapshotID, volumeType, volumeAZ, got)
				}
				return "vol-9", nil
			},
			GetVolumeIDFunc: func(got runtime.Unstructured) (string, error) {
				if got != pv {
					return "", errors.New("other pv")
				}
				return "vol-1", nil
			},
			SetVolumeIDFunc: func(got runtime.Unstructured, volumeID string) (runtime.Unstructured, error) {
				if got != pv || volumeID != "vol-9" {
					return nil, errors.New("other args")
				}
				return renamed, nil
			},
			GetVolumeInfoFunc: func(volumeID, volumeAZ string) (string, *int64, error) {
				if volumeID != "vol-1" || volumeAZ != "eu-1a" {
					return "", nil, errors.New("other args")
				}
				return "gp3", &iops, nil
			},
			CreateSnapshotFunc: func(volumeID, volumeAZ string, tags map[string]string) (string, error) {
				if volumeID != "vol-1" || volumeAZ != "eu-1a" || tags["backup"] != "nightly" {
					return "", errors.New("other args")
				}
				return "snap-1", nil
			},
			DeleteSnapshotFunc: func(snapshotID string) error {
				if snapshotID != "snap-1" {
					return errV1
				}
				return nil
			},
		}
	}
	cases := []adapterCase[S, V]{
		{
			name: "Init passes the config",
			v1:   fake,
			call: func(ctx context.Context, s S) (any, error) {
				return nil, s.Init(ctx, map[string]string{"region": "eu-1"})
			},
			wantCalls: map[string]int{"Init": 1},
		},
		{
			name: "Init returns the v1 error",
			v1: func() V {
				return &adaptertest.VolumeSnapshotterV1{InitFunc: func(map[string]string) error { return errV1 }}
			},
			call:      func(ctx context.Context, s S) (any, error) { return nil, s.Init(ctx, nil) },
			wantErr:   errV1,
			wantCalls: map[string]int{"Init": 1},
		},
		{
			name: "CreateVolumeFromSnapshot delegates",
			v1:   fake,
			call: func(ctx context.Context, s S) (any, error) {
				return s.CreateVolumeFromSnapshot(ctx, "snap-1", "gp3", "eu-1a", &iops)
			},
			want:      "vol-9",
			wantCalls: map[string]int{"CreateVolumeFromSnapshot": 1},
		},
		{
			name:      "GetVolumeID delegates",
			v1:        fake,
			call:      func(ctx context.Context, s S) (any, error) { return s.GetVolumeID(ctx, pv) },
			want:      "vol-1",
			wantCalls: map[string]int{"GetVolumeID": 1},
		},
		{
			name:      "SetVolumeID delegates",
			v1:        fake,
			call:      func(ctx context.Context, s S) (any, error) { return s.SetVolumeID(ctx, pv, "vol-9") },
			want:      runtime.Unstructured(renamed),
			wantCalls: map[string]int{"SetVolumeID": 1},
		},
		{
			name: "GetVolumeInfo delegates",
			v1:   fake,
			call: func(ctx context.Context, s S) (any, error) {
				typ, got, err := s.GetVolumeInfo(ctx, "vol-1", "eu-1a")
				return volumeInfo{typ, got}, err
			},
			want:      volumeInfo{"gp3", &iops},
			wantCalls: map[string]int{"GetVolumeInfo": 1},
		},
		{
			name: "CreateSnapshot delegates",
			v1:   fake,
			call: func(ctx context.Context, s S) (any, error) {
				return s.CreateSnapshot(ctx, "vol-1", "eu-1a", map[string]string{"backup": "nightly"})
			},
			want:      "snap-1",
			wantCalls: map[string]int{"CreateSnapshot": 1},
		},
		{
			name:      "DeleteSnapshot delegates",
			v1:        fake,
			call:      func(ctx context.Context, s S) (any, error) { return nil, s.DeleteSnapshot(ctx, "snap-1") },
			wantCalls: map[string]int{"DeleteSnapshot": 1},
		},
		{
			name:      "DeleteSnapshot returns the v1 error",
			v1:        fake,
			call:      func(ctx context.Context, s S) (any, error) { return nil, s.DeleteSnapshot(ctx, "snap-2") },
			wantErr:   errV1,
			wantCalls: map[string]int{"DeleteSnapshot": 1},
		},
		{
			name:    "Progress reports asynchronous operations not supported",
			v1:      fake,
			call:    func(ctx context.Context, s S) (any, error) { return s.Progress(ctx, "snap-1") },
			want:    operations.Progress{},
			wantErr: operations.ErrAsyncOperationsNotSupported,
		},
		{
			name: "Cancel does nothing",
			v1:   fake,
			call: func(ctx context.Context, s S) (any, error) { return nil, s.Cancel(ctx, "snap-1") },
		},
	}
	runAdapterCases(t,
		func(v V) S { return adapters.VolumeSnapshotterFromV1(v1Name, v) },
		adapters.VolumeSnapshotterFromV1(v1Name, nil),
		[]string{"Init", "CreateVolumeFromSnapshot", "GetVolumeID", "SetVolumeID", "GetVolumeInfo", "CreateSnapshot", "DeleteSnapshot"},
		cases)
}

func TestFromV1NameAndIsV1(t *testing.T) {
	mover := adaptertest.NewDataMover[*backup, *restore]("example.io/mover", nil, nil)
	tests := []struct {
		name     string
		plugin   interface{ Name() string }
		wantName string
		wantV1   bool
	}{
		{name: "adapted backup item action", plugin: adapters.BackupItemActionFromV1[*backup]("a/b", &adaptertest.BackupItemActionV1[*backup]{}), wantName: "a/b", wantV1: true},
		{name: "adapted restore item action", plugin: adapters.RestoreItemActionFromV1[*restore]("a/r", &adaptertest.RestoreItemActionV1[*restore]{}), wantName: "a/r", wantV1: true},
		{name: "adapted volume snapshotter", plugin: adapters.VolumeSnapshotterFromV1("a/s", &adaptertest.VolumeSnapshotterV1{}), wantName: "a/s", wantV1: true},
		{name: "adapted nil keeps its name", plugin: adapters.VolumeSnapshotterFromV1("a/nil", nil), wantName: "a/nil", wantV1: true},
		{name: "native backup item action", plugin: mover.BackupItemAction(), wantName: "example.io/mover"},
		{name: "native restore item action", plugin: mover.RestoreItemAction(), wantName: "example.io/mover"},
		{name: "native volume snapshotter", plugin: mover.VolumeSnapshotter(), wantName: "example.io/mover"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.plugin.Name(); got != tc.wantName {
				t.Errorf("Name() = %q, want %q", got, tc.wantName)
			}
			if got := adapters.IsV1(tc.plugin); got != tc.wantV1 {
				t.Errorf("IsV1 = %v, want %v", got, tc.wantV1)
			}
		})
	}
	require.False(t, adapters.IsV1(nil))
}

func TestFromV1ProgressErrorNamesPluginAndOperation(t *testing.T) {
	progress := map[string]func() (operations.Progress, error){
		"backup item action": func() (operations.Progress, error) {
			return adapters.BackupItemActionFromV1[*backup](v1Name, &adaptertest.BackupItemActionV1[*backup]{}).Progress(context.Background(), "op-7", nil)
		},
		"restore item action": func() (operations.Progress, error) {
			return adapters.RestoreItemActionFromV1[*restore](v1Name, &adaptertest.RestoreItemActionV1[*restore]{}).Progress(context.Background(), "op-7", nil)
		},
		"volume snapshotter": func() (operations.Progress, error) {
			return adapters.VolumeSnapshotterFromV1(v1Name, &adaptertest.VolumeSnapshotterV1{}).Progress(context.Background(), "op-7")
		},
	}
	for name, call := range progress {
		t.Run(name, func(t *testing.T) {
			_, err := call()
			var opErr *operations.OperationError
			require.ErrorAs(t, err, &opErr)
			want := operations.OperationError{Action: v1Name, OperationID: "op-7", Err: operations.ErrAsyncOperationsNotSupported}
			if diff := cmp.Diff(want, *opErr, cmp.Comparer(func(a, b error) bool { return a == b })); diff != "" {
				t.Errorf("Progress error (-want +got):\n%s", diff)
			}
		})
	}
}

// A deadline that passes is honoured like a cancellation.
func TestFromV1DeadlineExceeded(t *testing.T) {
	ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel()
	v1 := &adaptertest.BackupItemActionV1[*backup]{}
	_, _, _, _, err := adapters.BackupItemActionFromV1[*backup](v1Name, v1).Execute(ctx, obj("a", "b", nil), nil)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Zero(t, v1.Calls("Execute"))
}
