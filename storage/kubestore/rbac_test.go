package kubestore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/kubestore"
)

// A right is one verb on one resource, as a rule of a Role grants it.
type right struct{ resource, verb string }

// errLeftBehind is what the probe of the right to delete chunks returns when replaced
// chunks stayed in the namespace.
var errLeftBehind = errors.New("replaced chunks were left behind")

// errKeptAll is what the probes of the rights to list and watch Leases return when a
// claim session that should have handed a run over to a replica that joined kept all
// its runs.
var errKeptAll = errors.New("the claim session handed no run over to the replica that joined")

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
// The rights to list and to watch Leases fail no call but the end of a claim session's
// pass, which returns the Forbidden. The exception is the right to delete chunks, whose
// use no call reports (see the package documentation, "Rights"): its probe shows the
// effect of its loss instead, the chunks that commits replace staying in the namespace
// (errLeftBehind). Every right of the Role must have its probe here.
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
		// A claim creates the store's session Lease and the claim's.
		{"leases", "create"}: claimsProbe(func(ctx context.Context, s, _ *kubestore.Store, _ coordclient.LeaseInterface) error {
			return claimOK(ctx, s, probeOwner)
		}),
		// A claim of a run another replica holds reads the claim's Lease.
		{"leases", "get"}: claimsProbe(func(ctx context.Context, s, other *kubestore.Store, _ coordclient.LeaseInterface) error {
			if err := claimOK(ctx, other, probeOwner); err != nil {
				return fmt.Errorf("the other replica: %w", err)
			}
			_, ok, err := s.ClaimRun(ctx, probeOwner)
			if ok {
				return errors.New("the claim of a run another replica holds was made")
			}
			return err
		}),
		// A first claim renews the session Lease it creates at once; a claim of a run
		// whose holder is dead rewrites the claim's Lease. A session that could not be
		// renewed leaves no Lease.
		{"leases", "update"}: claimsProbe(func(ctx context.Context, s, _ *kubestore.Store, leases coordclient.LeaseInterface) error {
			err := claimOK(ctx, s, probeOwner)
			if err != nil {
				if left := sessionLeft(ctx, leases, userIdentity); left != nil {
					return left
				}
			}
			return err
		}),
		// Close deletes the claims of the store's session at once, then its Lease.
		{"leases", "delete"}:           claimsProbe(closeHolding),
		{"leases", "deletecollection"}: claimsProbe(closeHolding),
		// The end of a pass counts the members of the claim sessions (a LIST of the
		// Leases), and hands over the runs beyond the session's share; without the
		// LIST, EndPass reports it.
		{"leases", "list"}: claimsProbe(func(ctx context.Context, s, other *kubestore.Store, leases coordclient.LeaseInterface) error {
			session, err := keepTwo(ctx, s)
			if err != nil {
				return err
			}
			defer session.End()
			defer other.KeepClaims(ctx, time.Minute, nil).End()
			if err := session.EndPass(2); err != nil {
				return err
			}
			return handedOver(ctx, leases, 0)
		}),
		// A session watches the members, and hands over at once when one joins; without
		// the watch, EndPass reports the refused watch (at the latest at the end of the
		// pass after the one that started it).
		{"leases", "watch"}: claimsProbe(func(ctx context.Context, s, other *kubestore.Store, leases coordclient.LeaseInterface) error {
			session, err := keepTwo(ctx, s)
			if err != nil {
				return err
			}
			defer session.End()
			if err := session.EndPass(2); err != nil { // alone, its share is both runs
				return err
			}
			if err := handedOver(ctx, leases, 0); !errors.Is(err, errKeptAll) {
				return fmt.Errorf("alone, the session handed a run over: %v", err)
			}
			defer other.KeepClaims(ctx, time.Minute, nil).End()
			err = handedOver(ctx, leases, 30*time.Second)
			if errors.Is(err, errKeptAll) {
				if err := claimTwo(ctx, session); err != nil {
					return err
				}
				if err := session.EndPass(2); err != nil {
					return err
				}
				return fmt.Errorf("%w, and the end of the next pass reported nothing", err)
			}
			return err
		}),
	}
	// effects are the errors of the probes of the rights whose loss no call reports.
	effects := map[right]error{
		{"itemopschunks", "delete"}: errLeftBehind,
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
		if _, ok := probes[r]; !ok {
			t.Errorf("the Role grants %s on %s, which no probe here shows to be needed", r.verb, r.resource)
		}
	}
	for r := range probes {
		if !slices.Contains(rights, r) {
			t.Errorf("a probe needs %s on %s, which the Role does not grant", r.verb, r.resource)
		}
	}

	admin := config(t)
	for _, r := range rights {
		p, ok := probes[r]
		if !ok {
			continue
		}
		want, effect := effects[r]
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
			case effect:
				if !errors.Is(err, want) {
					t.Fatalf("without %s on %s: %v, want %v", r.verb, r.resource, err, want)
				}
			case !apierrors.IsForbidden(err):
				t.Fatalf("without %s on %s: %v, want the API server's Forbidden", r.verb, r.resource, err)
			}
			t.Logf("without %s on %s: %v", r.verb, r.resource, err)
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

// The Identities of the stores of claimsProbe.
const (
	userIdentity  = "probe-user"
	otherIdentity = "probe-other"
)

// claimsProbe returns a probe that opens a store as the user, and the store of another
// replica as the administrator (whose rights are not in question), in the namespace,
// and calls fn with them and the administrator's client of the namespace's Leases.
// Both stores are closed when the test ends.
func claimsProbe(fn func(ctx context.Context, s, other *kubestore.Store, leases coordclient.LeaseInterface) error) probe {
	return func(t *testing.T, user, admin *rest.Config, ns string) error {
		ctx := context.Background()
		s, err := kubestore.Open(ctx, user, ns, &kubestore.Options{Identity: userIdentity})
		if err != nil {
			return err
		}
		t.Cleanup(func() { s.Close() })
		other, err := kubestore.Open(ctx, admin, ns, &kubestore.Options{Identity: otherIdentity})
		if err != nil {
			t.Fatalf("Open as the administrator: %v", err)
		}
		t.Cleanup(func() { other.Close() })
		return fn(ctx, s, other, leaseClient(t, admin, ns))
	}
}

// claimOK claims the run of o with s, and fails unless the claim is made.
func claimOK(ctx context.Context, s *kubestore.Store, o operations.Owner) error {
	_, ok, err := s.ClaimRun(ctx, o)
	switch {
	case err != nil:
		return err
	case !ok:
		return fmt.Errorf("the claim of the run %s was refused", o)
	}
	return nil
}

// closeHolding claims a run with s and closes s while it holds the claim.
func closeHolding(ctx context.Context, s, _ *kubestore.Store, _ coordclient.LeaseInterface) error {
	if err := claimOK(ctx, s, probeOwner); err != nil {
		return err
	}
	return s.Close()
}

// sessionLeft returns an error when the namespace of leases holds a session Lease of
// the store called identity.
func sessionLeft(ctx context.Context, leases coordclient.LeaseInterface, identity string) error {
	list, err := leases.List(ctx, metav1.ListOptions{LabelSelector: "itemops.io/role=session"})
	if err != nil {
		return err
	}
	for _, l := range list.Items {
		if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == identity {
			return fmt.Errorf("the session Lease %s of %s is left", l.Name, identity)
		}
	}
	return nil
}

// keepTwo starts a claim session of s and claims two runs under it (claimTwo).
func keepTwo(ctx context.Context, s *kubestore.Store) (operations.ClaimSession, error) {
	session := s.KeepClaims(ctx, time.Minute, nil)
	if err := claimTwo(ctx, session); err != nil {
		session.End()
		return nil, err
	}
	return session, nil
}

// claimTwo claims two runs under session, as a pass of a Monitor does, and releases
// them, which the session keeps.
func claimTwo(ctx context.Context, session operations.ClaimSession) error {
	for _, o := range []operations.Owner{probeOwner, {Kind: phase.Backup, Name: "probe-2", UID: "uid-probe-2"}} {
		release, ok, err := session.ClaimRun(ctx, o)
		if err != nil || !ok {
			return fmt.Errorf("claim the run %s under a session: ok %v, error %v", o, ok, err)
		}
		release()
	}
	return nil
}

// handedOver returns nil once a claim's Lease in the namespace of leases is handed
// over, and errKeptAll when none is within wait.
func handedOver(ctx context.Context, leases coordclient.LeaseInterface, within time.Duration) error {
	claims := 0
	// Each List has ctx, not the poll's context, which has ended at once when within is 0.
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, within, true, func(context.Context) (bool, error) {
		list, err := leases.List(ctx, metav1.ListOptions{LabelSelector: "itemops.io/role=claim"})
		if err != nil {
			return false, err
		}
		claims = len(list.Items)
		for _, l := range list.Items {
			if _, ok := l.Annotations["itemops.io/free-from"]; ok {
				return true, nil
			}
		}
		return false, nil
	})
	if wait.Interrupted(err) {
		return fmt.Errorf("%w: %d claims, none handed over", errKeptAll, claims)
	}
	return err
}
