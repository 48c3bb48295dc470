package etcdstore

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/itemops/itemops/operations"
)

// claimTTL is the lease TTL of claims in tests: the least etcd grants with the test
// server's ticks.
const claimTTL = time.Second

// TestClaimRun checks who may claim a run, and when: one holder at a time, release lets
// another in, a second release does nothing, and the claims of a store whose process died
// end with its lease.
func TestClaimRun(t *testing.T) {
	prefix := newPrefix()
	ca := newClient(t, testServer)
	a := openStore(t, ca, prefix, &Options{ClaimTTL: claimTTL, Identity: "replica-a"})
	b := openStore(t, newClient(t, testServer), prefix, &Options{ClaimTTL: claimTTL, Identity: "replica-b"})
	x, y := backup("x"), backup("y")

	claim := func(s *Store, o operations.Owner) (func(), bool) {
		t.Helper()
		release, ok, err := s.ClaimRun(bg, o)
		require.NoError(t, err, "ClaimRun(%s)", o)
		require.Equal(t, ok, release != nil, "release is given exactly when the claim is")
		return release, ok
	}

	releaseA, ok := claim(a, x)
	require.True(t, ok, "first claim of x")
	_, ok = claim(a, x)
	require.False(t, ok, "the holder claims x again (a second Monitor of the same process)")
	_, ok = claim(b, x)
	require.False(t, ok, "another store claims x while it is held")
	releaseY, ok := claim(b, y)
	require.True(t, ok, "claims of other runs are independent")
	releaseY()

	releaseA()
	releaseB, ok := claim(b, x)
	require.True(t, ok, "claim of x after its release")
	releaseA() // a late second release must not free b's claim
	_, ok = claim(a, x)
	require.False(t, ok, "claim of x after a second release of an older claim")
	releaseB()

	// a's process dies holding y: its claim outlives it until the lease expires.
	_, ok = claim(a, y)
	require.True(t, ok)
	require.NoError(t, ca.Close())
	_, ok = claim(b, y)
	require.False(t, ok, "claim of y right after its holder died")
	require.Eventually(t, func() bool {
		release, ok, err := b.ClaimRun(bg, y)
		if ok {
			release()
		}
		return err == nil && ok
	}, time.Minute, 50*time.Millisecond, "claim of y once the dead holder's lease expired")

	_, _, err := b.ClaimRun(bg, operations.Owner{Name: "no kind"})
	require.ErrorIs(t, err, operations.ErrInvalid)
}

// TestClaimAfterLostLease revokes a store's lease behind its back, as etcd does when the
// store could not renew it in time: the store's next claim starts a new lease.
func TestClaimAfterLostLease(t *testing.T) {
	c := newClient(t, testServer)
	s := openStore(t, c, newPrefix(), &Options{ClaimTTL: claimTTL})
	release, ok, err := s.ClaimRun(bg, backup("x"))
	require.NoError(t, err)
	require.True(t, ok)
	first := s.sess.id
	_, err = c.Revoke(bg, first)
	require.NoError(t, err)
	release() // its claim is already gone: this changes nothing in etcd

	release, ok, err = s.ClaimRun(bg, backup("x"))
	require.NoError(t, err, "claim after the lease was revoked")
	require.True(t, ok, "the old claim went with the old lease")
	require.NotEqual(t, first, s.sess.id, "lease of the new claim")
	release()
}

// TestClaimAdoptedAfterFailedRelease gives a claim up while etcd is down: the claim
// stays in etcd, under the store's lease, which survives the outage. Other stores still
// find the run held, and the store's own next claim of it adopts the claim.
func TestClaimAdoptedAfterFailedRelease(t *testing.T) {
	srv := startServer(t)
	prefix := newPrefix()
	s := openStore(t, newClient(t, srv), prefix, &Options{RequestTimeout: 200 * time.Millisecond})
	other := openStore(t, newClient(t, srv), prefix, nil)
	o := backup("x")
	release, ok, err := s.ClaimRun(bg, o)
	require.NoError(t, err)
	require.True(t, ok)
	srv.Stop()
	release() // cannot reach etcd
	require.NoError(t, srv.Restart())

	var otherOK bool
	require.Eventually(t, func() bool {
		var err error
		_, otherOK, err = other.ClaimRun(bg, o)
		return err == nil
	}, time.Minute, 20*time.Millisecond, "another store's claim once etcd is back")
	require.False(t, otherOK, "another store claims a run whose release failed")
	var again func()
	require.Eventually(t, func() bool {
		var err error
		again, ok, err = s.ClaimRun(bg, o)
		return err == nil
	}, time.Minute, 20*time.Millisecond, "the store's own claim once etcd is back")
	require.True(t, ok, "the store adopts its own claim")
	_, ok, err = s.ClaimRun(bg, o)
	require.NoError(t, err)
	require.False(t, ok, "a second Monitor of the store claims the adopted run")
	again()
	release, ok, err = other.ClaimRun(bg, o)
	require.NoError(t, err)
	require.True(t, ok, "another store's claim after the adopted claim is given up")
	release()
}

// TestClaimWithLostAnswer loses the answer to the transaction of a claim that etcd
// applied, as a connection that breaks after the request reached the server: ClaimRun
// fails with ErrUnavailable, and before it returns it gives up the claim it may have
// made (it deletes the key when it is under its lease), so that another store claims
// the run at once; with an answer lost to a claim the store did not win, the other
// store's claim stays.
func TestClaimWithLostAnswer(t *testing.T) {
	prefix := newPrefix()
	var armed, lost atomic.Int64
	// loseAnswer sends a transaction that writes a claim key and, while armed, returns
	// Unavailable in place of etcd's answer.
	loseAnswer := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		txn, ok := req.(*etcdserverpb.TxnRequest)
		if err != nil || !ok || len(txn.Success) == 0 || txn.Success[0].GetRequestPut() == nil ||
			!strings.HasPrefix(string(txn.Success[0].GetRequestPut().Key), prefix+"claims/") {
			return err
		}
		if armed.Load() > 0 && armed.Add(-1) >= 0 {
			lost.Add(1)
			return status.Error(codes.Unavailable, "the answer was lost")
		}
		return nil
	}
	c, err := clientv3.New(clientv3.Config{
		Endpoints: []string{testServer.Endpoint()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(loseAnswer)},
	})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	a := openStore(t, c, prefix, &Options{ClaimTTL: time.Minute, Identity: "a"})
	b := openStore(t, newClient(t, testServer), prefix, &Options{ClaimTTL: time.Minute, Identity: "b"})
	o := backup("x")

	armed.Store(1)
	_, ok, err := a.ClaimRun(bg, o)
	require.ErrorIs(t, err, ErrUnavailable, "ClaimRun whose answer was lost")
	require.False(t, ok)
	require.EqualValues(t, 1, lost.Load(), "answers lost")
	release, ok, err := b.ClaimRun(bg, o)
	require.NoError(t, err)
	require.True(t, ok, "another store claims the run of a claim whose answer was lost")

	armed.Store(1)
	_, ok, err = a.ClaimRun(bg, o)
	require.ErrorIs(t, err, ErrUnavailable, "ClaimRun of a run another holds, whose answer was lost")
	require.False(t, ok)
	resp, err := c.Get(bg, prefix+"claims/", clientv3.WithPrefix())
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1, "claim keys")
	require.Equal(t, "b", string(resp.Kvs[0].Value), "the claim of the store that holds the run")
	release()
}
