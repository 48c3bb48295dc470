package etcdstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/itemops/itemops/operations"
)

// A Store is an [operations.Store] kept in etcd under a key prefix, and an
// [operations.RunClaimer] that lets several Monitors, in several processes, share its
// runs. It is safe for concurrent use; several Stores, in this process or others, may
// use the same prefix at once. Get one from [Open] and release it with [Store.Close].
// The zero Store has no client, and its methods fail with [ErrClosed].
type Store struct {
	client *clientv3.Client
	opts   Options
	keys   layout
	locks  runLocks

	// sessMu guards sess, the lease that holds this store's claims.
	sessMu sync.Mutex
	sess   *session
	// heldMu guards held: the claims a Monitor here holds, by key, with the revision
	// that created each.
	heldMu sync.Mutex
	held   map[string]int64

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error

	hooks hooks // failure injection for tests; all nil in use
}

var (
	_ operations.Store      = (*Store)(nil)
	_ operations.RunClaimer = (*Store)(nil)
)

// hooks stop a call at a chosen step, as if its process died there: when a hook returns
// an error the call returns it at once, without any cleanup. afterStage and afterApply
// may be called from several goroutines at once.
type hooks struct {
	afterStage  func(chunk int) error // after chunk of a staged batch is written
	afterCommit func(struct{}) error  // after a staged batch's commit marker is written
	afterApply  func(chunk int) error // after chunk of a committed batch is applied
}

// Open returns the store under prefix in the etcd cluster that client reaches. The client
// is the caller's: its endpoints, TLS and credentials are the caller's choice, Open never
// dials on its own, and [Store.Close] leaves the client open. A prefix that does not end
// with "/" gets one; the empty prefix puts the store at the root of the key space. A nil
// o means the defaults of [Options].
//
// The first Open of a prefix writes its format marker. Open fails with an error wrapping
// [ErrNotStore] when the prefix holds other keys but no marker, [ErrSchemaVersion] when
// the marker is of another schema version, [ErrUnavailable] when etcd does not answer,
// or ctx.Err(); then nothing is written.
func Open(ctx context.Context, client *clientv3.Client, prefix string, o *Options) (*Store, error) {
	if client == nil {
		return nil, errors.New("etcdstore: open: nil client")
	}
	opts, err := o.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("etcdstore: open: %w", err)
	}
	s := &Store{client: client, opts: opts, keys: newLayout(prefix)}
	if err := s.checkFormat(ctx); err != nil {
		return nil, fmt.Errorf("etcdstore: open %q: %w", s.keys.prefix, err)
	}
	return s, nil
}

type formatMarker struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
}

// checkFormat checks the format marker, writing it under an empty prefix.
func (s *Store) checkFormat(ctx context.Context) error {
	key := s.keys.format()
	want, _ := json.Marshal(formatMarker{Format: formatName, Version: schemaVersion})
	for range 3 {
		resp, err := s.txn(ctx, nil, []clientv3.Op{
			clientv3.OpGet(key),
			clientv3.OpGet(s.keys.prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithLimit(1)),
		}, nil)
		if err != nil {
			return err
		}
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			var m formatMarker
			if err := json.Unmarshal(kvs[0].Value, &m); err != nil || m.Format != formatName {
				return fmt.Errorf("%w: %s holds %q", ErrNotStore, key, kvs[0].Value)
			}
			if m.Version != schemaVersion {
				return fmt.Errorf("%w: the store has schema version %d, this build reads version %d", ErrSchemaVersion, m.Version, schemaVersion)
			}
			return nil
		}
		if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) > 0 {
			return fmt.Errorf("%w: the prefix holds %q and no %s", ErrNotStore, kvs[0].Key, key)
		}
		resp, err = s.txn(ctx, []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)},
			[]clientv3.Op{clientv3.OpPut(key, string(want))}, nil)
		if err != nil {
			return err
		}
		if resp.Succeeded {
			return nil
		}
		// Another store wrote the marker first: check it.
	}
	return fmt.Errorf("the format marker keeps changing: %w", operations.ErrConflict)
}

// Close gives up the runs this store has claimed (it revokes the lease that holds its
// claims) and makes every later call fail with [ErrClosed]. It does not close the etcd
// client, which is the caller's. Only the first call does anything; later calls return
// what it returned. Close waits at most [Options.RequestTimeout] for etcd; when etcd does
// not answer, the claims end by themselves after [Options.ClaimTTL].
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.sessMu.Lock()
		sess := s.sess
		s.sess = nil
		s.sessMu.Unlock()
		if sess == nil {
			return
		}
		sess.stop()
		ctx, cancel := context.WithTimeout(context.Background(), s.opts.RequestTimeout)
		defer cancel()
		if _, err := s.client.Revoke(ctx, sess.id); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			s.closeErr = fmt.Errorf("etcdstore: close: revoke the claims lease: %w", s.translate(context.Background(), ctx, err))
		}
	})
	return s.closeErr
}

// ready returns ErrClosed after Close (or for the zero Store), else ctx.Err().
func (s *Store) ready(ctx context.Context) error {
	if s.client == nil || s.closed.Load() {
		return ErrClosed
	}
	return ctx.Err()
}

// rpc runs f with a context that ends after RequestTimeout and requires etcd to have a
// leader, and translates its error.
func (s *Store) rpc(ctx context.Context, f func(ctx context.Context) error) error {
	if err := s.ready(ctx); err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), s.opts.RequestTimeout)
	defer cancel()
	if err := f(rctx); err != nil {
		return s.translate(ctx, rctx, err)
	}
	return nil
}

// translate turns the error of a request made with rctx, derived from the caller's ctx,
// into what the store returns: ctx's own error when ctx ended, ErrUnavailable when etcd
// could not answer, else err.
func (s *Store) translate(ctx, rctx context.Context, err error) error {
	var ee rpctypes.EtcdError
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case s.client.Ctx().Err() != nil:
		return fmt.Errorf("%w: the etcd client is closed", ErrUnavailable)
	case rctx.Err() != nil:
		return fmt.Errorf("%w: no answer within %s (Options.RequestTimeout)", ErrUnavailable, s.opts.RequestTimeout)
	case errors.As(err, &ee) && ee.Code() == codes.Unavailable, status.Code(err) == codes.Unavailable:
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	case errors.Is(err, rpctypes.ErrTooManyOps), errors.Is(err, rpctypes.ErrRequestTooLarge):
		return fmt.Errorf("%w (Options.MaxTxnOps is %d and Options.MaxRequestBytes %d: set them to the server's --max-txn-ops and --max-request-bytes)",
			err, s.opts.MaxTxnOps, s.opts.MaxRequestBytes)
	}
	return err
}

func (s *Store) get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	var resp *clientv3.GetResponse
	err := s.rpc(ctx, func(ctx context.Context) (err error) {
		resp, err = s.client.Get(ctx, key, opts...)
		return err
	})
	return resp, err
}

func (s *Store) txn(ctx context.Context, cmps []clientv3.Cmp, then, els []clientv3.Op) (*clientv3.TxnResponse, error) {
	var resp *clientv3.TxnResponse
	err := s.rpc(ctx, func(ctx context.Context) (err error) {
		resp, err = s.client.Txn(ctx).If(cmps...).Then(then...).Else(els...).Commit()
		return err
	})
	return resp, err
}

// rangeAll calls fn for every key in [key, end) at revision rev, in key order, reading
// PageSize keys per request. first, when not nil, is the first page, already read.
func (s *Store) rangeAll(ctx context.Context, key, end string, rev int64, first *clientv3.GetResponse, fn func(kv *mvccpb.KeyValue) error) error {
	resp := first
	for {
		if resp == nil {
			var err error
			resp, err = s.get(ctx, key, clientv3.WithRange(end), clientv3.WithRev(rev), clientv3.WithLimit(int64(s.opts.PageSize)))
			if err != nil {
				return err
			}
		}
		for _, kv := range resp.Kvs {
			if err := fn(kv); err != nil {
				return err
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return nil
		}
		key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
		resp = nil
	}
}

// firstPage is the read of the first page of [key, end), for a transaction.
func (s *Store) firstPage(key, end string) clientv3.Op {
	return clientv3.OpGet(key, clientv3.WithRange(end), clientv3.WithLimit(int64(s.opts.PageSize)))
}

// retry waits before attempt (counted from 1) of a write that lost a race, and reports
// whether another attempt is allowed; the wait grows from about 1 ms to about 64 ms,
// with jitter so that racing writers spread out. It returns ctx.Err() when ctx ends
// first, and an error wrapping ErrConflict when the retries are used up.
func (s *Store) retry(ctx context.Context, attempt int, what string) error {
	if attempt > s.opts.ConflictRetries {
		return fmt.Errorf("%s: lost to concurrent writers %d times: %w", what, attempt, operations.ErrConflict)
	}
	d := time.Millisecond << min(attempt-1, 6)
	d = d/2 + rand.N(d)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// ownerKey returns o without its UID: the owner a record's key names.
func ownerKey(o operations.Owner) operations.Owner {
	return operations.Owner{Kind: o.Kind, Name: o.Name}
}

// maxRunRecord is the largest run record the store writes: a run is written twice (its
// record and its phase index entry) in one request.
func (s *Store) maxRunRecord() int { return s.opts.budget()/2 - 1024 }

// CreateRun stores a new run. It fails with an error wrapping [operations.ErrExists] when
// the owner has a run, with the error of [operations.Run.Validate], with
// [operations.ErrInvalid] when its record exceeds the store's limit (see the package
// documentation), with [ErrUnavailable], or with ctx.Err(). Nothing is written when it
// fails, but for the ambiguity [ErrUnavailable] describes.
func (s *Store) CreateRun(ctx context.Context, r operations.Run) error {
	if err := r.Validate(); err != nil {
		return fmt.Errorf("create run: %w", err)
	}
	val, err := encodeRun(&r)
	if err != nil {
		return fmt.Errorf("create run: %w", err)
	}
	rk := s.keys.run(r.Owner)
	if n := len(rk) + len(val); n > s.maxRunRecord() {
		return fmt.Errorf("create run %s: record of %d bytes exceeds the store's limit of %d: %w", r.Owner, n, s.maxRunRecord(), operations.ErrInvalid)
	}
	ops := s.keys.ops(r.Owner)
	resp, err := s.txn(ctx,
		[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(rk), "=", 0)},
		[]clientv3.Op{
			clientv3.OpPut(rk, string(val)),
			clientv3.OpPut(s.keys.phase(r.Phase)+runID(r.Owner), string(val)),
			clientv3.OpPut(ops+keyMeta, string(encodeMeta(meta{Next: 1}))),
			// Clears what a writer that lost a race with the deletion of an earlier run
			// of this name may have staged since.
			clientv3.OpDelete(ops+dirStaged, clientv3.WithPrefix()),
		}, nil)
	switch {
	case err != nil:
		return fmt.Errorf("create run %s: %w", r.Owner, err)
	case !resp.Succeeded:
		return fmt.Errorf("create run %s: %w", r.Owner, operations.ErrExists)
	}
	return nil
}
