package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// GetRun returns the run of o, or fails with an error wrapping [operations.ErrNotFound]
// (also when o could not have a run, such as an empty name), [ErrCorrupt],
// [ErrUnavailable], or ctx.Err().
func (s *Store) GetRun(ctx context.Context, o operations.Owner) (operations.Run, error) {
	if o.Validate() != nil {
		return operations.Run{}, fmt.Errorf("get run %s: %w", o, operations.ErrNotFound)
	}
	resp, err := s.get(ctx, s.keys.run(o))
	if err == nil && len(resp.Kvs) == 0 {
		err = operations.ErrNotFound
	}
	if err != nil {
		return operations.Run{}, fmt.Errorf("get run %s: %w", o, err)
	}
	return decodeRun(ownerKey(o), resp.Kvs[0].Value)
}

// UpdateRun applies update to a copy of the run of o and writes the result in a
// transaction that succeeds only if the run is unchanged since it was read. When another
// writer changed it meanwhile, UpdateRun reads it again and calls update again, up to
// [Options.ConflictRetries] times, then fails with an error wrapping
// [operations.ErrConflict]; so update may be called more than once and must have no
// effect outside the run it is given. Calls in one process for one run wait for each
// other, so they do not conflict; update must not call the Store for the same run.
//
// UpdateRun fails with an error wrapping [operations.ErrNotFound] when o has no run, with
// update's own error, or with the error of [operations.ValidateRunUpdate]; then nothing
// is written. It also fails with [ErrUnavailable], [ErrCorrupt] or ctx.Err(). The
// returned run shares no memory with what update was given.
func (s *Store) UpdateRun(ctx context.Context, o operations.Owner, update func(*operations.Run) error) (operations.Run, error) {
	if o.Validate() != nil {
		return operations.Run{}, fmt.Errorf("update run %s: %w", o, operations.ErrNotFound)
	}
	rk := s.keys.run(o)
	unlock, err := s.locks.lock(ctx, rk)
	if err != nil {
		return operations.Run{}, fmt.Errorf("update run %s: %w", o, err)
	}
	defer unlock()
	for attempt := 1; ; attempt++ {
		after, done, err := s.updateOnce(ctx, o, rk, update)
		if err != nil || done {
			return after, err
		}
		if err := s.retry(ctx, attempt, "update run "+o.String()); err != nil {
			return operations.Run{}, err
		}
	}
}

// updateOnce is one attempt of UpdateRun; done is false when another writer won the race.
func (s *Store) updateOnce(ctx context.Context, o operations.Owner, rk string, update func(*operations.Run) error) (operations.Run, bool, error) {
	resp, err := s.get(ctx, rk)
	if err == nil && len(resp.Kvs) == 0 {
		err = operations.ErrNotFound
	}
	if err != nil {
		return operations.Run{}, false, fmt.Errorf("update run %s: %w", o, err)
	}
	kv := resp.Kvs[0]
	before, err := decodeRun(ownerKey(o), kv.Value)
	if err != nil {
		return operations.Run{}, false, err
	}
	after := before.Clone()
	if err := update(&after); err != nil {
		return operations.Run{}, false, err
	}
	if err := operations.ValidateRunUpdate(before, after); err != nil {
		return operations.Run{}, false, err
	}
	val, err := encodeRun(&after)
	if err == nil && len(rk)+len(val) > s.maxRunRecord() {
		err = fmt.Errorf("record of %d bytes exceeds the store's limit of %d: %w", len(rk)+len(val), s.maxRunRecord(), operations.ErrInvalid)
	}
	if err != nil {
		return operations.Run{}, false, fmt.Errorf("update run %s: %w", o, err)
	}
	id := runID(o)
	ops := []clientv3.Op{clientv3.OpPut(rk, string(val)), clientv3.OpPut(s.keys.phase(after.Phase)+id, string(val))}
	if after.Phase != before.Phase {
		ops = append(ops, clientv3.OpDelete(s.keys.phase(before.Phase)+id))
	}
	tr, err := s.txn(ctx, []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(rk), "=", kv.ModRevision)}, ops, nil)
	if err != nil {
		return operations.Run{}, false, fmt.Errorf("update run %s: %w", o, err)
	}
	return after.Clone(), tr.Succeeded, nil
}

// ListRuns returns the runs f selects, by kind (Backup first), then name in byte order.
// When f names phases it reads only the phase index entries of those phases, so its
// cost follows the runs it returns. A long list is read in pages, all at one revision,
// so it is a consistent snapshot.
//
// It fails with [ErrCorrupt], [ErrUnavailable] or ctx.Err().
func (s *Store) ListRuns(ctx context.Context, f operations.RunFilter) ([]operations.Run, error) {
	kp := kindByte(f.Kind)
	if f.Kind != "" && kp == "" {
		if err := s.ready(ctx); err != nil {
			return nil, fmt.Errorf("list runs: %w", err)
		}
		return nil, nil // no run has that kind
	}
	var prefixes []string // each holds whole run keys after it
	if len(f.Phases) == 0 {
		prefixes = []string{s.keys.runs()}
	} else {
		seen := make(map[phase.Phase]bool, len(f.Phases))
		for _, p := range f.Phases {
			if seen[p] || p == "" || strings.Contains(string(p), "/") {
				continue // an impossible phase selects nothing
			}
			seen[p] = true
			prefixes = append(prefixes, s.keys.phase(p))
		}
	}
	for attempt := 1; ; attempt++ {
		runs, err := s.listRuns(ctx, prefixes, kp)
		if errors.Is(err, rpctypes.ErrCompacted) {
			if err := s.retry(ctx, attempt, "list runs"); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list runs: %w", err)
		}
		return runs, nil
	}
}

// listRuns reads the runs under each of prefixes + kp at one revision.
func (s *Store) listRuns(ctx context.Context, prefixes []string, kp string) ([]operations.Run, error) {
	if len(prefixes) == 0 {
		return nil, s.ready(ctx)
	}
	type entry struct {
		id  string
		run operations.Run
	}
	var out []entry
	var rev int64
	for start := 0; start < len(prefixes); start += s.opts.MaxTxnOps {
		batch := prefixes[start:min(start+s.opts.MaxTxnOps, len(prefixes))]
		ops := make([]clientv3.Op, len(batch))
		for i, p := range batch {
			ops[i] = s.firstPage(p+kp, clientv3.GetPrefixRangeEnd(p+kp))
			if rev != 0 {
				ops[i] = clientv3.OpGet(p+kp, clientv3.WithRange(clientv3.GetPrefixRangeEnd(p+kp)), clientv3.WithLimit(int64(s.opts.PageSize)), clientv3.WithRev(rev))
			}
		}
		resp, err := s.txn(ctx, nil, ops, nil)
		if err != nil {
			return nil, err
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for i, p := range batch {
			first := (*clientv3.GetResponse)(resp.Responses[i].GetResponseRange())
			err := s.rangeAll(ctx, p+kp, clientv3.GetPrefixRangeEnd(p+kp), rev, first, func(kv *mvccpb.KeyValue) error {
				id := string(kv.Key[len(p):])
				o, err := ownerOf(id)
				if err != nil {
					return err
				}
				r, err := decodeRun(o, kv.Value)
				if err != nil {
					return err
				}
				out = append(out, entry{id, r})
				return nil
			})
			if err != nil {
				return nil, err
			}
		}
	}
	if len(prefixes) > 1 {
		slices.SortFunc(out, func(a, b entry) int { return strings.Compare(a.id, b.id) })
	}
	runs := make([]operations.Run, len(out))
	for i := range out {
		runs[i] = out[i].run
	}
	return runs, nil
}

// DeleteRun deletes the run of o and all its operations in one transaction, or fails
// with an error wrapping [operations.ErrNotFound], [ErrCorrupt], [ErrUnavailable] or
// ctx.Err(). A claim on the run is left to its holder and its lease.
func (s *Store) DeleteRun(ctx context.Context, o operations.Owner) error {
	if o.Validate() != nil {
		return fmt.Errorf("delete run %s: %w", o, operations.ErrNotFound)
	}
	rk := s.keys.run(o)
	unlock, err := s.locks.lock(ctx, rk)
	if err != nil {
		return fmt.Errorf("delete run %s: %w", o, err)
	}
	defer unlock()
	for attempt := 1; ; attempt++ {
		resp, err := s.get(ctx, rk)
		if err == nil && len(resp.Kvs) == 0 {
			err = operations.ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("delete run %s: %w", o, err)
		}
		kv := resp.Kvs[0]
		r, err := decodeRun(ownerKey(o), kv.Value)
		if err != nil {
			return fmt.Errorf("delete run %s: %w", o, err)
		}
		tr, err := s.txn(ctx, []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(rk), "=", kv.ModRevision)}, []clientv3.Op{
			clientv3.OpDelete(rk),
			clientv3.OpDelete(s.keys.phase(r.Phase) + runID(o)),
			clientv3.OpDelete(s.keys.ops(o), clientv3.WithPrefix()),
		}, nil)
		if err != nil {
			return fmt.Errorf("delete run %s: %w", o, err)
		}
		if tr.Succeeded {
			return nil
		}
		if err := s.retry(ctx, attempt, "delete run "+o.String()); err != nil {
			return err
		}
	}
}
