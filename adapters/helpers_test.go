package adapters_test

import (
	"context"
	"sync"
	"testing"

	"go.uber.org/goleak"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/itemops/itemops/adapters"
	"github.com/itemops/itemops/operations"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// backup and restore stand for a host's own backup and restore objects.
type backup struct{ Name string }
type restore struct{ Name string }

var (
	pods       = schema.GroupResource{Resource: "pods"}
	configMaps = schema.GroupResource{Resource: "configmaps"}
	pvcs       = schema.GroupResource{Resource: "persistentvolumeclaims"}
	deploys    = schema.GroupResource{Group: "apps", Resource: "deployments"}
)

// obj returns an object in namespace (empty: cluster-scoped) with labels.
func obj(namespace, name string, lbls map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "v1", "kind": "Thing"}}
	u.SetNamespace(namespace)
	u.SetName(name)
	if lbls != nil {
		u.SetLabels(lbls)
	}
	return u
}

// call records one call of a fake v2 plugin.
type call struct {
	Method, ID string
	Object     any // the backup or restore passed, or the items
}

// recorder records calls.
type recorder struct {
	mu    sync.Mutex // guards calls
	calls []call
}

func (r *recorder) record(c call) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, c)
}

func (r *recorder) recorded() []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]call(nil), r.calls...)
}

// fakeBackupAction is a native v2 backup item action that records its calls; Progress
// reports every operation completed.
type fakeBackupAction struct {
	name     string
	selector adapters.ResourceSelector
	recorder
}

func (a *fakeBackupAction) Name() string { return a.name }

func (a *fakeBackupAction) AppliesTo(ctx context.Context) (adapters.ResourceSelector, error) {
	a.record(call{Method: "AppliesTo"})
	return a.selector, ctx.Err()
}

func (a *fakeBackupAction) Execute(ctx context.Context, item runtime.Unstructured, b *backup) (runtime.Unstructured, []operations.ResourceIdentifier, string, []operations.ResourceIdentifier, error) {
	a.record(call{Method: "Execute", Object: b})
	return item, nil, "op-" + b.Name, nil, nil
}

func (a *fakeBackupAction) Progress(ctx context.Context, id string, b *backup) (operations.Progress, error) {
	a.record(call{Method: "Progress", ID: id, Object: b})
	return operations.Progress{Completed: true}, nil
}

func (a *fakeBackupAction) Cancel(ctx context.Context, id string, b *backup) error {
	a.record(call{Method: "Cancel", ID: id, Object: b})
	return nil
}

// fakeRestoreAction is a native v2 restore item action that records its calls.
type fakeRestoreAction struct {
	name     string
	selector adapters.ResourceSelector
	recorder
}

func (a *fakeRestoreAction) Name() string { return a.name }

func (a *fakeRestoreAction) AppliesTo(ctx context.Context) (adapters.ResourceSelector, error) {
	a.record(call{Method: "AppliesTo"})
	return a.selector, ctx.Err()
}

func (a *fakeRestoreAction) Execute(ctx context.Context, in adapters.RestoreItemActionInput[*restore]) (adapters.RestoreItemActionOutput, error) {
	a.record(call{Method: "Execute", Object: in.Restore})
	return adapters.RestoreItemActionOutput{UpdatedItem: in.Item}, nil
}

func (a *fakeRestoreAction) Progress(ctx context.Context, id string, r *restore) (operations.Progress, error) {
	a.record(call{Method: "Progress", ID: id, Object: r})
	return operations.Progress{Completed: true}, nil
}

func (a *fakeRestoreAction) Cancel(ctx context.Context, id string, r *restore) error {
	a.record(call{Method: "Cancel", ID: id, Object: r})
	return nil
}

func (a *fakeRestoreAction) AreAdditionalItemsReady(ctx context.Context, items []operations.ResourceIdentifier, r *restore) (bool, error) {
	a.record(call{Method: "AreAdditionalItemsReady", Object: items})
	return true, nil
}

// cancelled returns a context that is already cancelled.
func cancelled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}
