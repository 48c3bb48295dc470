package kubestore_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/kubestore"
	"github.com/itemops/itemops/storage/storetest"
)

// TestClaims runs the checks of claim sessions on the API server.
func TestClaims(t *testing.T) {
	storetest.RunClaims(t, func(t *testing.T) operations.Store {
		return newStore(t, nil)
	})
}

var bg = context.Background()

// openReplica opens a store of the replica called name in namespace ns, whose requests
// all fail once cut is set, with claims that end replicaTTL after it stops renewing
// them.
func openReplica(t *testing.T, cfg *rest.Config, ns, name string, cut *atomic.Bool) *kubestore.Store {
	t.Helper()
	c := rest.CopyConfig(cfg)
	if cut != nil {
		c.Wrap(func(rt http.RoundTripper) http.RoundTripper { return cutTransport{rt, cut} })
	}
	s, err := kubestore.Open(bg, c, ns, &kubestore.Options{Identity: name, ClaimTTL: replicaTTL, RequestTimeout: 2 * time.Second})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// claim claims the run of o with s and requires that ok be want.
func claim(t *testing.T, s *kubestore.Store, o operations.Owner, want bool, by string) func() {
	t.Helper()
	release, ok, err := s.ClaimRun(bg, o)
	if err != nil || ok != want {
		t.Fatalf("ClaimRun(%s) by %s = ok %v, error %v; want ok %v and no error", o, by, ok, err, want)
	}
	return release
}

// TestCloseGivesUpClaims closes a store that holds a claim: another store claims the
// run at once, with no wait for the claim's session to be judged dead, the closed
// store's claims fail with ErrClosed, and no Lease of the closed store is left.
func TestCloseGivesUpClaims(t *testing.T) {
	cfg := config(t)
	ns := newNamespace(t, cfg)
	a, b := openReplica(t, cfg, ns, "a", nil), openReplica(t, cfg, ns, "b", nil)
	o := operations.Owner{Kind: phase.Backup, Name: "x", UID: "u"}
	claim(t, a, o, true, "a")
	claim(t, b, o, false, "b, while a holds the run")
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	claim(t, b, o, true, "b, after a closed")()
	if _, _, err := a.ClaimRun(bg, o); !errors.Is(err, kubestore.ErrClosed) {
		t.Errorf("ClaimRun after Close returned %v, want ErrClosed", err)
	}
	for _, l := range leases(t, leaseClient(t, cfg, ns)) {
		if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == "a" {
			t.Errorf("the session Lease %s of a is left after Close", l.Name)
		}
	}
	var zero kubestore.Store
	if _, _, err := zero.ClaimRun(bg, o); !errors.Is(err, kubestore.ErrClosed) {
		t.Errorf("ClaimRun of the zero Store returned %v, want ErrClosed", err)
	}
}

// TestDeadReplicaJudgedByObservedTime kills replica a while it holds a claim, after
// moving the renewTime of its session's Lease to the year 2100, as a replica whose
// clock runs far ahead would write it: b still takes the run once it has seen the Lease
// unrenewed for its duration, since no store reads another's renewTime.
func TestDeadReplicaJudgedByObservedTime(t *testing.T) {
	cfg := config(t)
	ns := newNamespace(t, cfg)
	cut := new(atomic.Bool)
	a, b := openReplica(t, cfg, ns, "a", cut), openReplica(t, cfg, ns, "b", nil)
	o := operations.Owner{Kind: phase.Backup, Name: "x", UID: "u"}
	claim(t, a, o, true, "a")
	cut.Store(true)
	client := leaseClient(t, cfg, ns)
	future := metav1.NewMicroTime(time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC))
	for _, l := range leases(t, client) {
		if l.Labels["itemops.io/role"] == "session" && *l.Spec.HolderIdentity == "a" {
			l.Spec.RenewTime = &future
			if _, err := client.Update(bg, &l, metav1.UpdateOptions{}); err != nil {
				t.Fatalf("update the session Lease of a: %v", err)
			}
		}
	}
	claim(t, b, o, false, "b, right after a died")
	err := wait.PollUntilContextTimeout(bg, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		release, ok, err := b.ClaimRun(ctx, o)
		if ok {
			release()
		}
		return ok, err
	})
	if err != nil {
		t.Fatalf("b could not claim the run of a, dead with a renewTime in 2100, within a minute: %v", err)
	}
}

// TestDamagedClaimLease edits the hand-over time of a claim's Lease into one that does
// not parse: another store's claim of the run fails with operations.ErrCorrupt naming
// the Lease, and claims of other runs go on.
func TestDamagedClaimLease(t *testing.T) {
	cfg := config(t)
	ns := newNamespace(t, cfg)
	a, b := openReplica(t, cfg, ns, "a", nil), openReplica(t, cfg, ns, "b", nil)
	o := operations.Owner{Kind: phase.Backup, Name: "x", UID: "u"}
	claim(t, a, o, true, "a")
	client := leaseClient(t, cfg, ns)
	for _, l := range leases(t, client) {
		if l.Labels["itemops.io/role"] == "claim" {
			l.Annotations = map[string]string{"itemops.io/free-from": "soon"}
			if _, err := client.Update(bg, &l, metav1.UpdateOptions{}); err != nil {
				t.Fatalf("update the claim Lease: %v", err)
			}
		}
	}
	_, ok, err := b.ClaimRun(bg, o)
	if !errors.Is(err, operations.ErrCorrupt) || ok {
		t.Fatalf("ClaimRun of a run whose claim Lease was damaged = ok %v, error %v; want operations.ErrCorrupt", ok, err)
	}
	t.Logf("ClaimRun: %v", err)
	claim(t, b, operations.Owner{Kind: phase.Backup, Name: "y", UID: "u"}, true, "b, of another run")()
}
