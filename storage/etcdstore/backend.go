package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/storage/kv"
)

// backend is the kv.Backend the engine runs on: every key lives under prefix in the
// etcd cluster that client reaches, every Commit is one etcd transaction, and a key's
// version is its ModRevision. It is safe for concurrent use.
type backend struct {
	client *clientv3.Client
	prefix string // prepended to every key; "" or ends with "/"
	opts   Options
	closed atomic.Bool
}

var _ kv.Backend = (*backend)(nil)

// newBackend returns the backend of the keys under prefix; opts must have its defaults.
func newBackend(client *clientv3.Client, prefix string, opts Options) *backend {
	return &backend{client: client, prefix: prefix, opts: opts}
}

// Limits are the options' limits, less what the prefix and the framing of each
// operation add to a request.
func (b *backend) Limits() kv.Limits {
	return kv.Limits{
		MaxOps:   b.opts.MaxTxnOps,
		MaxBytes: b.opts.MaxRequestBytes - requestOverhead - b.opts.MaxTxnOps*(len(b.prefix)+opOverhead),
	}
}

// Read calls fn with a reader pinned to one revision: the revision of its first request.
// When etcd compacts that revision away before fn has read all it asks for, the read
// fails with an error wrapping [operations.ErrConflict] (the caller may simply try
// again, at a newer revision); fn is called once.
func (b *backend) Read(ctx context.Context, fn func(kv.Reader) error) error {
	if err := b.ready(ctx); err != nil {
		return err
	}
	return fn(&reader{b: b})
}

// Commit writes in one etcd transaction, under a compare of each condition's key's
// ModRevision.
func (b *backend) Commit(ctx context.Context, conds []kv.Condition, writes []kv.Write) error {
	if err := b.ready(ctx); err != nil {
		return err
	}
	if err := checkDuplicates(conds); err != nil {
		return err
	}
	if err := b.Limits().Check(conds, writes); err != nil {
		return fmt.Errorf("etcdstore: %w", err)
	}
	cmps := make([]clientv3.Cmp, len(conds))
	for i, c := range conds {
		cmps[i] = clientv3.Compare(clientv3.ModRevision(b.key(c.Key)), "=", int64(c.Version))
	}
	ops := make([]clientv3.Op, len(writes))
	for i, w := range writes {
		switch {
		case !w.Delete:
			ops[i] = clientv3.OpPut(b.key(w.Key), string(w.Value))
		case len(w.End) > 0:
			ops[i] = clientv3.OpDelete(b.key(w.Key), clientv3.WithRange(b.key(w.End)))
		default:
			ops[i] = clientv3.OpDelete(b.key(w.Key))
		}
	}
	var resp *clientv3.TxnResponse
	err := b.rpc(ctx, func(ctx context.Context) (err error) {
		resp, err = b.client.Txn(ctx).If(cmps...).Then(ops...).Commit()
		return err
	})
	switch {
	case err != nil:
		return err
	case !resp.Succeeded:
		return kv.ErrConditionFailed
	}
	return nil
}

// checkDuplicates refuses conditions that name one key twice, which etcd would take
// (it refuses writes of one key twice itself).
func checkDuplicates(conds []kv.Condition) error {
	if len(conds) < 2 {
		return nil
	}
	seen := make(map[string]bool, len(conds))
	for _, c := range conds {
		if seen[string(c.Key)] {
			return fmt.Errorf("etcdstore: commit with two conditions on key %q", c.Key)
		}
		seen[string(c.Key)] = true
	}
	return nil
}

func (b *backend) key(k []byte) string { return b.prefix + string(k) }

// ready returns ErrClosed after close, else ctx.Err().
func (b *backend) ready(ctx context.Context) error {
	if b.closed.Load() {
		return ErrClosed
	}
	return ctx.Err()
}

// rpc runs f with a context that ends after RequestTimeout and requires etcd to have a
// leader, and translates its error.
func (b *backend) rpc(ctx context.Context, f func(ctx context.Context) error) error {
	if err := b.ready(ctx); err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), b.opts.RequestTimeout)
	defer cancel()
	if err := f(rctx); err != nil {
		return b.translate(ctx, rctx, err)
	}
	return nil
}

// translate turns the error of a request made with rctx, derived from the caller's ctx,
// into what the store returns: ctx's own error when ctx ended, ErrUnavailable when etcd
// could not answer, else err.
func (b *backend) translate(ctx, rctx context.Context, err error) error {
	var ee rpctypes.EtcdError
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case b.client.Ctx().Err() != nil:
		return fmt.Errorf("%w: the etcd client is closed", ErrUnavailable)
	case rctx.Err() != nil:
		return fmt.Errorf("%w: no answer within %s (Options.RequestTimeout)", ErrUnavailable, b.opts.RequestTimeout)
	case errors.As(err, &ee) && ee.Code() == codes.Unavailable, status.Code(err) == codes.Unavailable:
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	case errors.Is(err, rpctypes.ErrTooManyOps), errors.Is(err, rpctypes.ErrRequestTooLarge):
		return fmt.Errorf("%w (Options.MaxTxnOps is %d and Options.MaxRequestBytes %d: set them to the server's --max-txn-ops and --max-request-bytes)",
			err, b.opts.MaxTxnOps, b.opts.MaxRequestBytes)
	case errors.Is(err, rpctypes.ErrCompacted):
		return fmt.Errorf("etcd compacted the revision of a read before it ended: %w: %w", operations.ErrConflict, err)
	}
	return err
}

// reader reads at the revision of its first request.
type reader struct {
	b   *backend
	rev int64 // 0 until the first request
}

func (r *reader) get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	if r.rev != 0 {
		opts = append(opts, clientv3.WithRev(r.rev))
	}
	var resp *clientv3.GetResponse
	err := r.b.rpc(ctx, func(ctx context.Context) (err error) {
		resp, err = r.b.client.Get(ctx, key, opts...)
		return err
	})
	if err != nil {
		return nil, err
	}
	if r.rev == 0 {
		r.rev = resp.Header.Revision
	}
	return resp, nil
}

func (r *reader) Get(ctx context.Context, key []byte) ([]byte, kv.Version, error) {
	resp, err := r.get(ctx, r.b.key(key))
	if err != nil || len(resp.Kvs) == 0 {
		return nil, 0, err
	}
	return value(resp.Kvs[0].Value), kv.Version(resp.Kvs[0].ModRevision), nil
}

// value is v, or an empty value for nil: etcd returns nil for an empty value, which a
// reader would take for an absent key.
func value(v []byte) []byte {
	if v == nil {
		return []byte{}
	}
	return v
}

// Scan reads [start, end) in pages of Options.PageSize keys.
func (r *reader) Scan(ctx context.Context, start, end []byte, fn func(key, value []byte, v kv.Version) error) error {
	from, to := r.b.key(start), r.b.key(end)
	if len(end) == 0 {
		to = clientv3.GetPrefixRangeEnd(r.b.prefix)
		if r.b.prefix == "" {
			to = "\x00" // the whole key space
		}
	}
	for {
		resp, err := r.get(ctx, from, clientv3.WithRange(to), clientv3.WithLimit(int64(r.b.opts.PageSize)))
		if err != nil {
			return err
		}
		for _, e := range resp.Kvs {
			if err := fn(e.Key[len(r.b.prefix):], value(e.Value), kv.Version(e.ModRevision)); err != nil {
				return err
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}
