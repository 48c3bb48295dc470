package etcdstore_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/storage/etcdstore"
	"github.com/itemops/itemops/storage/storetest"
)

// TestReplicas runs the suite of replicas that share a store on etcd: each replica's
// store has a client of its own, which Kill closes, and Expire revokes the replica's
// lease.
func TestReplicas(t *testing.T) {
	storetest.RunReplicas(t, func(t *testing.T) storetest.Replicas {
		prefix := etcdstore.NewPrefix()
		c := etcdstore.NewTestClient(t)
		var (
			mu      sync.Mutex
			clients = make(map[string]*clientv3.Client)
			stores  = make(map[string]*etcdstore.Store)
		)
		// read returns the identities that the values under prefix+under name: each
		// value is one, or a hand-over by one.
		read := func(under string) []storetest.Holding {
			resp, err := c.Get(bg, prefix+under, clientv3.WithPrefix())
			if err != nil {
				t.Fatalf("read %s: %v", under, err)
			}
			var out []storetest.Holding
			for _, kv := range resp.Kvs {
				v := string(kv.Value)
				if strings.HasPrefix(v, "handed over") {
					_, by, _ := strings.Cut(v, " by ")
					out = append(out, storetest.Holding{Replica: by, HandedOver: true})
				} else {
					out = append(out, storetest.Holding{Replica: v})
				}
			}
			return out
		}
		return storetest.Replicas{
			Open: func(name string) operations.Store {
				cl := etcdstore.NewTestClient(t)
				s := etcdstore.OpenStore(t, cl, prefix, &etcdstore.Options{Identity: name, ClaimTTL: time.Second, RequestTimeout: 2 * time.Second})
				mu.Lock()
				clients[name], stores[name] = cl, s
				mu.Unlock()
				return s
			},
			Kill: func(name string) {
				mu.Lock()
				defer mu.Unlock()
				clients[name].Close()
			},
			Expire: func(name string) {
				mu.Lock()
				s := stores[name]
				mu.Unlock()
				if _, err := c.Revoke(bg, etcdstore.SessionLease(s)); err != nil {
					t.Fatalf("revoke the lease of %s: %v", name, err)
				}
			},
			Holdings: func() []storetest.Holding { return read("claims/") },
			Members: func() []string {
				var out []string
				for _, h := range read("replicas/") {
					out = append(out, h.Replica)
				}
				return out
			},
		}
	})
}

// holdings counts the claims under prefix by the Identity of their holder; runs handed
// over and not yet taken are counted under "".
func holdings(t *testing.T, c *clientv3.Client, prefix string) map[string]int {
	t.Helper()
	resp, err := c.Get(bg, prefix+"claims/", clientv3.WithPrefix())
	require.NoError(t, err)
	held := make(map[string]int)
	for _, kv := range resp.Kvs {
		if strings.HasPrefix(string(kv.Value), "handed over") {
			held[""]++
		} else {
			held[string(kv.Value)]++
		}
	}
	return held
}
