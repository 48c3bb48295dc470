package kubestore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/kubestore"
)

// A right is one verb on one resource, as a rule of a Role grants it.
type right struct{ resource, verb string }

// claimRights are the rights of the Role that claims on Leases are to use; no store
// operation uses them yet, so TestRoleIsMinimal cannot show that each is needed.
var claimRights = []right{
	{"leases", "get"}, {"leases", "list"}, {"leases", "watch"},
	{"leases", "create"}, {"leases", "update"}, {"leases", "delete"}, {"leases", "deletecollection"},
}

// errLeftBehind is what the probe of the right to delete chunks returns when replaced
// chunks stayed in the namespace.
var errLeftBehind = errors.New("replaced chunks were left behind")

// A probe uses a store, as storeUser, in the empty namespace ns, in a way that needs
// one right of the Role, and returns the first error it meets.
type probe func(t *testing.T, user, admin *rest.Config, ns string) error

// probeOwner is the run that the probes write.
var probeOwner = operations.Owner{Kind: phase.Backup, Name: "probe", UID: "uid-probe"}

// openAnd returns a probe that opens a store with options o, creates the run of
// probeOwner with ops operations, and then calls then, if not nil, with the store.
func openAnd(o *kubestore.Options, ops int, then func(context.Context, *kubestore.Store) error) probe {
	return func(t *testing.T, user, _ *rest.Config, ns string) error {
		ctx := context.Background()
		s, err := kubestore.Open(ctx, user, ns, o)
		if err != nil {
			return err
		}
		if err := s.CreateRunWithOperations(ctx, waitingRun(t, probeOwner), testOps(probeOwner, ops, operations.OperationInProgress)); err != nil {
			return err
		}
		if then == nil {
			return nil
		}
		return then(ctx, s)
	}
}

// TestRoleIsMinimal shows that each right of the Role of kubestore.RBAC is needed: for
// each verb of each rule, a Role without it makes a store operation that works with the
// whole Role fail with the API server's Forbidden, seen through the store's wrapping.
// The one exception is the right to delete chunks, which a commit uses only after its
// commit point and whose failure it leaves unreported: without it, the chunks that
// commits replace stay in the namespace. Every right of the Role must have its probe
// here, or be one of claimRights.
func TestRoleIsMinimal(t *testing.T) {
	spilled := &kubestore.Options{InlineBytes: 512, ChunkBytes: 4 << 10}
	probes := map[right]probe{
		{"itemopsruns", "get"}:    openAnd(nil, 1, nil),
		{"itemopsruns", "list"}:   openAnd(nil, 1, nil),
		{"itemopsruns", "create"}: openAnd(nil, 1, nil),
		{"itemopsruns", "update"}: openAnd(nil, 1, func(ctx context.Context, s *kubestore.Store) error {
			return s.PutOperations(ctx, probeOwner, testOps(probeOwner, 1, operations.OperationCompleted))
		}),
		{"itemopsruns", "delete"}: openAnd(nil, 1, func(ctx context.Context, s *kubestore.Store) error {
			return s.DeleteRun(ctx, probeOwner)
		}),
		{"itemopschunks", "get"}:    openAnd(nil, 1, nil),
		{"itemopschunks", "list"}:   openAnd(nil, 1, nil), // the sweep of Open
		{"itemopschunks", "create"}: openAnd(spilled, 100, nil),
		{"itemopschunks", "delete"}: func(t *testing.T, user, admin *rest.Config, ns string) error {
			err := openAnd(spilled, 100, func(ctx context.Context, s *kubestore.Store) error {
				return s.PutOperations(ctx, probeOwner, testOps(probeOwner, 100, operations.OperationCompleted))
			})(t, user, admin, ns)
			if err != nil {
				return err
			}
			return chunksLeftBehind(context.Background(), admin, ns)
		},
	}
	role := shippedRole(t)
	var rights []right
	for _, rule := range role.Rules {
		for _, res := range rule.Resources {
			for _, verb := range rule.Verbs {
				rights = append(rights, right{res, verb})
			}
		}
	}
	for _, r := range rights {
		if _, ok := probes[r]; !ok && !slices.Contains(claimRights, r) {
			t.Errorf("the Role grants %s on %s, which no probe here shows to be needed", r.verb, r.resource)
		}
	}
	for r := range probes {
		if !slices.Contains(rights, r) {
			t.Errorf("a probe needs %s on %s, which the Role does not grant", r.verb, r.resource)
		}
	}
	for _, r := range claimRights {
		if !slices.Contains(rights, r) {
			t.Errorf("the Role does not grant %s on %s, which claims are to use", r.verb, r.resource)
		}
	}

	admin := config(t)
	for _, r := range rights {
		p, ok := probes[r]
		if !ok {
			continue
		}
		t.Run(r.resource+"/"+r.verb, func(t *testing.T) {
			ns := newNamespace(t, admin)
			grant(t, admin, ns, role)
			if err := p(t, userConfig(t), admin, ns); err != nil {
				t.Fatalf("with the whole Role: %v", err)
			}

			ns = newNamespace(t, admin)
			grant(t, admin, ns, without(role, r))
			err := p(t, userConfig(t), admin, ns)
			switch {
			case r == right{"itemopschunks", "delete"}:
				if !errors.Is(err, errLeftBehind) {
					t.Fatalf("without %s on %s: %v, want %v", r.verb, r.resource, err, errLeftBehind)
				}
			case !apierrors.IsForbidden(err):
				t.Fatalf("without %s on %s: %v, want the API server's Forbidden", r.verb, r.resource, err)
			}
		})
	}
}

// without returns a copy of role that does not grant r.
func without(role *rbacv1.Role, r right) *rbacv1.Role {
	out := role.DeepCopy()
	out.Rules = nil
	for _, rule := range role.Rules {
		if slices.Contains(rule.Resources, r.resource) {
			rule = *rule.DeepCopy()
			rule.Verbs = slices.DeleteFunc(rule.Verbs, func(v string) bool { return v == r.verb })
		}
		if len(rule.Verbs) > 0 {
			out.Rules = append(out.Rules, rule)
		}
	}
	return out
}

// chunksLeftBehind returns errLeftBehind when namespace ns holds chunks that no run's
// object names.
func chunksLeftBehind(ctx context.Context, admin *rest.Config, ns string) error {
	dyn, err := dynamic.NewForConfig(admin)
	if err != nil {
		return err
	}
	runs, err := dyn.Resource(runsGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	named := 0
	for _, run := range runs.Items {
		chunks, _, _ := unstructured.NestedSlice(run.Object, "status", "store", "chunks")
		named += len(chunks)
	}
	chunks, err := dyn.Resource(chunksGVR).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: "itemops.io/role=chunk"})
	if err != nil {
		return err
	}
	if len(chunks.Items) != named {
		return fmt.Errorf("%w: %d chunks, of which the runs' objects name %d", errLeftBehind, len(chunks.Items), named)
	}
	return nil
}
