package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/itemops/itemops/operations"
)

// applyParallel is how many transactions of one staged batch are in flight at once.
const applyParallel = 8

// A hookError is the error of a test hook: the call stops there, as if its process died.
type hookError struct{ err error }

func (e hookError) Error() string { return "test hook: " + e.err.Error() }
func (e hookError) Unwrap() error { return e.err }

func callHook[T any](h func(T) error, arg T) error {
	if h == nil {
		return nil
	}
	if err := h(arg); err != nil {
		return hookError{err}
	}
	return nil
}

// commitStaged writes the batch p, too large for one transaction, planned from st:
//
//  1. Its mutations are encoded in chunks that each fit in one request, and every chunk
//     but the last is written under staged/<batch>/. No reader looks there.
//  2. One transaction writes the last chunk and the metadata, naming the batch and its
//     number of chunks, if the metadata is still what st read. This is the commit: from
//     here on the batch is part of the run, and before it nothing of it is.
//  3. The batch is applied (rollForward), by this call or, if it stops, by any later one.
//
// Readers that find a batch named in the metadata apply it before they read, so none
// sees part of it. Chunks of a batch that is never committed (its writer lost the race
// or died) are deleted by the run's next write, or with the run. Any transaction that
// deletes them also rewrites the metadata, so a writer that commits finds all its chunks
// in place. commitStaged reports false when the metadata changed since st.
func (s *Store) commitStaged(ctx context.Context, o operations.Owner, p batchPlan, st metaState) (bool, error) {
	prefix := s.keys.ops(o)
	metaKey := prefix + keyMeta
	batch := strconv.FormatUint(rand.Uint64(), 36)
	dir := prefix + dirStaged + batch + "/"
	chunks := s.chunks(p.muts)
	last := len(chunks) - 1
	err := s.parallel(ctx, last, func(ctx context.Context, i int) error {
		if _, err := s.txn(ctx, nil, []clientv3.Op{clientv3.OpPut(dir+seqKey(uint64(i)), string(chunks[i]))}, nil); err != nil {
			return err
		}
		return callHook(s.hooks.afterStage, i)
	})
	if err != nil {
		return false, err
	}
	m := p.meta
	m.Batch, m.Chunks = batch, len(chunks)
	resp, err := s.txn(ctx,
		[]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(metaKey), "=", st.modRev)},
		[]clientv3.Op{clientv3.OpPut(dir+seqKey(uint64(last)), string(chunks[last])), clientv3.OpPut(metaKey, string(encodeMeta(m)))},
		nil)
	if err != nil || !resp.Succeeded {
		return false, err
	}
	if err := callHook(s.hooks.afterCommit, struct{}{}); err != nil {
		return true, err
	}
	// The batch is committed. Applying it is left to the next reader or writer when
	// this call cannot finish it, so its failure does not fail the call.
	committed := metaState{m: m, modRev: resp.Header.Revision, rev: resp.Header.Revision}
	if err := s.rollForward(ctx, o, committed); errors.As(err, new(hookError)) {
		return true, err
	}
	return true, nil
}

// chunks encodes muts in chunks of at most chunkLimit bytes.
func (s *Store) chunks(muts []mutation) [][]byte {
	limit := s.chunkLimit()
	var out [][]byte
	cur := []byte{chunkVersion}
	for _, m := range muts {
		if len(cur) > 1 && len(cur)+m.encodedSize() > limit {
			out = append(out, cur)
			cur = make([]byte, 1, len(cur))
			cur[0] = chunkVersion
		}
		cur = appendMutation(cur, m)
	}
	return append(out, cur)
}

// rollForward applies the committed batch that st names, chunk by chunk, in
// transactions that each hold as many of its writes as etcd takes, and then, in one
// transaction, clears the batch from the metadata and deletes its chunks. Every
// transaction is made only if the metadata is still the one that commits the batch, so
// several callers may apply one batch at once, and a caller that comes late (the batch
// is done, or the run deleted) writes nothing. Writes of a batch touch distinct keys and
// are the same whoever makes them, so applying is idempotent.
func (s *Store) rollForward(ctx context.Context, o operations.Owner, st metaState) error {
	prefix := s.keys.ops(o)
	metaKey := prefix + keyMeta
	unchanged := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(metaKey), "=", st.modRev)}
	dir := prefix + dirStaged + st.m.Batch + "/"
	for i := range st.m.Chunks {
		resp, err := s.get(ctx, dir+seqKey(uint64(i)))
		if err != nil {
			return err
		}
		if len(resp.Kvs) == 0 {
			cur, err := s.get(ctx, metaKey)
			switch {
			case err != nil:
				return err
			case len(cur.Kvs) == 0 || cur.Kvs[0].ModRevision != st.modRev:
				return nil // applied by another caller, or the run is gone
			}
			return fmt.Errorf("batch %s: chunk %d of %d is missing: %w", st.m.Batch, i, st.m.Chunks, ErrCorrupt)
		}
		muts, err := decodeChunk(resp.Kvs[0].Value)
		if err != nil {
			return fmt.Errorf("batch %s: chunk %d: %w", st.m.Batch, i, err)
		}
		groups := s.groups(prefix, muts, len(metaKey)+opOverhead)
		err = s.parallel(ctx, len(groups), func(ctx context.Context, g int) error {
			resp, err := s.txn(ctx, unchanged, groups[g], nil)
			if err != nil {
				return err
			}
			if !resp.Succeeded {
				return errMoved
			}
			return nil
		})
		if errors.Is(err, errMoved) {
			return nil // applied by another caller, or the run is gone
		}
		if err != nil {
			return err
		}
		if err := callHook(s.hooks.afterApply, i); err != nil {
			return err
		}
	}
	m := st.m
	m.Batch, m.Chunks = "", 0
	_, err := s.txn(ctx, unchanged, []clientv3.Op{
		clientv3.OpPut(metaKey, string(encodeMeta(m))),
		clientv3.OpDelete(prefix+dirStaged, clientv3.WithPrefix()),
	}, nil)
	return err
}

// errMoved stops the application of a batch that another caller finished.
var errMoved = errors.New("batch applied by another caller")

// groups splits muts into transactions of at most MaxTxnOps operations and the request
// budget, less reserve bytes for the compare.
func (s *Store) groups(prefix string, muts []mutation, reserve int) [][]clientv3.Op {
	var out [][]clientv3.Op
	size := 0
	for _, m := range muts {
		n := m.size(prefix)
		if len(out) == 0 || len(out[len(out)-1]) == s.opts.MaxTxnOps || size+n > s.opts.budget()-reserve {
			out = append(out, make([]clientv3.Op, 0, min(len(muts), s.opts.MaxTxnOps)))
			size = 0
		}
		out[len(out)-1] = append(out[len(out)-1], m.op(prefix))
		size += n
	}
	return out
}

// parallel calls f(ctx, i) for i in [0, n), applyParallel at a time, and returns the
// first error; the ctx of the other calls ends with it.
func (s *Store) parallel(ctx context.Context, n int, f func(ctx context.Context, i int) error) error {
	if n == 0 {
		return nil
	}
	if n == 1 {
		return f(ctx, 0)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex // guards first and next
		first    error
		next     int
		parallel = min(n, applyParallel)
	)
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				stop := first != nil || i >= n
				mu.Unlock()
				if stop {
					return
				}
				if err := f(ctx, i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
						cancel()
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}
