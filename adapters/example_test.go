package adapters_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/itemops/itemops/adapters"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// Backup stands for a host's own backup object: a Velero fork's *velerov1.Backup, an
// operator's custom resource.
type Backup struct {
	Name          string
	StorageBucket string
}

// podLabeler is a v1 backup item action: it labels the pods it backs up.
type podLabeler struct{}

func (podLabeler) AppliesTo() (adapters.ResourceSelector, error) {
	return adapters.ResourceSelector{IncludedResources: []string{"pods"}}, nil
}

func (podLabeler) Execute(item runtime.Unstructured, b *Backup) (runtime.Unstructured, []operations.ResourceIdentifier, error) {
	u := item.(*unstructured.Unstructured).DeepCopy()
	u.SetLabels(map[string]string{"backed-up-by": b.Name})
	return u, nil, nil
}

// A v1 plugin served to a v2 host: Execute is called through and starts no operation;
// Progress says the plugin has none.
func ExampleBackupItemActionFromV1() {
	ctx := context.Background()
	action := adapters.BackupItemActionFromV1[*Backup]("example.io/pod-labeler", podLabeler{})

	pod := &unstructured.Unstructured{}
	pod.SetNamespace("app")
	pod.SetName("web-0")
	updated, _, operationID, _, err := action.Execute(ctx, pod, &Backup{Name: "nightly"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(action.Name(), updated.(*unstructured.Unstructured).GetLabels())
	fmt.Printf("operation ID: %q\n", operationID)

	_, err = action.Progress(ctx, "any", &Backup{Name: "nightly"})
	fmt.Println(errors.Is(err, operations.ErrAsyncOperationsNotSupported), err)
	fmt.Println(adapters.IsV1(action))
	// Output:
	// example.io/pod-labeler map[backed-up-by:nightly]
	// operation ID: ""
	// true example.io/pod-labeler: operation "any": asynchronous operations not supported
	// true
}

// uploader is a v2 data mover: Execute hands a volume claim's data to an upload service
// and returns at once with the upload's ID; Progress and Cancel ask the service.
type uploader struct {
	service *uploadService
}

func (uploader) Name() string { return "example.io/uploader" }

func (uploader) AppliesTo(context.Context) (adapters.ResourceSelector, error) {
	return adapters.ResourceSelector{IncludedResources: []string{"persistentvolumeclaims"}}, nil
}

func (u uploader) Execute(ctx context.Context, item runtime.Unstructured, b *Backup) (runtime.Unstructured, []operations.ResourceIdentifier, string, []operations.ResourceIdentifier, error) {
	claim := item.(*unstructured.Unstructured)
	id, err := u.service.start(ctx, b.StorageBucket, claim.GetNamespace()+"/"+claim.GetName())
	if err != nil {
		return nil, nil, "", nil, err
	}
	return item, nil, id, nil, nil
}

func (u uploader) Progress(ctx context.Context, id string, _ *Backup) (operations.Progress, error) {
	up, ok := u.service.get(id)
	if !ok {
		return operations.Progress{}, operations.InvalidOperationID(u.Name(), id)
	}
	return operations.Progress{
		Completed:      up.done == up.total || up.err != "",
		Err:            up.err,
		NCompleted:     up.done,
		NTotal:         up.total,
		OperationUnits: "Bytes",
	}, nil
}

func (u uploader) Cancel(ctx context.Context, id string, _ *Backup) error {
	u.service.stop(id) // nothing to do for an upload that has ended
	return nil
}

// uploadService stands for the system doing the uploads (a controller, a cloud API).
type uploadService struct {
	mu      sync.Mutex
	uploads map[string]*upload
}

type upload struct {
	done, total int64
	err         string
}

func (s *uploadService) start(_ context.Context, bucket, claim string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := fmt.Sprintf("upload-%d", len(s.uploads)+1)
	s.uploads[id] = &upload{total: 10 << 30}
	return id, nil
}

func (s *uploadService) get(id string) (upload, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	up, ok := s.uploads[id]
	if !ok {
		return upload{}, false
	}
	return *up, true
}

func (s *uploadService) advance(id string, n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	up := s.uploads[id]
	up.done = min(up.total, up.done+n)
}

func (s *uploadService) stop(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if up, ok := s.uploads[id]; ok && up.done < up.total && up.err == "" {
		up.err = "cancelled"
	}
}

// Writing a v2 data mover: Execute starts the work and returns its operation ID; the
// Monitor later asks Progress, through the Registry, until the operation ends.
func Example_dataMover() {
	ctx := context.Background()
	service := &uploadService{uploads: map[string]*upload{}}
	// The registry reads a backup from the API server when an action needs it.
	getBackup := func(ctx context.Context, o operations.Owner) (*Backup, error) {
		return &Backup{Name: o.Name, StorageBucket: "backups"}, nil
	}
	reg := adapters.NewRegistry[*Backup, struct{}](getBackup, nil)
	if err := reg.RegisterBackupItemAction(uploader{service: service}); err != nil {
		fmt.Println(err)
		return
	}

	// The backup's main run: the actions that apply to a claim, executed.
	claim := &unstructured.Unstructured{}
	claim.SetNamespace("app")
	claim.SetName("data-0")
	gr := schema.GroupResource{Resource: "persistentvolumeclaims"}
	actions, _ := reg.BackupItemActionsFor(ctx, gr, claim)
	var op operations.Operation
	for _, a := range actions {
		_, _, id, _, err := a.Execute(ctx, claim, &Backup{Name: "nightly", StorageBucket: "backups"})
		if err != nil {
			fmt.Println(err)
			return
		}
		op = operations.Operation{Owner: operations.Owner{Kind: phase.Backup, Name: "nightly"}, Action: a.Name(), ID: id}
		fmt.Println("started", op.ID, "by", op.Action)
	}

	// What the Monitor does on each poll.
	tracker, _ := reg.Resolve(op.Action)
	for _, step := range []int64{4 << 30, 6 << 30} {
		service.advance(op.ID, step)
		p, _ := tracker.Progress(ctx, op)
		fmt.Printf("%d of %d %s, completed %v\n", p.NCompleted>>30, p.NTotal>>30, "GiB", p.Completed)
	}
	// Output:
	// started upload-1 by example.io/uploader
	// 4 of 10 GiB, completed false
	// 10 of 10 GiB, completed true
}

// A registry with a v1 and a v2 plugin under one name uses the v2; it lists what applies
// to an item in registration order, and names what it does not know.
func ExampleRegistry() {
	ctx := context.Background()
	reg := adapters.NewRegistry[*Backup, struct{}](nil, nil)
	_ = reg.RegisterBackupItemActionV1("example.io/uploader", podLabeler{}) // an old build of the plugin
	_ = reg.RegisterBackupItemActionV1("example.io/pod-labeler", podLabeler{})
	_ = reg.RegisterBackupItemAction(uploader{})

	a, _ := reg.BackupItemAction("example.io/uploader")
	fmt.Println("uploader is v1:", adapters.IsV1(a))

	for _, gr := range []schema.GroupResource{{Resource: "pods"}, {Resource: "persistentvolumeclaims"}} {
		item := &unstructured.Unstructured{}
		item.SetNamespace("app")
		actions, _ := reg.BackupItemActionsFor(ctx, gr, item)
		var names []string
		for _, a := range actions {
			names = append(names, a.Name())
		}
		fmt.Println(gr.Resource, names)
	}

	_, err := reg.Resolve("example.io/retired")
	fmt.Println(errors.Is(err, adapters.ErrUnknownPlugin), err)
	// Output:
	// uploader is v1: false
	// pods [example.io/pod-labeler]
	// persistentvolumeclaims [example.io/uploader]
	// true plugin "example.io/retired": unknown plugin
}

// Which items a selector takes, by Velero's rules: the Matcher is made once and asked
// of each item.
func ExampleNewMatcher() {
	sel := adapters.ResourceSelector{
		IncludedResources:  []string{"deployments.apps", "persistentvolumeclaims"},
		ExcludedNamespaces: []string{"kube-system"},
		LabelSelector:      "backup.example.io/skip!=true",
	}
	items := []struct {
		gr                   schema.GroupResource
		namespace, skipLabel string
	}{
		{schema.GroupResource{Group: "apps", Resource: "deployments"}, "app", ""},
		{schema.GroupResource{Group: "apps", Resource: "deployments"}, "kube-system", ""},
		{schema.GroupResource{Resource: "persistentvolumeclaims"}, "app", "true"},
		{schema.GroupResource{Resource: "persistentvolumes"}, "", ""},
	}
	m, err := adapters.NewMatcher(sel)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, it := range items {
		u := &unstructured.Unstructured{}
		u.SetNamespace(it.namespace)
		if it.skipLabel != "" {
			u.SetLabels(map[string]string{"backup.example.io/skip": it.skipLabel})
		}
		fmt.Printf("%s in %q: %v\n", it.gr.String(), it.namespace, m.MatchesItem(it.gr, u))
	}
	// Output:
	// deployments.apps in "app": true
	// deployments.apps in "kube-system": false
	// persistentvolumeclaims in "app": false
	// persistentvolumes in "": false
}

// volumeRestorer is a v2 restore item action that restores a pod's claims first and asks
// the host to wait until they are bound.
type volumeRestorer struct {
	mu    sync.Mutex
	asked int
}

func (*volumeRestorer) Name() string { return "example.io/volume-restorer" }

func (*volumeRestorer) AppliesTo(context.Context) (adapters.ResourceSelector, error) {
	return adapters.ResourceSelector{IncludedResources: []string{"pods"}}, nil
}

func (*volumeRestorer) Execute(_ context.Context, in adapters.RestoreItemActionInput[string]) (adapters.RestoreItemActionOutput, error) {
	return adapters.RestoreItemActionOutput{
		UpdatedItem:                 in.Item,
		AdditionalItems:             []operations.ResourceIdentifier{{Resource: "persistentvolumeclaims", Namespace: "app", Name: "data-0"}},
		WaitForAdditionalItems:      true,
		AdditionalItemsReadyTimeout: time.Minute,
	}, nil
}

func (*volumeRestorer) Progress(_ context.Context, id string, _ string) (operations.Progress, error) {
	return operations.Progress{}, operations.AsyncOperationsNotSupported("example.io/volume-restorer", id)
}

func (*volumeRestorer) Cancel(context.Context, string, string) error { return nil }

func (r *volumeRestorer) AreAdditionalItemsReady(_ context.Context, items []operations.ResourceIdentifier, _ string) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked++
	return r.asked >= 2, nil // bound at the second look
}

// Waiting for a restore action's additional items, as Velero's restore does.
func ExampleWaitForAdditionalItems() {
	ctx := context.Background()
	action := &volumeRestorer{}
	pod := &unstructured.Unstructured{}
	out, _ := action.Execute(ctx, adapters.RestoreItemActionInput[string]{Item: pod, Restore: "r1"})
	// ... restore out.AdditionalItems, then:
	if out.WaitForAdditionalItems {
		err := adapters.WaitForAdditionalItems(ctx, action, out.AdditionalItems, "r1", out.AdditionalItemsReadyTimeout,
			adapters.WithPollInterval(10*time.Millisecond))
		fmt.Println("ready:", err == nil, "after", action.asked, "questions")
	}
	// Output:
	// ready: true after 2 questions
}
