package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

func TestOpen(t *testing.T) {
	c := newClient(t, testServer)
	tests := []struct {
		name    string
		setup   map[string]string // keys written under the prefix first
		prefix  string            // "" means a fresh prefix
		opts    *Options
		client  *clientv3.Client
		wantErr error  // errors.Is target
		wantMsg string // or a part of the message
	}{
		{name: "empty prefix becomes a store", client: c},
		{name: "a store opens again", setup: map[string]string{"format": `{"format":"itemops.etcdstore","version":1}`}, client: c},
		{name: "foreign keys", setup: map[string]string{"registry/pods/x": "{}"}, client: c, wantErr: ErrNotStore},
		{name: "another format", setup: map[string]string{"format": `{"format":"something.else","version":1}`}, client: c, wantErr: ErrNotStore},
		{name: "a marker that is not JSON", setup: map[string]string{"format": `v1`}, client: c, wantErr: ErrNotStore},
		{name: "a newer schema", setup: map[string]string{"format": `{"format":"itemops.etcdstore","version":2}`}, client: c, wantErr: ErrSchemaVersion},
		{name: "nil client", wantMsg: "nil client"},
		{name: "too few txn ops", client: c, opts: &Options{MaxTxnOps: 2}, wantMsg: "MaxTxnOps 2"},
		{name: "too small requests", client: c, opts: &Options{MaxRequestBytes: 1000}, wantMsg: "MaxRequestBytes 1000"},
		{name: "negative timeout", client: c, opts: &Options{RequestTimeout: -time.Second}, wantMsg: "negative"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			prefix := newPrefix()
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
	require.Equal(t, []string{"format", "ops/Bb/meta", "phases/WaitingForPluginOperations/Bb", "runs/Bb"}, rawKeys(t, c, p+"/"))
}

// TestLayout checks the key layout the package documentation describes.
func TestLayout(t *testing.T) {
	c := newClient(t, testServer)
	prefix := newPrefix()
	s := openStore(t, c, prefix, nil)
	b := backup("nightly/with slash")
	r := operations.Owner{Kind: phase.Restore, Name: "r"}
	createWaiting(t, s, b)
	rr := operations.Run{Owner: r, Phase: phase.New}
	require.NoError(t, s.CreateRun(bg, rr))
	ops := newOps(b, "op-", 3, operations.OperationNew)
	ops[2].Status.Phase = operations.OperationCompleted
	require.NoError(t, s.PutOperations(bg, b, ops))
	release, ok, err := s.ClaimRun(bg, b)
	require.NoError(t, err)
	require.True(t, ok)
	defer release()

	want := []string{
		"claims/Bnightly%2Fwith%20slash",
		"format",
		"ops/Bnightly%2Fwith%20slash/done/0000000000000003",
		"ops/Bnightly%2Fwith%20slash/ids/op-0000",
		"ops/Bnightly%2Fwith%20slash/ids/op-0001",
		"ops/Bnightly%2Fwith%20slash/ids/op-0002",
		"ops/Bnightly%2Fwith%20slash/meta",
		"ops/Bnightly%2Fwith%20slash/open/0000000000000001",
		"ops/Bnightly%2Fwith%20slash/open/0000000000000002",
		"ops/Rr/meta",
		"phases/New/Rr",
		"phases/WaitingForPluginOperations/Bnightly/with slash",
		"runs/Bnightly/with slash",
		"runs/Rr",
	}
	if d := cmp.Diff(want, rawKeys(t, c, prefix)); d != "" {
		t.Errorf("keys (-want +got):\n%s", d)
	}
	get := func(k string) string {
		resp, err := c.Get(bg, prefix+k)
		require.NoError(t, err)
		require.Len(t, resp.Kvs, 1, k)
		return string(resp.Kvs[0].Value)
	}
	require.Equal(t, "0000000000000003:C", get("ops/Bnightly%2Fwith%20slash/ids/op-0002"))
	require.Equal(t, `{"v":1,"next":4,"count":3}`, get("ops/Bnightly%2Fwith%20slash/meta"))
	require.Equal(t, get("runs/Bnightly/with slash"), get("phases/WaitingForPluginOperations/Bnightly/with slash"), "a phase index entry holds the run record")
	require.Contains(t, get("ops/Bnightly%2Fwith%20slash/open/0000000000000001"), `"id":"op-0000"`)
	require.Equal(t, s.opts.Identity, get("claims/Bnightly%2Fwith%20slash"))
}

// TestStagedBatch writes batches far larger than one transaction, with small limits:
// they are staged in many chunks and applied in many transactions, and come out as if
// written in one.
func TestStagedBatch(t *testing.T) {
	c := newClient(t, testServer)
	prefix := newPrefix()
	s := openStore(t, c, prefix, small())
	var staged, applied atomic.Int32 // the hooks run in several goroutines at once
	s.hooks.afterStage = func(int) error { staged.Add(1); return nil }
	s.hooks.afterApply = func(int) error { applied.Add(1); return nil }
	o := backup("b")
	createWaiting(t, s, o)
	first := newOps(o, "a-", 300, operations.OperationNew)
	require.NoError(t, s.PutOperations(bg, o, first))
	require.Greater(t, staged.Load(), int32(5), "chunks staged before the commit")
	require.Equal(t, staged.Load()+1, applied.Load(), "chunks applied (the last chunk is written by the commit)")

	// Finish every other one and add more, in one batch.
	var second []operations.Operation
	for i := 0; i < len(first); i += 2 {
		op := first[i].Clone()
		op.Status.Phase = operations.OperationCompleted
		second = append(second, op)
	}
	second = append(second, newOps(o, "b-", 50, operations.OperationInProgress)...)
	require.NoError(t, s.PutOperations(bg, o, second))

	var wantAll, wantOpen []string
	for i, op := range first {
		wantAll = append(wantAll, op.ID)
		if i%2 == 1 {
			wantOpen = append(wantOpen, op.ID)
		}
	}
	for _, op := range second[150:] {
		wantAll = append(wantAll, op.ID)
		wantOpen = append(wantOpen, op.ID)
	}
	require.Equal(t, wantAll, listIDs(t, s, o))
	require.Equal(t, wantOpen, listIDs(t, s, o, operations.OperationNew, operations.OperationInProgress))
	got, err := s.GetOperation(bg, o, "a-0298")
	require.NoError(t, err)
	require.Equal(t, operations.OperationCompleted, got.Status.Phase)
	if d := cmp.Diff(second[149], got); d != "" {
		t.Errorf("GetOperation(a-0298) (-want +got):\n%s", d)
	}

	m := storedMeta(t, s, o)
	require.Equal(t, meta{V: 1, Next: 351, Count: 350}, m, "metadata after the batches")
	require.Zero(t, countKeys(t, c, s.keys.ops(o)+dirStaged), "staged keys left")
	require.EqualValues(t, 350, countKeys(t, c, s.keys.ops(o)+dirIDs))
	require.EqualValues(t, len(wantOpen), countKeys(t, c, s.keys.ops(o)+dirOpen))
	require.EqualValues(t, 150, countKeys(t, c, s.keys.ops(o)+dirDone))
}

var errCrash = errors.New("the process died here")

// TestCrash stops a staged batch at each step, as if its process died there, and checks
// that readers, in this process and another, see all of the batch or none of it, and that
// the store goes on working.
func TestCrash(t *testing.T) {
	tests := []struct {
		name string
		// crash installs the hook that stops the batch.
		crash     func(h *hooks)
		committed bool // the batch is visible afterwards
	}{
		{"after the first chunk is staged", func(h *hooks) { h.afterStage = func(int) error { return errCrash } }, false},
		{"after the last chunk is staged", func(h *hooks) {
			h.afterStage = func(i int) error {
				if i >= 3 {
					return errCrash
				}
				return nil
			}
		}, false},
		{"after the commit", func(h *hooks) { h.afterCommit = func(struct{}) error { return errCrash } }, true},
		{"midway through applying", func(h *hooks) {
			h.afterApply = func(i int) error {
				if i == 2 {
					return errCrash
				}
				return nil
			}
		}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			prefix := newPrefix()
			c := newClient(t, testServer)
			writer := openStore(t, c, prefix, &Options{MaxTxnOps: 16, MaxRequestBytes: minRequestBytes})
			o := backup("b")
			createWaiting(t, writer, o)
			before := newOps(o, "old-", 5, operations.OperationInProgress)
			require.NoError(t, writer.PutOperations(bg, o, before))

			batch := newOps(o, "new-", 200, operations.OperationNew)
			for i := range before {
				done := before[i].Clone()
				done.Status.Phase = operations.OperationCompleted
				batch = append(batch, done)
			}
			tc.crash(&writer.hooks)
			err := writer.PutOperations(bg, o, batch)
			require.ErrorIs(t, err, errCrash, "PutOperations stopped by the hook")
			writer.hooks = hooks{}

			wantAll := ids(before)
			wantOpen := ids(before)
			if tc.committed {
				wantAll = append(wantAll, ids(batch[:200])...)
				wantOpen = ids(batch[:200])
			}
			// A reader in another process, and the writer itself, see the batch whole or
			// not at all.
			reader := openStore(t, newClient(t, testServer), prefix, nil)
			for _, s := range []*Store{reader, writer} {
				require.Equal(t, wantAll, listIDs(t, s, o))
				require.Equal(t, wantOpen, listIDs(t, s, o, operations.OperationNew, operations.OperationInProgress))
				got, err := s.GetOperation(bg, o, "old-0002")
				require.NoError(t, err)
				require.Equal(t, tc.committed, got.Status.Phase == operations.OperationCompleted, "old-0002 is %s", got.Status.Phase)
				_, err = s.GetOperation(bg, o, "new-0150")
				if tc.committed {
					require.NoError(t, err)
				} else {
					require.ErrorIs(t, err, operations.ErrNotFound)
				}
			}
			require.Empty(t, storedMeta(t, reader, o).Batch, "a committed batch is applied by its first reader")

			// The store goes on: a small write succeeds and clears what was staged.
			extra := newOps(o, "extra-", 2, operations.OperationNew)
			require.NoError(t, reader.PutOperations(bg, o, extra))
			require.Equal(t, append(wantAll, ids(extra)...), listIDs(t, writer, o))
			require.Zero(t, countKeys(t, c, writer.keys.ops(o)+dirStaged), "staged keys left after the next write")
		})
	}
}

// TestStagedConflict has another process write to the run while a batch is staged: the
// batch's commit finds the run changed, and it is validated and written again on top.
func TestStagedConflict(t *testing.T) {
	prefix := newPrefix()
	writer := openStore(t, newClient(t, testServer), prefix, small())
	other := openStore(t, newClient(t, testServer), prefix, nil)
	o := backup("b")
	createWaiting(t, writer, o)
	require.NoError(t, writer.PutOperations(bg, o, newOps(o, "x-", 1, operations.OperationInProgress)))

	interfered := 0
	writer.hooks.afterStage = func(i int) error {
		if interfered < 2 && i == 0 {
			interfered++
			// The other process finishes x-0000 and adds an operation of its own.
			done := newOps(o, "x-", 1, operations.OperationCompleted)
			return other.PutOperations(bg, o, append(done, newOps(o, fmt.Sprintf("o%d-", interfered), 1, operations.OperationNew)...))
		}
		return nil
	}
	batch := newOps(o, "w-", 40, operations.OperationNew)
	require.NoError(t, writer.PutOperations(bg, o, batch))
	require.Equal(t, 2, interfered, "times the other process wrote during staging")
	require.Equal(t, append([]string{"x-0000", "o1-0000", "o2-0000"}, ids(batch)...), listIDs(t, other, o))

	// A batch that would revive x-0000, finished by the other process while it was
	// staged, is refused when it is validated again.
	writer.hooks.afterStage = func(i int) error {
		if i == 0 {
			return other.PutOperations(bg, o, newOps(o, "w-", 1, operations.OperationFailed))
		}
		return nil
	}
	revive := newOps(o, "w-", 40, operations.OperationInProgress)
	err := writer.PutOperations(bg, o, revive)
	require.ErrorIs(t, err, operations.ErrConflict)
	require.Equal(t, append([]string{"o1-0000", "o2-0000"}, ids(batch[1:])...), listIDs(t, other, o, operations.OperationNew), "operations still New after the refused batch")
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

// TestLimits checks records too large for etcd's requests, and times JSON cannot write.
func TestLimits(t *testing.T) {
	s := openStore(t, newClient(t, testServer), newPrefix(), nil)
	o := backup("b")
	createWaiting(t, s, o)
	big := newOps(o, "big-", 1, operations.OperationNew)
	big[0].Status.Description = strings.Repeat("x", DefaultMaxRequestBytes)
	ok := newOps(o, "ok-", 1, operations.OperationNew)
	ok[0].Status.Description = strings.Repeat("x", DefaultMaxRequestBytes/2)
	far := newOps(o, "far-", 1, operations.OperationNew)
	far[0].Status.Created = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	run := operations.Run{Owner: backup("big"), Phase: phase.New, FailureReason: strings.Repeat("x", DefaultMaxRequestBytes/2)}

	tests := []struct {
		name    string
		call    func() error
		wantErr error
	}{
		{"record beyond the request size", func() error {
			return s.PutOperations(bg, o, append(newOps(o, "a-", 3, operations.OperationNew), big...))
		}, operations.ErrInvalid},
		{"time past year 9999", func() error { return s.PutOperations(bg, o, far) }, operations.ErrInvalid},
		{"run record beyond half the request size", func() error { return s.CreateRun(bg, run) }, operations.ErrInvalid},
		{"record of half the request size", func() error { return s.PutOperations(bg, o, ok) }, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if tc.wantErr == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.wantErr)
		})
	}
	require.Equal(t, []string{"ok-0000"}, listIDs(t, s, o))
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

	calls := map[string]func() error{
		"CreateRun":      func() error { return s.CreateRun(bg, operations.Run{Owner: backup("c"), Phase: phase.New}) },
		"GetRun":         func() error { _, err := s.GetRun(bg, o); return err },
		"UpdateRun":      func() error { _, err := s.UpdateRun(bg, o, func(*operations.Run) error { return nil }); return err },
		"ListRuns":       func() error { _, err := s.ListRuns(bg, operations.RunFilter{}); return err },
		"DeleteRun":      func() error { return s.DeleteRun(bg, o) },
		"PutOperations":  func() error { return s.PutOperations(bg, o, nil) },
		"GetOperation":   func() error { _, err := s.GetOperation(bg, o, "x"); return err },
		"ListOperations": func() error { _, err := s.ListOperations(bg, o, operations.OperationFilter{}); return err },
		"ClaimRun":       func() error { _, _, err := s.ClaimRun(bg, o); return err },
	}
	for name, call := range calls {
		require.ErrorIs(t, call(), ErrClosed, "%s after Close", name)
	}
	var zero Store
	_, err = zero.GetRun(bg, o)
	require.ErrorIs(t, err, ErrClosed, "GetRun of the zero Store")
	_, _, err = zero.ClaimRun(bg, o)
	require.ErrorIs(t, err, ErrClosed, "ClaimRun of the zero Store")
	require.NoError(t, zero.Close(), "Close of the zero Store")
	// The claim went with the lease, and the client is still the caller's.
	other := openStore(t, c, prefix, nil)
	release, ok, err := other.ClaimRun(bg, o)
	require.NoError(t, err)
	require.True(t, ok, "claim after the holder closed")
	release()
}

// TestLimitsAboveServer sets MaxTxnOps above the server's --max-txn-ops: a batch that
// needs more than the server takes fails, writes nothing, and says which options to set.
func TestLimitsAboveServer(t *testing.T) {
	s := openStore(t, newClient(t, testServer), newPrefix(), &Options{MaxTxnOps: 4 * DefaultMaxTxnOps})
	o := backup("b")
	createWaiting(t, s, o)
	err := s.PutOperations(bg, o, newOps(o, "x-", 200, operations.OperationNew))
	require.ErrorContains(t, err, "too many operations in txn request")
	require.ErrorContains(t, err, "set them to the server's --max-txn-ops and --max-request-bytes")
	require.Empty(t, listIDs(t, s, o))
}
