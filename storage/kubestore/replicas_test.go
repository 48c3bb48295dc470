package kubestore_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/storage/kubestore"
	"github.com/itemops/itemops/storage/storetest"
)

// replicaTTL is the ClaimTTL of the replicas of TestReplicas: short, so that a dead
// replica's runs are taken over soon, but some times the latency of a renewal on a
// loaded machine, lest a live session be judged dead (with a second, a machine shared
// by several API servers at a load average of 20 saw sessions lost).
const replicaTTL = 3 * time.Second

// TestReplicas runs the suite of replicas that share a store on the API server: each
// replica's store has a transport of its own, which Kill cuts, and Expire deletes the
// replica's session Lease, as another replica does when it judges the session dead.
func TestReplicas(t *testing.T) {
	storetest.RunReplicas(t, func(t *testing.T) storetest.Replicas {
		cfg := config(t)
		ns := newNamespace(t, cfg)
		client := leaseClient(t, cfg, ns)
		var (
			mu  sync.Mutex
			cut = make(map[string]*atomic.Bool)
		)
		return storetest.Replicas{
			Open: func(name string) operations.Store {
				dead := new(atomic.Bool)
				c := rest.CopyConfig(cfg)
				c.Wrap(func(rt http.RoundTripper) http.RoundTripper { return cutTransport{rt, dead} })
				s, err := kubestore.Open(context.Background(), c, ns,
					&kubestore.Options{Identity: name, ClaimTTL: replicaTTL, RequestTimeout: 2 * time.Second})
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				t.Cleanup(func() { s.Close() })
				mu.Lock()
				cut[name] = dead
				mu.Unlock()
				return s
			},
			Kill: func(name string) {
				mu.Lock()
				defer mu.Unlock()
				cut[name].Store(true)
			},
			Expire: func(name string) {
				for _, l := range leases(t, client) {
					if l.Labels["itemops.io/role"] == "session" && *l.Spec.HolderIdentity == name {
						if err := client.Delete(context.Background(), l.Name, metav1.DeleteOptions{}); err != nil {
							t.Fatalf("delete the session Lease of %s: %v", name, err)
						}
					}
				}
				// The store finds its Lease gone at its next renewal, within a third of
				// ClaimTTL; claims it creates before then are bound to the deleted
				// session (see kubestore's "Claims").
				time.Sleep(replicaTTL)
			},
			Holdings: func() []storetest.Holding {
				var out []storetest.Holding
				all := leases(t, client)
				for _, l := range all {
					if l.Labels["itemops.io/role"] == "claim" {
						_, handedOver := l.Annotations["itemops.io/free-from"]
						out = append(out, storetest.Holding{Replica: identity(all, l.Labels["itemops.io/holder"]), HandedOver: handedOver})
					}
				}
				return out
			},
			Members: func() []string {
				var out []string
				all := leases(t, client)
				for _, l := range all {
					if l.Labels["itemops.io/role"] == "member" {
						out = append(out, identity(all, l.Labels["itemops.io/holder"]))
					}
				}
				return out
			},
			// A pass over 20 runs costs about a hundred requests to the API server, so
			// the joins are timed by a longer interval than on etcd.
			Interval: time.Second,
		}
	})
}

// cutTransport fails every request once cut is set, as for a process that died.
type cutTransport struct {
	rt  http.RoundTripper
	cut *atomic.Bool
}

func (c cutTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if c.cut.Load() {
		return nil, errors.New("the replica is dead")
	}
	return c.rt.RoundTrip(req)
}

// leaseClient returns a client of the Leases in namespace ns.
func leaseClient(t testing.TB, cfg *rest.Config, ns string) coordclient.LeaseInterface {
	t.Helper()
	c, err := coordclient.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("coordination client: %v", err)
	}
	return c.Leases(ns)
}

// leases returns the Leases of the store in client's namespace.
func leases(t testing.TB, client coordclient.LeaseInterface) []coordinationv1.Lease {
	t.Helper()
	l, err := client.List(context.Background(), metav1.ListOptions{LabelSelector: "itemops.io/role"})
	if err != nil {
		t.Fatalf("list the Leases: %v", err)
	}
	return l.Items
}

// identity returns the Identity of the store whose session Lease is called session,
// among all, or the session's name in brackets when its Lease is gone.
func identity(all []coordinationv1.Lease, session string) string {
	for _, l := range all {
		if l.Name == session && l.Spec.HolderIdentity != nil {
			return *l.Spec.HolderIdentity
		}
	}
	return "(" + session + ")"
}
