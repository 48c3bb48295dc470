package etcdstore

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/storetest"
)

func TestOpen(t *testing.T) {
	c := newClient(t, testServer)
	tests := []struct {
		name    string
		setup   map[string]string // keys written under the prefix first
		prefix  string            // added to a fresh prefix
		opts    *Options
		client  *clientv3.Client
		wantErr error  // errors.Is target
		wantMsg string // or a part of the message
	}{
		{name: "empty prefix becomes a store", client: c},
		{name: "a store opens again", setup: map[string]string{"format": `{"format":"itemops.etcdstore","version":2}`}, client: c},
		{name: "a store of schema 1", setup: map[string]string{"format": `{"format":"itemops.etcdstore","version":1}`, "runs/Bb": "{}"}, client: c, wantErr: ErrSchemaVersion},
		{name: "foreign keys", setup: map[string]string{"registry/pods/x": "{}"}, client: c, wantErr: ErrNotStore},
		{name: "another format", setup: map[string]string{"format": `{"format":"something.else","version":1}`}, client: c, wantErr: ErrNotStore},
		{name: "a marker that is not JSON", setup: map[string]string{"format": `v1`}, client: c, wantErr: ErrNotStore},
		{name: "a newer schema", setup: map[string]string{"format": `{"format":"itemops.etcdstore","version":3}`}, client: c, wantErr: ErrSchemaVersion},
		{name: "nil client", wantMsg: "nil client"},
		{name: "too few txn ops", client: c, opts: &Options{MaxTxnOps: 2}, wantMsg: "MaxTxnOps 2"},
		{name: "too small requests", client: c, opts: &Options{MaxRequestBytes: 1000}, wantMsg: "MaxRequestBytes 1000"},
		{name: "a prefix too long for the requests", prefix: strings.Repeat("p", 8<<10), client: c, opts: &Options{MaxRequestBytes: minRequestBytes}, wantMsg: "use a shorter prefix"},
		{name: "negative timeout", client: c, opts: &Options{RequestTimeout: -time.Second}, wantMsg: "negative"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			prefix := newPrefix() + tc.prefix
			for k, v := range tc.setup {
				_, err := c.Put(bg, prefix+k, v)
				require.NoError(t, err)
			}
			before := rawKeys(t, c, prefix)
			s, err := Open(bg, tc.client, prefix, tc.opts)
			switch {
			case tc.wantErr != nil:
				require.ErrorIs(t, err, tc.wantErr)
				require.Equal(t, before, rawKeys(t, c, prefix), "keys after a refused Open")
				return
			case tc.wantMsg != "":
				require.ErrorContains(t, err, tc.wantMsg)
				return
			}
			require.NoError(t, err)
			defer s.Close()
			require.Contains(t, rawKeys(t, c, prefix), "format")
			// It works: a run goes in and comes out.
			createWaiting(t, s, backup("b"))
			_, err = s.GetRun(bg, backup("b"))
			require.NoError(t, err)
		})
	}
}

func TestOpenPrefixGetsSlash(t *testing.T) {
	c := newClient(t, testServer)
	p := strings.TrimSuffix(newPrefix(), "/")
	s := openStore(t, c, p, nil)
	createWaiting(t, s, backup("b"))
	keys := rawKeys(t, c, p+"/")
	require.Equal(t, "format", keys[0])
	require.Greater(t, len(keys), 1)
}

// TestClaimKeys checks the names of claim keys that the package documentation gives:
// claims/<kind>/<name>, the same for every UID of a run, for Backup, Restore and a kind
// of one's own, whose names may hold slashes.
func TestClaimKeys(t *testing.T) {
	c := newClient(t, testServer)
	prefix := newPrefix()
	s := openStore(t, c, prefix, nil)
	owners := []operations.Owner{
		{Kind: phase.Backup, Name: "nightly/with slash", UID: "u1"},
		{Kind: phase.Restore, Name: "nightly", UID: "u2"},
		{Kind: "Snapshot", Name: "a/b", UID: "u3"},
		{Kind: "Snapshot", Name: "a", UID: "u4"},
		{Kind: "Snapshot2", Name: "a", UID: "u5"},
	}
	for _, o := range owners {
		release, ok, err := s.ClaimRun(bg, o)
		require.NoError(t, err, "ClaimRun(%s)", o)
		require.True(t, ok, "ClaimRun(%s)", o)
		defer release()
	}
	want := []string{
		"claims/Backup/nightly/with slash",
		"claims/Restore/nightly",
		"claims/Snapshot/a",
		"claims/Snapshot/a/b",
		"claims/Snapshot2/a",
	}
	var got []string
	for _, k := range rawKeys(t, c, prefix) {
		if strings.HasPrefix(k, "claims/") {
			got = append(got, k)
		}
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("claim keys (-want +got):\n%s", d)
	}
	for _, o := range owners {
		o.UID = "another"
		_, ok, err := s.ClaimRun(bg, o)
		require.NoError(t, err, "ClaimRun(%s) of another UID", o)
		require.False(t, ok, "ClaimRun(%s) of another UID: the run is claimed whatever its UID", o)
	}
}

// TestLayout checks the keys the package documentation describes: the marker, the
// engine's keys under kv/, claims under claims/.
func TestLayout(t *testing.T) {
	c := newClient(t, testServer)
	prefix := newPrefix()
	s := openStore(t, c, prefix, nil)
	b := backup("nightly/with slash")
	createWaiting(t, s, b)
	require.NoError(t, s.PutOperations(bg, b, newOps(b, "op-", 3, operations.OperationNew)))
	release, ok, err := s.ClaimRun(bg, b)
	require.NoError(t, err)
	require.True(t, ok)
	defer release()

	keys := rawKeys(t, c, prefix)
	require.Equal(t, "claims/Backup/nightly/with slash", keys[0])
	require.Equal(t, "format", keys[1])
	require.Greater(t, len(keys), 3)
	for _, k := range keys[2:] {
		require.True(t, strings.HasPrefix(k, "kv/"), "key %q outside kv/", k)
	}
	resp, err := c.Get(bg, prefix+"format")
	require.NoError(t, err)
	require.JSONEq(t, `{"format":"itemops.etcdstore","version":2}`, string(resp.Kvs[0].Value))
	resp, err = c.Get(bg, prefix+keys[0])
	require.NoError(t, err)
	require.Equal(t, s.b.opts.Identity, string(resp.Kvs[0].Value))
	require.NotZero(t, resp.Kvs[0].Lease, "the claim is bound to a lease")
}

// TestConflictRetries races UpdateRun across two stores (two processes): the loser reads
// again and calls update again, and with no retries allowed it fails with ErrConflict.
func TestConflictRetries(t *testing.T) {
	tests := []struct {
		name      string
		retries   int
		wantCalls int
		wantErr   error
	}{
		{"retried", 0, 2, nil},
		{"no retries", -1, 1, operations.ErrConflict},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			prefix := newPrefix()
			s := openStore(t, newClient(t, testServer), prefix, &Options{ConflictRetries: tc.retries})
			other := openStore(t, newClient(t, testServer), prefix, nil)
			o := backup("b")
			createWaiting(t, s, o)
			calls := 0
			got, err := s.UpdateRun(bg, o, func(r *operations.Run) error {
				calls++
				if calls == 1 { // another process changes the run meanwhile
					if _, err := other.UpdateRun(bg, o, func(r *operations.Run) error { r.Warnings += 10; return nil }); err != nil {
						return err
					}
				}
				r.Errors++
				return nil
			})
			require.Equal(t, tc.wantCalls, calls, "calls of update")
			stored, gerr := s.GetRun(bg, o)
			require.NoError(t, gerr)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				require.Equal(t, 0, stored.Errors, "Errors after a lost update")
				return
			}
			require.NoError(t, err)
			require.Equal(t, 1, got.Errors)
			require.Equal(t, 10, got.Warnings, "the other process's write is kept")
			require.Equal(t, got.Errors, stored.Errors)
		})
	}
}

// TestPaging lists runs and operations with pages far smaller than the lists, operations
// sparse among sequence numbers, so that every way of reading the next page is used.
func TestPaging(t *testing.T) {
	for _, pageSize := range []int{1, 3, 7, 1000} {
		t.Run(fmt.Sprint("page size ", pageSize), func(t *testing.T) {
			s := openStore(t, newClient(t, testServer), newPrefix(), &Options{PageSize: pageSize})
			for i := range 10 {
				o := operations.Owner{Kind: phase.Restore, Name: fmt.Sprintf("r%02d", i)}
				if i%3 == 0 {
					o.Kind = phase.Backup
				}
				createWaiting(t, s, o)
				if i%2 == 0 {
					_, err := s.UpdateRun(bg, o, func(r *operations.Run) error { return r.SetPhase(phase.Completed, "x", t0) })
					require.NoError(t, err)
				}
			}
			wantRuns := []string{"r00", "r03", "r06", "r09", "r01", "r02", "r04", "r05", "r07", "r08"} // backups first
			runs, err := s.ListRuns(bg, operations.RunFilter{})
			require.NoError(t, err)
			var got []string
			for _, r := range runs {
				got = append(got, r.Owner.Name)
			}
			require.Equal(t, wantRuns, got, "ListRuns order")
			runs, err = s.ListRuns(bg, operations.RunFilter{Phases: []phase.Phase{phase.Completed, phase.WaitingForPluginOperations}})
			require.NoError(t, err)
			require.Len(t, runs, 10, "runs of two phases")
			require.Equal(t, "r00", runs[0].Owner.Name)

			o := backup("b")
			createWaiting(t, s, o)
			ops := newOps(o, "op-", 200, operations.OperationCompleted)
			var wantOpen []string
			for i := range ops {
				if i%23 == 5 || i > 190 {
					ops[i].Status.Phase = operations.OperationInProgress
					wantOpen = append(wantOpen, ops[i].ID)
				}
			}
			require.NoError(t, s.PutOperations(bg, o, ops))
			require.Equal(t, ids(ops), listIDs(t, s, o))
			require.Equal(t, wantOpen, listIDs(t, s, o, operations.OperationInProgress))
			require.Len(t, listIDs(t, s, o, operations.OperationCompleted), 200-len(wantOpen))
		})
	}
}

// TestUnavailable points a store at an etcd that has stopped: calls fail with
// ErrUnavailable after the request timeout, and a done context wins over it.
func TestUnavailable(t *testing.T) {
	srv := startServer(t)
	c := newClient(t, srv)
	s := openStore(t, c, newPrefix(), &Options{RequestTimeout: 200 * time.Millisecond})
	o := backup("b")
	createWaiting(t, s, o)
	srv.Stop()

	_, err := s.GetRun(bg, o)
	require.ErrorIs(t, err, ErrUnavailable)
	require.ErrorContains(t, err, "get run Backup/b: etcd unavailable: no answer within 200ms")
	err = s.PutOperations(bg, o, newOps(o, "op-", 1, operations.OperationNew))
	require.ErrorIs(t, err, ErrUnavailable)
	_, _, err = s.ClaimRun(bg, o)
	require.ErrorIs(t, err, ErrUnavailable)

	ctx, cancel := context.WithTimeout(bg, 50*time.Millisecond)
	defer cancel()
	_, err = s.GetRun(ctx, o)
	require.ErrorIs(t, err, context.DeadlineExceeded, "a caller's deadline before the request timeout")
	require.NotErrorIs(t, err, ErrUnavailable)

	require.NoError(t, srv.Restart())
	var got operations.Run
	require.Eventually(t, func() bool {
		got, err = s.GetRun(bg, o)
		return err == nil
	}, time.Minute, 20*time.Millisecond, "GetRun after the restart")
	require.Equal(t, phase.WaitingForPluginOperations, got.Phase)

	c.Close()
	_, err = s.GetRun(bg, o)
	require.ErrorIs(t, err, ErrUnavailable)
	require.ErrorContains(t, err, "client is closed")
}

func TestClose(t *testing.T) {
	c := newClient(t, testServer)
	prefix := newPrefix()
	s := openStore(t, c, prefix, nil)
	o := backup("b")
	createWaiting(t, s, o)
	_, ok, err := s.ClaimRun(bg, o)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "a second Close")

	t.Run("closed", func(t *testing.T) { storetest.RunClosed(t, s, ErrClosed) })
	_, _, err = s.ClaimRun(bg, o)
	require.ErrorIs(t, err, ErrClosed, "ClaimRun after Close")
	// The zero Store's methods are the engine's too, which fails them with ErrClosed.
	var zero Store
	t.Run("zero", func(t *testing.T) { storetest.RunClosed(t, &zero, ErrClosed) })
	_, _, err = zero.ClaimRun(bg, o)
	require.ErrorIs(t, err, ErrClosed, "ClaimRun of the zero Store")
	// A claim session of a closed store, or of the zero Store, keeps nothing: its claims
	// fail with ErrClosed, and what it is told does nothing.
	for name, st := range map[string]*Store{"the closed Store": s, "the zero Store": &zero} {
		session := st.KeepClaims(bg, time.Second, nil)
		_, ok, err := session.ClaimRun(bg, o)
		require.ErrorIs(t, err, ErrClosed, "ClaimRun of a session of %s", name)
		require.False(t, ok, "ClaimRun of a session of %s", name)
		session.EndPass(1)
		session.EndIncompletePass()
		session.End()
		session.End()
	}
	require.NoError(t, zero.Close(), "Close of the zero Store")
	// The claim went with the lease, and the client is still the caller's.
	other := openStore(t, c, prefix, nil)
	release, ok, err := other.ClaimRun(bg, o)
	require.NoError(t, err)
	require.True(t, ok, "claim after the holder closed")
	release()
}

// TestLimitsAboveServer sets MaxTxnOps above the server's --max-txn-ops: Open fails,
// writes nothing, and says which options to set.
func TestLimitsAboveServer(t *testing.T) {
	c := newClient(t, testServer)
	prefix := newPrefix()
	_, err := Open(bg, c, prefix, &Options{MaxTxnOps: 4 * DefaultMaxTxnOps})
	require.ErrorContains(t, err, "too many operations in txn request")
	require.ErrorContains(t, err, "set them to the server's --max-txn-ops and --max-request-bytes")
	require.Zero(t, countKeys(t, c, prefix), "keys written")
	_, err = Open(bg, c, prefix, &Options{MaxTxnOps: DefaultMaxTxnOps})
	require.NoError(t, err, "Open with the server's limit")
}

// TestRecordSize writes an operation whose record takes half a request, which fits,
// and one larger than a request, which the store refuses with operations.ErrInvalid
// (operations.MaxSpecBytes, less than a request, refuses it before the engine's limits
// do). Every field is within operations' limits: the records are made large by their
// number of post-operation items.
func TestRecordSize(t *testing.T) {
	s := openStore(t, newClient(t, testServer), newPrefix(), nil)
	o := backup("b")
	createWaiting(t, s, o)
	ok := newOps(o, "ok-", 1, operations.OperationNew)
	ok[0].PostOperationItems = items(DefaultMaxRequestBytes / 2)
	require.NoError(t, s.PutOperations(bg, o, ok), "a record of half a request")
	got, err := s.GetOperation(bg, o, "ok-0000")
	require.NoError(t, err)
	require.Equal(t, ok[0].PostOperationItems, got.PostOperationItems)

	big := append(newOps(o, "a-", 3, operations.OperationNew), newOps(o, "big-", 1, operations.OperationNew)...)
	big[3].PostOperationItems = items(DefaultMaxRequestBytes)
	require.ErrorIs(t, s.PutOperations(bg, o, big), operations.ErrInvalid, "a record larger than a request")
	require.Equal(t, []string{"ok-0000"}, listIDs(t, s, o))
}

// items returns post-operation items whose names, each at operations.MaxNameBytes,
// add up to at least n bytes.
func items(n int) []operations.ResourceIdentifier {
	out := make([]operations.ResourceIdentifier, (n+operations.MaxNameBytes-1)/operations.MaxNameBytes)
	for i := range out {
		name := fmt.Sprintf("%06d", i)
		out[i] = operations.ResourceIdentifier{Resource: "pods", Namespace: "ns", Name: name + strings.Repeat("x", operations.MaxNameBytes-len(name))}
	}
	return out
}
