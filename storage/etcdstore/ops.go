package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/itemops/itemops/operations"
)

// metaState is a run's operations metadata as read at a revision.
type metaState struct {
	m      meta
	modRev int64 // the metadata's mod revision: the version of the run's operations
	rev    int64 // the revision it was read at
}

// readMeta reads the operations metadata of the run of o, or fails with ErrNotFound.
func (s *Store) readMeta(ctx context.Context, o operations.Owner) (metaState, error) {
	resp, err := s.get(ctx, s.keys.ops(o)+keyMeta)
	if err != nil {
		return metaState{}, err
	}
	if len(resp.Kvs) == 0 {
		return metaState{}, fmt.Errorf("run %w", operations.ErrNotFound)
	}
	return metaOf(resp.Kvs[0], resp.Header.Revision)
}

func metaOf(kv *mvccpb.KeyValue, rev int64) (metaState, error) {
	m, err := decodeMeta(kv.Value)
	if err != nil {
		return metaState{}, err
	}
	return metaState{m: m, modRev: kv.ModRevision, rev: rev}, nil
}

// An idEntry is what the ID index says of a stored operation.
type idEntry struct {
	seq   uint64
	phase operations.OperationPhase
}

// chunkLimit is the largest chunk of a staged batch: with its key, and the metadata that
// the commit writes beside the last one, it fits in one request.
func (s *Store) chunkLimit() int { return s.opts.budget() - 2*len(s.keys.prefix) - 1024 }

// maxMutation is the largest write of one record (or index entry) a batch may hold.
func (s *Store) maxMutation(o operations.Owner) int {
	return s.chunkLimit() - 1 - 2*len(s.keys.ops(o))
}

// PutOperations writes ops, all of o, as one batch: every operation or none, and no
// reader ever sees part of it. New IDs are appended in the order of ops; known IDs are
// replaced where they stand.
//
// A batch that fits in one etcd transaction ([Options.MaxTxnOps],
// [Options.MaxRequestBytes]) is written in one. A larger one is staged in chunks, then
// committed by one small transaction, then applied; see the package documentation. Either
// way the batch is written only if no other batch was written to the run since it was
// validated; otherwise it is validated and tried again, up to [Options.ConflictRetries]
// times, then PutOperations fails with [operations.ErrConflict]. Calls in one process
// for one run wait for each other.
//
// It fails, writing nothing, with the error of [operations.ValidateBatch] (wrapping
// [operations.ErrInvalid]; so is a record larger than the store's limit), with an error
// wrapping [operations.ErrNotFound] when o has no run, with the error of
// [operations.ValidateOperationUpdate] (wrapping [operations.ErrConflict]) when the batch
// would revive a finished operation, or with [ErrUnavailable], [ErrCorrupt] or ctx.Err().
// Once a staged batch is committed PutOperations returns nil, even if its ctx ends while
// it applies the batch: the batch is then visible whole to every reader, and the next
// call that touches the run's operations finishes applying it. An empty batch writes
// nothing and succeeds when the run exists.
func (s *Store) PutOperations(ctx context.Context, o operations.Owner, ops []operations.Operation) error {
	if err := operations.ValidateBatch(o, ops); err != nil {
		return fmt.Errorf("put operations of %s: %w", o, err)
	}
	recs, err := s.encodeBatch(o, ops)
	if err != nil {
		return fmt.Errorf("put operations of %s: %w", o, err)
	}
	unlock, err := s.locks.lock(ctx, s.keys.ops(o))
	if err != nil {
		return fmt.Errorf("put operations of %s: %w", o, err)
	}
	defer unlock()
	// Applying another writer's committed batch is progress, not a lost race: it is
	// bounded apart, more loosely.
	for attempt, helped := 1, 0; ; {
		done, rolled, err := s.putOnce(ctx, o, ops, recs)
		if errors.Is(err, rpctypes.ErrCompacted) {
			err = nil // the revision the batch was validated at is gone: validate again
		}
		switch {
		case err != nil:
			return fmt.Errorf("put operations of %s: %w", o, err)
		case done:
			return nil
		case rolled && helped < 4*(s.opts.ConflictRetries+1):
			helped++
			continue
		}
		if err := s.retry(ctx, attempt, "put operations of "+o.String()); err != nil {
			return err
		}
		attempt++
	}
}

// encodeBatch encodes the records of ops, and refuses any too large for the store.
func (s *Store) encodeBatch(o operations.Owner, ops []operations.Operation) ([][]byte, error) {
	recs := make([][]byte, len(ops))
	limit := s.maxMutation(o)
	for i := range ops {
		rec, err := encodeOperation(&ops[i])
		if err != nil {
			return nil, fmt.Errorf("batch item %d: %w", i, err)
		}
		rm := mutation{key: dirOpen + seqKey(0), val: rec}
		im := mutation{key: dirIDs + ops[i].ID, val: idValue(0, operations.OperationNew)}
		if n := max(rm.encodedSize(), im.encodedSize()); n > limit {
			return nil, fmt.Errorf("batch item %d: operation %q needs %d bytes, beyond the store's limit of %d for one record (Options.MaxRequestBytes): %w", i, ops[i].ID, n, limit, operations.ErrInvalid)
		}
		recs[i] = rec
	}
	return recs, nil
}

// putOnce is one attempt of PutOperations; done is false when the run's operations
// changed since they were read, and rolled is true when instead a committed batch had
// to be applied first.
func (s *Store) putOnce(ctx context.Context, o operations.Owner, ops []operations.Operation, recs [][]byte) (done, rolled bool, err error) {
	st, err := s.readMeta(ctx, o)
	if err != nil {
		return false, false, err
	}
	if st.m.Batch != "" {
		return false, true, s.rollForward(ctx, o, st)
	}
	if len(ops) == 0 {
		return true, false, nil
	}
	known, err := s.lookupIDs(ctx, o, st, ops)
	if err != nil {
		return false, false, err
	}
	p, err := plan(o, st.m, known, ops, recs)
	if err != nil {
		return false, false, err
	}
	done, err = s.commit(ctx, o, p, st)
	return done, false, err
}

// A batchPlan is what a batch writes: its mutations, and the metadata after it.
type batchPlan struct {
	muts []mutation
	meta meta
}

// plan validates ops against what the ID index says is stored (known) and returns the
// writes of the batch.
func plan(o operations.Owner, m meta, known map[string]idEntry, ops []operations.Operation, recs [][]byte) (batchPlan, error) {
	p := batchPlan{muts: make([]mutation, 0, 2*len(ops)), meta: m}
	for i := range ops {
		op := &ops[i]
		ph := op.Status.Phase
		e, ok := known[op.ID]
		if ok {
			before := operations.Operation{Owner: ownerKey(o), ID: op.ID, Status: operations.Status{Phase: e.phase}}
			if err := operations.ValidateOperationUpdate(before, *op); err != nil {
				return batchPlan{}, fmt.Errorf("batch item %d: %w", i, err)
			}
		} else {
			e = idEntry{seq: p.meta.Next}
			p.meta.Next++
			p.meta.Count++
		}
		if !ok || e.phase != ph {
			p.muts = append(p.muts, mutation{key: dirIDs + op.ID, val: idValue(e.seq, ph)})
		}
		if ok && !e.phase.Finished() && ph.Finished() {
			p.muts = append(p.muts, mutation{del: true, key: dirOpen + seqKey(e.seq)})
		}
		dir := dirOpen
		if ph.Finished() {
			dir = dirDone
		}
		p.muts = append(p.muts, mutation{key: dir + seqKey(e.seq), val: recs[i]})
	}
	return p, nil
}

// op returns m as an etcd operation on the keys of the run whose operations prefix is
// prefix.
func (m mutation) op(prefix string) clientv3.Op {
	if m.del {
		return clientv3.OpDelete(prefix + m.key)
	}
	return clientv3.OpPut(prefix+m.key, string(m.val))
}

// size is what m adds to a request.
func (m mutation) size(prefix string) int { return len(prefix) + len(m.key) + len(m.val) + opOverhead }

// commit writes the batch p, planned from st: in one transaction when it fits, else
// staged. It reports false when the run's operations changed since st.
func (s *Store) commit(ctx context.Context, o operations.Owner, p batchPlan, st metaState) (bool, error) {
	prefix := s.keys.ops(o)
	metaKey := prefix + keyMeta
	metaVal := encodeMeta(p.meta)
	size := len(metaKey) + len(metaVal) + len(prefix) + len(dirStaged) + 3*opOverhead
	for _, m := range p.muts {
		size += m.size(prefix)
	}
	if len(p.muts)+2 > s.opts.MaxTxnOps || size > s.opts.budget() {
		return s.commitStaged(ctx, o, p, st)
	}
	ops := make([]clientv3.Op, 0, len(p.muts)+2)
	for _, m := range p.muts {
		ops = append(ops, m.op(prefix))
	}
	ops = append(ops,
		clientv3.OpPut(metaKey, string(metaVal)),
		// What an abandoned staged batch left behind; see commitStaged.
		clientv3.OpDelete(prefix+dirStaged, clientv3.WithPrefix()))
	resp, err := s.txn(ctx, []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(metaKey), "=", st.modRev)}, ops, nil)
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}

// lookupIDs returns what the ID index held at st.rev for the IDs of ops: by point reads
// when the batch is small beside the run, else by reading the whole index.
func (s *Store) lookupIDs(ctx context.Context, o operations.Owner, st metaState, ops []operations.Operation) (map[string]idEntry, error) {
	known := make(map[string]idEntry)
	if st.m.Count == 0 {
		return known, nil
	}
	prefix := s.keys.ops(o) + dirIDs
	n := uint64(len(ops))
	if n*8 >= st.m.Count && n > 4*uint64(s.opts.MaxTxnOps) {
		want := make(map[string]bool, len(ops))
		for i := range ops {
			want[ops[i].ID] = true
		}
		err := s.rangeAll(ctx, prefix, clientv3.GetPrefixRangeEnd(prefix), st.rev, nil, func(kv *mvccpb.KeyValue) error {
			id := string(kv.Key[len(prefix):])
			if !want[id] {
				return nil
			}
			seq, ph, err := parseIDValue(id, kv.Value)
			known[id] = idEntry{seq, ph}
			return err
		})
		return known, err
	}
	// Point reads, as many per transaction as etcd takes.
	var groups [][]int // indexes into ops
	size := 0
	for i := range ops {
		k := len(prefix) + len(ops[i].ID) + opOverhead
		if len(groups) == 0 || len(groups[len(groups)-1]) == s.opts.MaxTxnOps || size+k > s.opts.budget() {
			groups = append(groups, nil)
			size = 0
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], i)
		size += k
	}
	var mu sync.Mutex // guards known
	err := s.parallel(ctx, len(groups), func(ctx context.Context, g int) error {
		gets := make([]clientv3.Op, len(groups[g]))
		for j, i := range groups[g] {
			gets[j] = clientv3.OpGet(prefix+ops[i].ID, clientv3.WithRev(st.rev))
		}
		resp, err := s.txn(ctx, nil, gets, nil)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		for j, i := range groups[g] {
			if kvs := resp.Responses[j].GetResponseRange().Kvs; len(kvs) > 0 {
				seq, ph, err := parseIDValue(ops[i].ID, kvs[0].Value)
				if err != nil {
					return err
				}
				known[ops[i].ID] = idEntry{seq, ph}
			}
		}
		return nil
	})
	return known, err
}

// GetOperation returns the operation id of o, or fails with an error wrapping
// [operations.ErrNotFound] (when o has no run or no such operation), [ErrCorrupt],
// [ErrUnavailable] or ctx.Err(). When a committed batch of the run is still being
// applied, GetOperation applies it first.
func (s *Store) GetOperation(ctx context.Context, o operations.Owner, id string) (operations.Operation, error) {
	if o.Validate() != nil || id == "" {
		return operations.Operation{}, fmt.Errorf("get operation %q of %s: %w", id, o, operations.ErrNotFound)
	}
	for attempt := 1; ; attempt++ {
		op, done, err := s.getOnce(ctx, o, id)
		if errors.Is(err, rpctypes.ErrCompacted) {
			err = nil
		}
		if err != nil {
			return operations.Operation{}, fmt.Errorf("get operation %q of %s: %w", id, o, err)
		}
		if done {
			return op, nil
		}
		if err := s.retry(ctx, attempt, fmt.Sprintf("get operation %q of %s", id, o)); err != nil {
			return operations.Operation{}, err
		}
	}
}

func (s *Store) getOnce(ctx context.Context, o operations.Owner, id string) (operations.Operation, bool, error) {
	prefix := s.keys.ops(o)
	resp, err := s.txn(ctx, nil, []clientv3.Op{clientv3.OpGet(prefix + keyMeta), clientv3.OpGet(prefix + dirIDs + id)}, nil)
	if err != nil {
		return operations.Operation{}, false, err
	}
	mkvs := resp.Responses[0].GetResponseRange().Kvs
	if len(mkvs) == 0 {
		return operations.Operation{}, false, fmt.Errorf("run %w", operations.ErrNotFound)
	}
	st, err := metaOf(mkvs[0], resp.Header.Revision)
	if err != nil {
		return operations.Operation{}, false, err
	}
	if st.m.Batch != "" {
		return operations.Operation{}, false, s.rollForward(ctx, o, st)
	}
	ikvs := resp.Responses[1].GetResponseRange().Kvs
	if len(ikvs) == 0 {
		return operations.Operation{}, false, operations.ErrNotFound
	}
	seq, ph, err := parseIDValue(id, ikvs[0].Value)
	if err != nil {
		return operations.Operation{}, false, err
	}
	dir := dirOpen
	if ph.Finished() {
		dir = dirDone
	}
	rr, err := s.get(ctx, prefix+dir+seqKey(seq), clientv3.WithRev(st.rev))
	if err != nil {
		return operations.Operation{}, false, err
	}
	if len(rr.Kvs) == 0 {
		return operations.Operation{}, false, fmt.Errorf("the ID index names %s operation %q at sequence %d, which is missing: %w", ph, id, seq, ErrCorrupt)
	}
	op, err := decodeOperation(ownerKey(o), rr.Kvs[0].Value)
	if err != nil {
		return operations.Operation{}, false, err
	}
	if op.ID != id || op.Status.Phase != ph {
		return operations.Operation{}, false, fmt.Errorf("the ID index has %q as %s at sequence %d, the record there is %q as %s: %w", id, ph, seq, op.ID, op.Status.Phase, ErrCorrupt)
	}
	return op, true, nil
}

// ListOperations returns the operations of o that f selects, in the order their IDs were
// first put, read at one revision. Unfinished (New, InProgress) and finished operations
// are kept under separate keys, so when f names only unfinished phases the cost follows
// the run's unfinished operations, not its finished ones. When a committed batch of the
// run is still being applied, ListOperations applies it first.
//
// It fails with an error wrapping [operations.ErrNotFound] when o has no run, or
// [ErrCorrupt], [ErrUnavailable] or ctx.Err().
func (s *Store) ListOperations(ctx context.Context, o operations.Owner, f operations.OperationFilter) ([]operations.Operation, error) {
	if o.Validate() != nil {
		return nil, fmt.Errorf("list operations of %s: run %w", o, operations.ErrNotFound)
	}
	wantOpen, wantDone := len(f.Phases) == 0, len(f.Phases) == 0
	for _, p := range f.Phases {
		switch p {
		case operations.OperationNew, operations.OperationInProgress:
			wantOpen = true
		case operations.OperationCompleted, operations.OperationFailed:
			wantDone = true
		}
	}
	for attempt := 1; ; attempt++ {
		out, done, err := s.listOnce(ctx, o, f, wantOpen, wantDone)
		if errors.Is(err, rpctypes.ErrCompacted) {
			err = nil
		}
		if err != nil {
			return nil, fmt.Errorf("list operations of %s: %w", o, err)
		}
		if done {
			return out, nil
		}
		if err := s.retry(ctx, attempt, "list operations of "+o.String()); err != nil {
			return nil, err
		}
	}
}

type seqOp struct {
	seq uint64
	op  operations.Operation
}

func (s *Store) listOnce(ctx context.Context, o operations.Owner, f operations.OperationFilter, wantOpen, wantDone bool) ([]operations.Operation, bool, error) {
	prefix := s.keys.ops(o)
	reads := []clientv3.Op{clientv3.OpGet(prefix + keyMeta)}
	var dirs []string
	if wantOpen {
		dirs = append(dirs, dirOpen)
	}
	if wantDone {
		dirs = append(dirs, dirDone)
	}
	for _, d := range dirs {
		reads = append(reads, s.firstPage(prefix+d, clientv3.GetPrefixRangeEnd(prefix+d)))
	}
	resp, err := s.txn(ctx, nil, reads, nil)
	if err != nil {
		return nil, false, err
	}
	mkvs := resp.Responses[0].GetResponseRange().Kvs
	if len(mkvs) == 0 {
		return nil, false, fmt.Errorf("run %w", operations.ErrNotFound)
	}
	st, err := metaOf(mkvs[0], resp.Header.Revision)
	if err != nil {
		return nil, false, err
	}
	if st.m.Batch != "" {
		return nil, false, s.rollForward(ctx, o, st)
	}
	owner := ownerKey(o)
	lists := make([][]seqOp, len(dirs))
	for i, d := range dirs {
		first := (*clientv3.GetResponse)(resp.Responses[1+i].GetResponseRange())
		err := s.rangeSeqs(ctx, prefix+d, st, first, func(seq uint64, kv *mvccpb.KeyValue) error {
			op, err := decodeOperation(owner, kv.Value)
			if err != nil {
				return fmt.Errorf("sequence %d: %w", seq, err)
			}
			if op.Status.Phase.Finished() != (d == dirDone) {
				return fmt.Errorf("sequence %d: %s operation %q kept under %q: %w", seq, op.Status.Phase, op.ID, d, ErrCorrupt)
			}
			if f.Match(op) {
				lists[i] = append(lists[i], seqOp{seq, op})
			}
			return nil
		})
		if err != nil {
			return nil, false, err
		}
	}
	return merge(lists), true, nil
}

// rangeSeqs calls fn for every key under dir, a directory of sequence keys, at st.rev, in
// order. first is the first page, read with a limit over the whole directory; it tells
// how many keys there are. etcd counts every key in a range it is asked for, so the
// next pages are read in windows of sequence numbers that hold about a page each,
// estimated from the density seen so far, rather than over the rest of the directory:
// the cost stays in proportion to the keys read.
func (s *Store) rangeSeqs(ctx context.Context, dir string, st metaState, first *clientv3.GetResponse, fn func(seq uint64, kv *mvccpb.KeyValue) error) error {
	page := uint64(s.opts.PageSize)
	remaining := first.Count
	resp := first
	var (
		from, firstSeq uint64
		seen           uint64
	)
	for {
		for _, kv := range resp.Kvs {
			seq, err := parseSeq(string(kv.Key[len(dir):]))
			if err != nil {
				return err
			}
			if seen == 0 {
				firstSeq = seq
			}
			seen++
			if err := fn(seq, kv); err != nil {
				return err
			}
			from = seq + 1
		}
		remaining -= int64(len(resp.Kvs))
		switch {
		case remaining <= 0:
			return nil
		case from >= st.m.Next:
			return fmt.Errorf("%s holds %d keys beyond the next sequence number %d: %w", dir, remaining, st.m.Next, ErrCorrupt)
		}
		// Sequence numbers per key so far, at least one: the window that should hold
		// about a page more.
		span := max((from-firstSeq)/max(seen, 1), 1)
		to := min(from+page*span, st.m.Next)
		var err error
		resp, err = s.get(ctx, dir+seqKey(from), clientv3.WithRange(dir+seqKey(to)), clientv3.WithRev(st.rev), clientv3.WithLimit(int64(page)))
		if err != nil {
			return err
		}
		if !resp.More {
			from = to // the window is done, even if it held nothing
		}
	}
}

// merge merges lists, each sorted by sequence number, into one list of operations.
func merge(lists [][]seqOp) []operations.Operation {
	n := 0
	for _, l := range lists {
		n += len(l)
	}
	if n == 0 {
		return nil
	}
	out := make([]operations.Operation, 0, n)
	for len(out) < n {
		best := -1
		for i, l := range lists {
			if len(l) > 0 && (best < 0 || l[0].seq < lists[best][0].seq) {
				best = i
			}
		}
		out = append(out, lists[best][0].op)
		lists[best] = lists[best][1:]
	}
	return out
}
