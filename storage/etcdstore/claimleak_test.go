package etcdstore_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/storage/etcdstore"
)

// forever is a plugin whose operations never end.
type forever struct{}

func (forever) Progress(context.Context, operations.Operation) (operations.Progress, error) {
	return operations.Progress{NCompleted: 1, NTotal: 10, OperationUnits: "Bytes"}, nil
}
func (forever) Cancel(context.Context, operations.Operation) error { return nil }

// TestStoppedMonitorLeavesNoClaim stops a Monitor of replica a at random moments of its
// pass, 120 times, while its store stays open (a replica that lost leader election, or a
// caller cancelling Run). After each stop no claim of a is left in etcd, and a pass of
// replica b polls every run at once: none is skipped as held. A claim whose request the
// stop interrupted after etcd had written it is the case this guards: its key lived on
// under a's lease, which a keeps alive, so no one else ever polled that run.
func TestStoppedMonitorLeavesNoClaim(t *testing.T) {
	const runs, perRun, tries = 10, 3, 120
	prefix := etcdstore.NewPrefix()
	c := etcdstore.NewTestClient(t)
	opts := func(id string) *etcdstore.Options {
		return &etcdstore.Options{Identity: id, RequestTimeout: 5 * time.Second}
	}
	a := etcdstore.OpenStore(t, c, prefix, opts("replica-a"))
	b := etcdstore.OpenStore(t, etcdstore.NewTestClient(t), prefix, opts("replica-b"))
	seed(t, b, runs, perRun)
	resolver := operations.ResolverFunc(func(string) (operations.Tracker, error) { return forever{}, nil })
	ma := monitor.New(a, resolver, monitor.WithWorkers(4))
	mb := monitor.New(b, resolver, monitor.WithWorkers(4))

	// The stops land anywhere in a pass, claims and releases included: at a random
	// moment up to the length of a whole pass, measured here.
	start := time.Now()
	_, err := ma.RunOnce(bg)
	require.NoError(t, err)
	pass := time.Since(start)
	interrupted := 0
	for i := range tries {
		ctx, cancel := context.WithCancel(bg)
		stop := time.AfterFunc(rand.N(pass), cancel)
		_, err := ma.RunOnce(ctx)
		stop.Stop()
		cancel()
		if errors.Is(err, context.Canceled) {
			interrupted++
		}

		resp, err := c.Get(bg, prefix+"claims/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
		require.NoError(t, err)
		for _, kv := range resp.Kvs {
			t.Errorf("try %d: claim %s left behind after the Monitor stopped", i, kv.Key)
		}
		st, err := mb.RunOnce(bg)
		require.NoError(t, err, "try %d: pass of b", i)
		require.Zero(t, st.Skipped, "try %d: runs b found held", i)
		require.Equal(t, runs, st.Runs, "try %d: runs b polled", i)
		if t.Failed() {
			break
		}
	}
	t.Logf("%d of %d passes of a were stopped before they ended", interrupted, tries)
	require.Positive(t, interrupted, "passes stopped midway")
}
