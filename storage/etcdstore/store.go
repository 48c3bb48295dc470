package etcdstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/storage/claims"
	"github.com/itemops/itemops/storage/kv"
)

// formatName and schemaVersion are what the format key of every store holds. Version 1
// was the layout of etcdstore's own contract code, before the kv engine.
const (
	formatName    = "itemops.etcdstore"
	schemaVersion = 2
)

// A Store is an [operations.Store] kept in etcd under a key prefix, an
// [operations.RunClaimer] that lets several Monitors, in several processes, share its
// runs, an [operations.ClaimKeeper] whose claim sessions keep a Monitor's claims from
// pass to pass and balance the runs among the replicas ([Store.KeepClaims]), and an
// [operations.ClaimTaker] that frees at once the runs of the other replicas
// ([Store.TakeOverClaims]). It is safe for concurrent use; several Stores, in this
// process or others, may use the same prefix at once. Get one from [Open] and release it with [Store.Close].
// The zero Store has no client, and its methods fail with [ErrClosed].
//
// The methods of operations.Store are the engine's (package kv), which documents them.
// Beside its errors, each fails with [ErrUnavailable] when etcd does not answer (a write
// may then have been made, whole, or not at all) and with [ErrClosed] after Close.
type Store struct {
	*kv.Store // the engine; nil in the zero Store, whose methods then fail with ErrClosed
	b         *backend
	prefix    string // "" or ends with "/"

	// claims is the claim policy, over the keys under claims/ and replicas/.
	claims *claims.Claimer
	// sessMu guards sess, the lease that holds this store's claims.
	sessMu sync.Mutex
	sess   *session

	closeOnce sync.Once
	closeErr  error
}

var (
	_ operations.Store      = (*Store)(nil)
	_ operations.ClaimTaker = (*Store)(nil)
)

// Open returns the store under prefix in the etcd cluster that client reaches. The client
// is the caller's: its endpoints, TLS and credentials are the caller's choice, Open never
// dials on its own, and [Store.Close] leaves the client open. A prefix that does not end
// with "/" gets one; the empty prefix puts the store at the root of the key space. A nil
// o means the defaults of [Options].
//
// The first Open of a prefix writes its format marker. Open fails with an error wrapping
// [ErrNotStore] when the prefix holds other keys but no marker, [ErrSchemaVersion] when
// the marker is of another schema version (see the package documentation for a store
// of schema 1), [ErrUnavailable] when etcd does not answer, or ctx.Err(); then nothing
// is written. It fails with an error naming the options to set when the server takes
// fewer operations per transaction than [Options.MaxTxnOps].
func Open(ctx context.Context, client *clientv3.Client, prefix string, o *Options) (*Store, error) {
	if client == nil {
		return nil, errors.New("etcdstore: open: nil client")
	}
	opts, err := o.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("etcdstore: open: %w", err)
	}
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	s := &Store{b: newBackend(client, prefix+"kv/", opts), prefix: prefix}
	if lim := s.b.Limits(); lim.MaxBytes < minRequestBytes/2 {
		return nil, fmt.Errorf("etcdstore: open: a prefix of %d bytes in each of Options.MaxTxnOps (%d) operations leaves %d bytes of Options.MaxRequestBytes (%d) for keys and values: use a shorter prefix",
			len(prefix), opts.MaxTxnOps, lim.MaxBytes, opts.MaxRequestBytes)
	}
	if err := s.checkTxnOps(ctx); err != nil {
		return nil, fmt.Errorf("etcdstore: open %q: %w", prefix, err)
	}
	if err := s.checkFormat(ctx); err != nil {
		return nil, fmt.Errorf("etcdstore: open %q: %w", prefix, err)
	}
	eng, err := kv.Open(ctx, s.b, kv.WithRetries(opts.ConflictRetries+1))
	if err != nil {
		return nil, fmt.Errorf("etcdstore: open %q: %w", prefix, err)
	}
	s.Store = eng
	s.claims = claims.New(claimBackend{s})
	return s, nil
}

type formatMarker struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
}

// checkFormat checks the format marker, writing it under an empty prefix.
func (s *Store) checkFormat(ctx context.Context) error {
	key := s.prefix + "format"
	want, _ := json.Marshal(formatMarker{Format: formatName, Version: schemaVersion})
	for range 3 {
		resp, err := s.txn(ctx, nil, []clientv3.Op{
			clientv3.OpGet(key),
			clientv3.OpGet(s.prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithLimit(1)),
		})
		if err != nil {
			return err
		}
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			var m formatMarker
			switch err := json.Unmarshal(kvs[0].Value, &m); {
			case err != nil, m.Format != formatName:
				return fmt.Errorf("%w: %s holds %q", ErrNotStore, key, kvs[0].Value)
			case m.Version == 1:
				return fmt.Errorf("%w: the store has schema version 1, of an earlier itemops release; this release reads version %d and does not convert it: "+
					"let that release finish the runs it holds, then delete the prefix (etcdctl del --prefix %q) or open the store under a new prefix", ErrSchemaVersion, schemaVersion, s.prefix)
			case m.Version != schemaVersion:
				return fmt.Errorf("%w: the store has schema version %d, this release reads version %d", ErrSchemaVersion, m.Version, schemaVersion)
			}
			return nil
		}
		if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) > 0 {
			return fmt.Errorf("%w: the prefix holds %q and no %s", ErrNotStore, kvs[0].Key, key)
		}
		resp, err = s.txn(ctx, []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)},
			[]clientv3.Op{clientv3.OpPut(key, string(want))})
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

// checkTxnOps asks the server for a transaction of Options.MaxTxnOps compares, which it
// refuses when its --max-txn-ops is lower. (Its --max-request-bytes cannot be probed as
// cheaply: a request that large would be written to etcd's log. A server that takes less
// than Options.MaxRequestBytes refuses the first commit that large, with the same
// advice.)
func (s *Store) checkTxnOps(ctx context.Context) error {
	cmps := make([]clientv3.Cmp, s.b.opts.MaxTxnOps)
	for i := range cmps {
		cmps[i] = clientv3.Compare(clientv3.Version(s.prefix+"format"), ">", 0)
	}
	_, err := s.txn(ctx, cmps, nil)
	return err
}

func (s *Store) txn(ctx context.Context, cmps []clientv3.Cmp, then []clientv3.Op) (*clientv3.TxnResponse, error) {
	var resp *clientv3.TxnResponse
	err := s.b.rpc(ctx, func(ctx context.Context) (err error) {
		resp, err = s.b.client.Txn(ctx).If(cmps...).Then(then...).Commit()
		return err
	})
	return resp, err
}

// Close gives up the runs this store has claimed (it revokes the lease that holds its
// claims, and ends the claim sessions of [Store.KeepClaims] that their Monitors have not
// ended, their watches of the members included) and makes every later call fail with
// [ErrClosed]. It does not close the etcd client, which is the caller's. Only the first
// call does anything; later calls return what it returned. Close waits at most [Options.RequestTimeout] for etcd; when etcd does
// not answer, the claims end by themselves after [Options.ClaimTTL].
func (s *Store) Close() error {
	if s.Store == nil {
		return nil
	}
	s.closeOnce.Do(func() {
		s.b.closed.Store(true)
		s.claims.Close() // the claim sessions a Monitor did not end: revoking the lease ends their keys
		s.sessMu.Lock()
		sess := s.sess
		s.sess = nil
		s.sessMu.Unlock()
		if sess == nil {
			return
		}
		sess.stop()
		ctx, cancel := context.WithTimeout(context.Background(), s.b.opts.RequestTimeout)
		defer cancel()
		if _, err := s.b.client.Revoke(ctx, sess.id); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			s.closeErr = fmt.Errorf("etcdstore: close: revoke the claims lease: %w", s.b.translate(context.Background(), ctx, err))
		}
	})
	return s.closeErr
}
