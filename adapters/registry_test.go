package adapters_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/itemops/itemops/adapters"
	"github.com/itemops/itemops/adapters/adaptertest"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

type registry = adapters.Registry[*backup, *restore]

// registration is one step of building a registry.
type registration struct {
	kind, version, name string // kind: "bia", "ria", "vs"; version: "v1", "v2"
}

func (g registration) do(r *registry) error {
	switch g.kind + g.version {
	case "biav1":
		return r.RegisterBackupItemActionV1(g.name, &adaptertest.BackupItemActionV1[*backup]{})
	case "biav2":
		return r.RegisterBackupItemAction(&fakeBackupAction{name: g.name})
	case "riav1":
		return r.RegisterRestoreItemActionV1(g.name, &adaptertest.RestoreItemActionV1[*restore]{})
	case "riav2":
		return r.RegisterRestoreItemAction(&fakeRestoreAction{name: g.name})
	case "vsv1":
		return r.RegisterVolumeSnapshotterV1(g.name, &adaptertest.VolumeSnapshotterV1{})
	case "vsv2":
		return r.RegisterVolumeSnapshotter(adaptertest.NewDataMover[*backup, *restore](g.name, nil, nil).VolumeSnapshotter())
	}
	panic("bad registration " + g.kind + g.version)
}

func TestRegistryRegister(t *testing.T) {
	tests := []struct {
		name    string
		steps   []registration
		wantErr error        // of the last step; the others must succeed
		lookup  registration // kind and name to look up after the steps
		wantV1  bool         // whether an adapted v1 is the plugin in use
	}{
		{name: "v1 backup item action", steps: []registration{{"bia", "v1", "a"}}, lookup: registration{kind: "bia", name: "a"}, wantV1: true},
		{name: "v2 backup item action", steps: []registration{{"bia", "v2", "a"}}, lookup: registration{kind: "bia", name: "a"}},
		{name: "v2 wins over an earlier v1", steps: []registration{{"bia", "v1", "a"}, {"bia", "v2", "a"}}, lookup: registration{kind: "bia", name: "a"}},
		{name: "v2 wins over a later v1", steps: []registration{{"bia", "v2", "a"}, {"bia", "v1", "a"}}, lookup: registration{kind: "bia", name: "a"}},
		{name: "restore: v2 wins over a v1", steps: []registration{{"ria", "v1", "a"}, {"ria", "v2", "a"}}, lookup: registration{kind: "ria", name: "a"}},
		{name: "snapshotter: v2 wins over a v1", steps: []registration{{"vs", "v2", "a"}, {"vs", "v1", "a"}}, lookup: registration{kind: "vs", name: "a"}},
		{name: "snapshotter v1", steps: []registration{{"vs", "v1", "a"}}, lookup: registration{kind: "vs", name: "a"}, wantV1: true},
		{name: "backup and restore actions may share a name", steps: []registration{{"bia", "v1", "a"}, {"ria", "v2", "a"}}, lookup: registration{kind: "bia", name: "a"}, wantV1: true},
		{name: "restore action and snapshotter may share a name", steps: []registration{{"vs", "v2", "a"}, {"ria", "v1", "a"}}, lookup: registration{kind: "ria", name: "a"}, wantV1: true},
		{name: "duplicate v1", steps: []registration{{"bia", "v1", "a"}, {"bia", "v1", "a"}}, wantErr: adapters.ErrDuplicatePlugin},
		{name: "duplicate v2", steps: []registration{{"ria", "v2", "a"}, {"ria", "v2", "a"}}, wantErr: adapters.ErrDuplicatePlugin},
		{name: "duplicate v2 after v1 and v2", steps: []registration{{"vs", "v1", "a"}, {"vs", "v2", "a"}, {"vs", "v2", "a"}}, wantErr: adapters.ErrDuplicatePlugin},
		{name: "snapshotter named as a backup action", steps: []registration{{"bia", "v2", "a"}, {"vs", "v2", "a"}}, wantErr: adapters.ErrDuplicatePlugin},
		{name: "backup action named as a snapshotter", steps: []registration{{"vs", "v1", "a"}, {"bia", "v1", "a"}}, wantErr: adapters.ErrDuplicatePlugin},
		{name: "empty name, v1", steps: []registration{{"bia", "v1", ""}}, wantErr: adapters.ErrInvalidPlugin},
		{name: "empty name, v2", steps: []registration{{"ria", "v2", ""}}, wantErr: adapters.ErrInvalidPlugin},
		{name: "empty name, snapshotter", steps: []registration{{"vs", "v2", ""}}, wantErr: adapters.ErrInvalidPlugin},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := adapters.NewRegistry[*backup, *restore](nil, nil)
			for i, step := range tc.steps {
				err := step.do(r)
				if i == len(tc.steps)-1 && tc.wantErr != nil {
					require.ErrorIs(t, err, tc.wantErr)
					return
				}
				require.NoError(t, err, "step %d", i)
			}
			var (
				got any
				err error
			)
			switch tc.lookup.kind {
			case "bia":
				got, err = r.BackupItemAction(tc.lookup.name)
			case "ria":
				got, err = r.RestoreItemAction(tc.lookup.name)
			case "vs":
				got, err = r.VolumeSnapshotter(tc.lookup.name)
			}
			require.NoError(t, err)
			require.Equal(t, tc.lookup.name, got.(interface{ Name() string }).Name())
			if adapters.IsV1(got) != tc.wantV1 {
				t.Errorf("IsV1(plugin in use) = %v, want %v", adapters.IsV1(got), tc.wantV1)
			}
		})
	}
}

func TestRegistryRegisterNil(t *testing.T) {
	var r registry // the zero Registry is usable
	for name, err := range map[string]error{
		"RegisterBackupItemAction":    r.RegisterBackupItemAction(nil),
		"RegisterBackupItemActionV1":  r.RegisterBackupItemActionV1("a", nil),
		"RegisterRestoreItemAction":   r.RegisterRestoreItemAction(nil),
		"RegisterRestoreItemActionV1": r.RegisterRestoreItemActionV1("a", nil),
		"RegisterVolumeSnapshotter":   r.RegisterVolumeSnapshotter(nil),
		"RegisterVolumeSnapshotterV1": r.RegisterVolumeSnapshotterV1("a", nil),
	} {
		if !errors.Is(err, adapters.ErrInvalidPlugin) {
			t.Errorf("%s(nil) = %v, want an error wrapping ErrInvalidPlugin", name, err)
		}
	}
	_, err := r.Resolve("a")
	require.ErrorIs(t, err, adapters.ErrUnknownPlugin, "a refused registration left a plugin behind")
}

func TestRegistryUnknownNames(t *testing.T) {
	r := adapters.NewRegistry[*backup, *restore](nil, nil)
	require.NoError(t, r.RegisterBackupItemActionV1("backup-only", &adaptertest.BackupItemActionV1[*backup]{}))
	lookups := map[string]func() error{
		"BackupItemAction":          func() error { _, err := r.BackupItemAction("nope"); return err },
		"RestoreItemAction":         func() error { _, err := r.RestoreItemAction("backup-only"); return err },
		"VolumeSnapshotter":         func() error { _, err := r.VolumeSnapshotter("backup-only"); return err },
		"Resolve":                   func() error { _, err := r.Resolve("nope"); return err },
		"Resolve of the empty name": func() error { _, err := r.Resolve(""); return err },
	}
	for name, lookup := range lookups {
		t.Run(name, func(t *testing.T) {
			err := lookup()
			require.ErrorIs(t, err, adapters.ErrUnknownPlugin)
			require.Contains(t, err.Error(), `"`, "the error names the plugin")
		})
	}
}

// names returns the names of plugins.
func names[P interface{ Name() string }](ps []P) []string {
	out := []string{}
	for _, p := range ps {
		out = append(out, p.Name())
	}
	return out
}

func TestRegistryBackupItemActionsFor(t *testing.T) {
	ctx := context.Background()
	r := adapters.NewRegistry[*backup, *restore](nil, nil)
	podsOnly := &adaptertest.BackupItemActionV1[*backup]{Selector: adapters.ResourceSelector{IncludedResources: []string{"pods"}}}
	appNS := &adaptertest.BackupItemActionV1[*backup]{Selector: adapters.ResourceSelector{IncludedNamespaces: []string{"app"}}}
	labelled := &fakeBackupAction{name: "labelled", selector: adapters.ResourceSelector{LabelSelector: "backup=yes"}}
	everything := &fakeBackupAction{name: "everything"}
	require.NoError(t, r.RegisterBackupItemActionV1("pods-only", podsOnly))
	require.NoError(t, r.RegisterBackupItemActionV1("app-ns", appNS))
	require.NoError(t, r.RegisterBackupItemAction(labelled))
	require.NoError(t, r.RegisterBackupItemAction(everything))

	tests := []struct {
		name string
		gr   schema.GroupResource
		item *unstructured.Unstructured
		want []string
	}{
		{name: "pod in app, labelled", gr: pods, item: obj("app", "p", map[string]string{"backup": "yes"}), want: []string{"pods-only", "app-ns", "labelled", "everything"}},
		{name: "pod elsewhere", gr: pods, item: obj("db", "p", nil), want: []string{"pods-only", "everything"}},
		{name: "config map in app", gr: configMaps, item: obj("app", "c", nil), want: []string{"app-ns", "everything"}},
		{name: "cluster-scoped, labelled", gr: deploys, item: obj("", "x", map[string]string{"backup": "yes"}), want: []string{"labelled", "everything"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := r.BackupItemActionsFor(ctx, tc.gr, tc.item)
			require.NoError(t, err)
			if diff := cmp.Diff(tc.want, names(got)); diff != "" {
				t.Errorf("BackupItemActionsFor (-want +got):\n%s", diff)
			}
		})
	}
	// Each selector was asked once, however many items were matched.
	require.Equal(t, 1, podsOnly.Calls("AppliesTo"))
	require.Equal(t, 1, appNS.Calls("AppliesTo"))
	require.Len(t, labelled.recorded(), 1)

	// A native v2 registered under a v1's name takes its place in the order, and its
	// own selector is asked.
	native := &fakeBackupAction{name: "pods-only", selector: adapters.ResourceSelector{IncludedResources: []string{"configmaps"}}}
	require.NoError(t, r.RegisterBackupItemAction(native))
	got, err := r.BackupItemActionsFor(ctx, configMaps, obj("app", "c", nil))
	require.NoError(t, err)
	if diff := cmp.Diff([]string{"pods-only", "app-ns", "everything"}, names(got)); diff != "" {
		t.Errorf("after replacing v1 by v2 (-want +got):\n%s", diff)
	}
	require.Same(t, native, got[0])
	require.Equal(t, 1, podsOnly.Calls("AppliesTo"), "the replaced v1 was asked again")
}

func TestRegistryRestoreItemActionsFor(t *testing.T) {
	ctx := context.Background()
	r := adapters.NewRegistry[*backup, *restore](nil, nil)
	require.NoError(t, r.RegisterRestoreItemAction(&fakeRestoreAction{name: "pvcs", selector: adapters.ResourceSelector{IncludedResources: []string{"persistentvolumeclaims"}}}))
	require.NoError(t, r.RegisterRestoreItemActionV1("not-kube-system", &adaptertest.RestoreItemActionV1[*restore]{Selector: adapters.ResourceSelector{ExcludedNamespaces: []string{"kube-system"}}}))
	got, err := r.RestoreItemActionsFor(ctx, pvcs, obj("app", "data", nil))
	require.NoError(t, err)
	if diff := cmp.Diff([]string{"pvcs", "not-kube-system"}, names(got)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	got, err = r.RestoreItemActionsFor(ctx, pvcs, obj("kube-system", "data", nil))
	require.NoError(t, err)
	if diff := cmp.Diff([]string{"pvcs"}, names(got)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	got, err = r.RestoreItemActionsFor(ctx, pods, obj("kube-system", "p", nil))
	require.NoError(t, err)
	require.Empty(t, got)
}

func TestRegistryActionsForFailures(t *testing.T) {
	errApplies := errors.New("plugin process gone")
	tests := []struct {
		name     string
		selector func() (adapters.ResourceSelector, error)
		ctx      context.Context
		wantErr  error
	}{
		{name: "AppliesTo fails", selector: func() (adapters.ResourceSelector, error) { return adapters.ResourceSelector{}, errApplies }, ctx: context.Background(), wantErr: errApplies},
		{name: "selector does not parse", selector: func() (adapters.ResourceSelector, error) { return adapters.ResourceSelector{LabelSelector: "a b"}, nil }, ctx: context.Background(), wantErr: adapters.ErrInvalidSelector},
		{name: "context cancelled", selector: func() (adapters.ResourceSelector, error) { return adapters.ResourceSelector{}, nil }, ctx: cancelled(), wantErr: context.Canceled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := adapters.NewRegistry[*backup, *restore](nil, nil)
			fine := &adaptertest.BackupItemActionV1[*backup]{}
			failing := &adaptertest.BackupItemActionV1[*backup]{AppliesToFunc: tc.selector}
			require.NoError(t, r.RegisterBackupItemActionV1("fine", fine))
			require.NoError(t, r.RegisterBackupItemActionV1("failing", failing))
			for attempt := 1; attempt <= 2; attempt++ {
				got, err := r.BackupItemActionsFor(tc.ctx, pods, obj("app", "p", nil))
				require.ErrorIs(t, err, tc.wantErr)
				require.Nil(t, got)
				if tc.ctx.Err() == nil {
					require.Contains(t, err.Error(), `"failing"`)
					// Nothing was kept: the failing action is asked again.
					require.Equal(t, attempt, failing.Calls("AppliesTo"))
				}
			}
		})
	}
}

// lookups returns Lookups that record the owners they are asked about and fail for
// owners named "missing".
func lookups() (adapters.Lookup[*backup], adapters.Lookup[*restore], func() []operations.Owner) {
	var (
		mu    sync.Mutex
		asked []operations.Owner
	)
	ask := func(o operations.Owner) error {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, o)
		if o.Name == "missing" {
			return fmt.Errorf("%s: %w", o, operations.ErrNotFound)
		}
		return nil
	}
	backups := func(ctx context.Context, o operations.Owner) (*backup, error) {
		if err := ask(o); err != nil {
			return nil, err
		}
		return &backup{Name: o.Name}, nil
	}
	restores := func(ctx context.Context, o operations.Owner) (*restore, error) {
		if err := ask(o); err != nil {
			return nil, err
		}
		return &restore{Name: o.Name}, nil
	}
	return backups, restores, func() []operations.Owner {
		mu.Lock()
		defer mu.Unlock()
		return append([]operations.Owner(nil), asked...)
	}
}

func TestRegistryResolve(t *testing.T) {
	ctx := context.Background()
	backupOf := func(name string) operations.Owner {
		return operations.Owner{Kind: phase.Backup, Name: name, UID: "u-" + name}
	}
	restoreOf := func(name string) operations.Owner {
		return operations.Owner{Kind: phase.Restore, Name: name, UID: "u-" + name}
	}
	ownOf := func(kind phase.Kind, name string) operations.Owner {
		return operations.Owner{Kind: kind, Name: name, UID: "u-" + name}
	}

	tests := []struct {
		name      string
		action    string
		owner     operations.Owner
		cancel    bool // call Cancel rather than Progress
		wantErr   error
		wantCalls map[string][]call // by plugin
		wantAsked []string          // owners looked up
	}{
		{
			name: "backup operation goes to the backup item action with its backup", action: "shared", owner: backupOf("nightly"),
			wantCalls: map[string][]call{"bia": {{Method: "Progress", ID: "op-1", Object: &backup{Name: "nightly"}}}},
			wantAsked: []string{"Backup/nightly"},
		},
		{
			name: "restore operation goes to the restore item action with its restore", action: "shared", owner: restoreOf("r1"),
			wantCalls: map[string][]call{"ria": {{Method: "Progress", ID: "op-1", Object: &restore{Name: "r1"}}}},
			wantAsked: []string{"Restore/r1"},
		},
		{
			name: "Cancel of a backup operation", action: "shared", owner: backupOf("nightly"), cancel: true,
			wantCalls: map[string][]call{"bia": {{Method: "Cancel", ID: "op-1", Object: &backup{Name: "nightly"}}}},
			wantAsked: []string{"Backup/nightly"},
		},
		{
			name: "Cancel of a restore operation", action: "shared", owner: restoreOf("r1"), cancel: true,
			wantCalls: map[string][]call{"ria": {{Method: "Cancel", ID: "op-1", Object: &restore{Name: "r1"}}}},
			wantAsked: []string{"Restore/r1"},
		},
		{
			name: "snapshot operation goes to the snapshotter, no lookup", action: "snapshots", owner: backupOf("nightly"),
		},
		{
			name: "snapshot Cancel", action: "snapshots", owner: backupOf("nightly"), cancel: true,
		},
		{
			name: "restore operation of a backup-only name", action: "backup-only", owner: restoreOf("r1"),
			wantErr: adapters.ErrUnknownPlugin,
		},
		{
			name: "Cancel of a restore operation of a snapshotter name", action: "snapshots", owner: restoreOf("r1"), cancel: true,
			wantErr: adapters.ErrUnknownPlugin,
		},
		{
			name: "lookup fails", action: "shared", owner: backupOf("missing"),
			wantErr: operations.ErrNotFound, wantAsked: []string{"Backup/missing"},
		},
		{
			name: "lookup fails on Cancel", action: "shared", owner: restoreOf("missing"), cancel: true,
			wantErr: operations.ErrNotFound, wantAsked: []string{"Restore/missing"},
		},
		{
			name: "adapted v1 reports no asynchronous operations", action: "backup-only", owner: backupOf("nightly"),
			wantErr: operations.ErrAsyncOperationsNotSupported, wantAsked: []string{"Backup/nightly"},
		},
		{
			name: "a kind of one's own goes to the only action of its name, a restore's", action: "restore-only", owner: ownOf("Migration", "m1"),
			wantCalls: map[string][]call{"ria-only": {{Method: "Progress", ID: "op-1", Object: &restore{Name: "m1"}}}},
			wantAsked: []string{"Migration/m1"},
		},
		{
			name: "a kind of one's own, by a backup-only name", action: "backup-only", owner: ownOf("DatabaseSnapshot", "nightly"),
			wantErr: operations.ErrAsyncOperationsNotSupported, wantAsked: []string{"DatabaseSnapshot/nightly"},
		},
		{
			name: "a kind of one's own goes to the snapshotter", action: "snapshots", owner: ownOf("DatabaseSnapshot", "nightly"),
		},
		{
			name: "a kind of one's own cannot choose between a backup and a restore action", action: "shared", owner: ownOf("DatabaseSnapshot", "nightly"),
			wantErr: adapters.ErrUnknownPlugin,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			backups, restores, asked := lookups()
			r := adapters.NewRegistry(backups, restores)
			bia := &fakeBackupAction{name: "shared"}
			ria := &fakeRestoreAction{name: "shared"}
			mover := adaptertest.NewDataMover[*backup, *restore]("snapshots", nil, nil)
			require.NoError(t, r.RegisterBackupItemAction(bia))
			require.NoError(t, r.RegisterRestoreItemAction(ria))
			require.NoError(t, r.RegisterVolumeSnapshotter(mover.VolumeSnapshotter()))
			require.NoError(t, r.RegisterBackupItemActionV1("backup-only", &adaptertest.BackupItemActionV1[*backup]{}))
			riaOnly := &fakeRestoreAction{name: "restore-only"}
			require.NoError(t, r.RegisterRestoreItemAction(riaOnly))

			id := "op-1"
			if tc.action == "snapshots" {
				id = mover.Start()
			}
			op := operations.Operation{Owner: tc.owner, Action: tc.action, ID: id}
			tracker, err := r.Resolve(tc.action)
			require.NoError(t, err)
			if tc.cancel {
				err = tracker.Cancel(ctx, op)
			} else {
				var p operations.Progress
				p, err = tracker.Progress(ctx, op)
				if err == nil && tc.action == "snapshots" {
					require.Equal(t, int64(adaptertest.DefaultMoverSize), p.NTotal, "the report is the snapshotter's")
				}
			}
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
			} else {
				require.NoError(t, err)
			}
			got := map[string][]call{}
			if c := bia.recorded(); len(c) > 0 {
				got["bia"] = c
			}
			if c := ria.recorded(); len(c) > 0 {
				got["ria"] = c
			}
			if c := riaOnly.recorded(); len(c) > 0 {
				got["ria-only"] = c
			}
			want := tc.wantCalls
			if want == nil {
				want = map[string][]call{}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("plugin calls (-want +got):\n%s", diff)
			}
			var gotAsked []string
			for _, o := range asked() {
				gotAsked = append(gotAsked, o.String())
			}
			if diff := cmp.Diff(tc.wantAsked, gotAsked); diff != "" {
				t.Errorf("owners looked up (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRegistryResolveWithoutLookups(t *testing.T) {
	var r registry
	bia := &fakeBackupAction{name: "a"}
	require.NoError(t, r.RegisterBackupItemAction(bia))
	tracker, err := r.Resolve("a")
	require.NoError(t, err)
	_, err = tracker.Progress(context.Background(), operations.Operation{Owner: operations.Owner{Kind: phase.Backup, Name: "b"}, ID: "op"})
	require.NoError(t, err)
	if diff := cmp.Diff([]call{{Method: "Progress", ID: "op", Object: (*backup)(nil)}}, bia.recorded()); diff != "" {
		t.Errorf("without a Lookup the zero backup is passed (-want +got):\n%s", diff)
	}
}

func TestRegistryResolveTrackerKeepsItsPlugins(t *testing.T) {
	r := adapters.NewRegistry[*backup, *restore](nil, nil)
	require.NoError(t, r.RegisterBackupItemActionV1("a", &adaptertest.BackupItemActionV1[*backup]{}))
	before, err := r.Resolve("a")
	require.NoError(t, err)
	native := &fakeBackupAction{name: "a"}
	require.NoError(t, r.RegisterBackupItemAction(native))
	after, err := r.Resolve("a")
	require.NoError(t, err)

	op := operations.Operation{Owner: operations.Owner{Kind: phase.Backup, Name: "b"}, ID: "op"}
	_, err = before.Progress(context.Background(), op)
	require.ErrorIs(t, err, operations.ErrAsyncOperationsNotSupported, "a tracker resolved before uses the v1 of then")
	_, err = after.Progress(context.Background(), op)
	require.NoError(t, err)
	require.Len(t, native.recorded(), 1)
}

// TestRegistryConcurrentUse registers, lists and resolves from many goroutines; run it
// under -race.
func TestRegistryConcurrentUse(t *testing.T) {
	ctx := context.Background()
	r := adapters.NewRegistry[*backup, *restore](nil, nil)
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, 4*n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("p%d", i)
			if err := r.RegisterBackupItemActionV1(name, &adaptertest.BackupItemActionV1[*backup]{}); err != nil {
				errs <- err
			}
			if err := r.RegisterBackupItemAction(&fakeBackupAction{name: name}); err != nil {
				errs <- err
			}
			if err := r.RegisterRestoreItemActionV1(name, &adaptertest.RestoreItemActionV1[*restore]{}); err != nil {
				errs <- err
			}
			if _, err := r.BackupItemActionsFor(ctx, pods, obj("app", "p", nil)); err != nil {
				errs <- err
			}
			if _, err := r.Resolve(name); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got, err := r.BackupItemActionsFor(ctx, pods, obj("app", "p", nil))
	require.NoError(t, err)
	require.Len(t, got, n)
	for _, a := range got {
		require.False(t, adapters.IsV1(a), "%s: the native v2 is in use", a.Name())
	}
}
