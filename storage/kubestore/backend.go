package kubestore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/kv"
)

// deleteTimeout bounds the deletes of chunks that a commit no longer needs, which run
// whatever happened to the commit's context.
const deleteTimeout = 10 * time.Second

// listPage is how many objects one LIST request of ScanRuns and ScanPartitions asks
// for. It is a variable for the tests, which make it smaller to LIST in several pages.
var listPage int64 = 500

// commitAttempts is how many times CommitPartition reads the object again and redoes a
// commit whose write found the object changed since its read, before it leaves the
// retry to the engine with kv.ErrConditionFailed.
const commitAttempts = 10

// errRaced is returned by backend.write when the object changed, appeared or went away
// between the read a commit was planned on and its write.
var errRaced = errors.New("the object changed under the commit")

// A backend is the [kv.PartitionedBackend] of a Store: each run's keys in one
// ItemopsRun and the chunks it names, the global keys in the ItemopsChunk named
// formatName, all in namespace ns. It is safe for concurrent use: it keeps nothing
// between calls but the chunks in its cache, which never change, and every write of a
// run's object is conditional on the resourceVersion its commit read.
type backend struct {
	dyn            dynamic.Interface
	ns             string
	maxObjectBytes int
	inlineBytes    int                // see Options.InlineBytes
	chunkBytes     int                // see Options.ChunkBytes
	cache          *chunkCache        // see Options.ChunkCacheBytes
	meta           metadata.Interface // lists objects without their data, for sweeps
	owners         *owners            // the ownerReferences of the runs' objects

	// identity is the store's identity, which the runs' marker holds and every run's
	// object names, and markerUID the UID of the format marker, as Open found them;
	// both are empty until then. See identity.go.
	identity  string
	markerUID types.UID
	// formatKeys are the keys of the format marker, as Open found them once the engine
	// had checked their format; Store.Check compares the marker's with them.
	formatKeys map[string]item
	// readOnly is Options.ReadOnly: every write fails with ErrReadOnly.
	readOnly bool
}

var (
	_ kv.PartitionedBackend = (*backend)(nil)
	_ kv.PassBackend        = (*backend)(nil)
)

// target returns the resource, its client and the name of the object of p.
func (b *backend) target(p kv.Partition) (schema.GroupVersionResource, dynamic.ResourceInterface, string) {
	res, name := locate(p)
	return res, b.dyn.Resource(res).Namespace(b.ns), name
}

// locate returns the resource and the name of the object of p.
func locate(p kv.Partition) (schema.GroupVersionResource, string) {
	if p == (kv.Partition{}) {
		return chunksResource, formatName
	}
	return runsResource, objectName(p)
}

// get reads the object of p and the chunks it names; an absent object gives a stored
// with no keys. It reads the chunks as withChunks does.
func (b *backend) get(ctx context.Context, p kv.Partition) (stored, error) {
	res, client, name := b.target(p)
	obj, err := b.getObject(ctx, client, res, name)
	if err != nil || obj == nil {
		return stored{keys: map[string]item{}}, err
	}
	s, err := decodeObject(res, p, obj, b.identity)
	if err != nil {
		return stored{}, err
	}
	return b.withChunks(ctx, p, s)
}

// withChunks returns s, what the object of p holds as read (by a GET or a LIST), with
// the keys of the chunks it names. A chunk that is gone is one that a later commit
// replaced, and withChunks reads the object again and returns what that holds, up to
// commitAttempts times; an absent object gives a stored with no keys. A chunk gone
// while the object that names it is unchanged is damage (operations.ErrCorrupt).
func (b *backend) withChunks(ctx context.Context, p kv.Partition, s stored) (stored, error) {
	res, client, name := b.target(p)
	for range commitAttempts {
		gone, err := b.getChunks(ctx, &s)
		if err != nil || gone == "" {
			return s, err
		}
		again, err := b.getObject(ctx, client, res, name)
		switch {
		case err != nil || again == nil:
			return stored{keys: map[string]item{}}, err
		case again.GetResourceVersion() == s.obj.GetResourceVersion():
			return stored{}, corrupt(res.Resource, b.ns, name, "chunk %s is missing", gone)
		}
		if s, err = decodeObject(res, p, again, b.identity); err != nil {
			return stored{}, err
		}
	}
	return stored{}, fmt.Errorf("kubestore: %s %s/%s changed under %d reads: %w", res.Resource, b.ns, name, commitAttempts, operations.ErrConflict)
}

// getObject reads the object of res called name with client, or returns nil when it
// is absent.
func (b *backend) getObject(ctx context.Context, client dynamic.ResourceInterface, res schema.GroupVersionResource, name string) (*unstructured.Unstructured, error) {
	obj, err := client.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("kubestore: get %s %s/%s: %w", res.Resource, b.ns, name, err)
	}
	return obj, nil
}

// getChunks reads the chunks that s names, from b.cache where it holds them, and adds
// their keys to s. It returns the name of the first chunk that is gone, if one is.
func (b *backend) getChunks(ctx context.Context, s *stored) (gone string, err error) {
	client := b.dyn.Resource(chunksResource).Namespace(b.ns)
	for i := range s.chunks {
		c := &s.chunks[i]
		if keys, ok := b.cache.get(c.ref); ok {
			c.keys = keys
		} else {
			obj, err := b.getObject(ctx, client, chunksResource, c.ref.name)
			switch {
			case err != nil:
				return "", err
			case obj == nil:
				return c.ref.name, nil
			}
			if c.keys, err = decodeChunk(s.obj, c.ref, obj, s.seq); err != nil {
				return "", err
			}
			b.cache.put(c.ref, c.keys)
		}
		for k, it := range c.keys {
			if _, ok := s.keys[k]; ok {
				return "", corrupt(runsResource.Resource, b.ns, s.obj.GetName(), "key %q is in chunk %s and elsewhere", k, c.ref.name)
			}
			s.keys[k] = it
		}
	}
	return "", nil
}

func (b *backend) ReadPartition(ctx context.Context, p kv.Partition, fn func(kv.Reader) error) error {
	if p != (kv.Partition{}) {
		if err := b.checkMarker(ctx); err != nil {
			return err
		}
	}
	s, err := b.get(ctx, p)
	if err != nil {
		return err
	}
	if p != (kv.Partition{}) && (s.obj == nil || s.pending) {
		// A run that is not there: so it reads in a store whose runs were all deleted
		// (their CRD deleted and installed again), which the runs' marker tells.
		if err := b.checkRunsMarker(ctx); err != nil {
			return err
		}
	}
	return fn(reader{b: b, p: p, keys: s.keys})
}

// A reader reads the keys of one partition as one read of its object, and of the
// chunks that object names, found them; a Scan of the global partition with no bounds
// goes on to the keys kept in every run's object (not in its chunks), read by one LIST,
// which is enough to tell whether the namespace holds any run.
//
// A reader made by ScanPartitions also holds, in from, the object its keys were read
// from, on which CommitRead conditions its write; one made by ReadPartition has none.
type reader struct {
	b    *backend
	p    kv.Partition
	keys map[string]item
	from *stored
}

func (r reader) Get(ctx context.Context, key []byte) ([]byte, kv.Version, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	it := r.keys[string(key)]
	return it.value, it.ver, nil
}

func (r reader) Scan(ctx context.Context, start, end []byte, fn func(key, value []byte, v kv.Version) error) error {
	if err := scanKeys(ctx, r.keys, start, end, fn); err != nil {
		return err
	}
	if r.p != (kv.Partition{}) || len(start) > 0 || len(end) > 0 {
		return nil
	}
	return r.b.list(ctx, func(_ kv.Partition, s stored) error {
		return scanKeys(ctx, s.keys, nil, nil, fn)
	})
}

// scanKeys calls fn for the keys of m in [start, end) in byte order, as kv.Reader.Scan
// says.
func scanKeys(ctx context.Context, m map[string]item, start, end []byte, fn func(key, value []byte, v kv.Version) error) error {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if k < string(start) || len(end) > 0 && k >= string(end) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn([]byte(k), m[k].value, m[k].ver); err != nil {
			return err
		}
	}
	return nil
}

// list calls fn with every run's object of the namespace, pending ones included, read
// in pages of one consistent LIST, and stops at the first error fn returns. It reads
// every object, whatever its labels say, so that no label edited by hand hides a run:
// each object is checked against its sum before its labels are believed. An object
// that does not hold the run its name stands for fails it with operations.ErrCorrupt;
// so does, once the store is open, a LIST without the runs' marker of the store's
// identity (see identity.go), which the LIST reads and list does not pass to fn. A page
// whose snapshot the API server no longer holds (410 Gone) fails list with that error.
func (b *backend) list(ctx context.Context, fn func(p kv.Partition, s stored) error) error {
	return b.listPages(ctx, fn, nil)
}

// listPages is list, which calls page, when it is not nil, after fn has seen the objects
// of each page and before it asks for the next. Since page may take long, a LIST whose
// snapshot the API server no longer holds when the next page is asked for (410 Gone:
// its continue token expired, etcd having compacted that revision) does not fail
// listPages then: it LISTs again from the start, from a new snapshot, and skips the
// objects the pages before gave, which it tells by their names, the LIST's order. A
// LIST begun again that expires before it gives an object it had not given fails
// listPages, so that a server that keeps no snapshot for long does not keep it LISTing.
func (b *backend) listPages(ctx context.Context, fn func(p kv.Partition, s stored) error, page func() error) error {
	client := b.dyn.Resource(runsResource).Namespace(b.ns)
	opts := metav1.ListOptions{Limit: listPage}
	marked := false
	passed := ""   // the name of the last object that a page before gave; "" when none
	again := false // whether the LIST began again and has given no new object since
	for {
		l, err := client.List(ctx, opts)
		if page != nil && opts.Continue != "" && !again && (apierrors.IsResourceExpired(err) || apierrors.IsGone(err)) {
			opts.Continue, again = "", true
			continue
		}
		if err != nil {
			return fmt.Errorf("kubestore: list %s in %s: %w", runsResource.Resource, b.ns, err)
		}
		for i := range l.Items {
			obj := &l.Items[i]
			if passed != "" && obj.GetName() <= passed {
				continue // given before the LIST began again
			}
			again = false
			if obj.GetName() == formatName {
				if err := b.checkRunsMarkerObject(obj); err != nil {
					return err
				}
				marked = true
				continue
			}
			kind, _, _ := unstructured.NestedString(obj.Object, "spec", "owner", "kind")
			name, _, _ := unstructured.NestedString(obj.Object, "spec", "owner", "name")
			p := kv.Partition{Kind: phase.Kind(kind), Name: name}
			if objectName(p) != obj.GetName() {
				return corrupt(runsResource.Resource, b.ns, obj.GetName(), "holds the run of %s %q, whose object is %s", kind, name, objectName(p))
			}
			s, err := decodeObject(runsResource, p, obj, b.identity)
			if err != nil {
				return err
			}
			if err := fn(p, s); err != nil {
				return err
			}
		}
		if n := len(l.Items); n > 0 && l.Items[n-1].GetName() > passed {
			passed = l.Items[n-1].GetName()
		}
		if page != nil {
			if err := page(); err != nil {
				return err
			}
		}
		if l.GetContinue() == "" {
			break
		}
		opts.Continue = l.GetContinue()
	}
	if !marked && b.identity != "" {
		return b.checkRunsMarkerObject(nil)
	}
	return nil
}

// ScanRuns reads every run's object of the namespace (see list) and selects by what
// each holds once checked: the kind its spec names, and the phase of its labels, which
// its sum covers. A LIST by label selector would miss an object whose labels were
// edited by hand; reading them all costs a LIST of every run, finished or not.
func (b *backend) ScanRuns(ctx context.Context, f operations.RunFilter, fn func(p kv.Partition, indexed phase.Phase, record []byte) error) error {
	if err := b.checkMarker(ctx); err != nil {
		return err
	}
	return b.list(ctx, func(p kv.Partition, s stored) error {
		indexed, ok := selects(f, p, s)
		if !ok {
			return nil
		}
		return fn(p, indexed, s.keys[s.recordKey].value)
	})
}

// selects reports whether f selects the run of p that s holds, by what ScanRuns selects
// by, and the phase it is indexed under for f (empty when f selects no phase). An
// absent or pending object holds no run.
func selects(f operations.RunFilter, p kv.Partition, s stored) (indexed phase.Phase, ok bool) {
	if s.obj == nil || s.pending {
		return "", false
	}
	ph := phase.Phase(s.obj.GetLabels()[labelPhase])
	if f.Kind != "" && p.Kind != f.Kind || len(f.Phases) > 0 && !slices.Contains(f.Phases, ph) {
		return "", false
	}
	if len(f.Phases) > 0 {
		indexed = ph
	}
	return indexed, true
}

// ScanPartitions reads the runs that f selects from the LIST that ScanRuns makes,
// checked and selected as ScanRuns does, and gives each run's keys, with those of the
// chunks it names (fetched unless the chunk cache holds them), to read; it calls page
// after the runs of each page of the LIST that gave any, before it asks for the next.
// Each run is read as one object: a spilled run whose chunk is gone, replaced by a
// commit since the LIST, is read again by a GET, and given as that read finds it if f
// still selects it (a chunk gone from an unchanged object is damage, as for every
// read). A LIST whose snapshot the API server no longer holds when the next page is
// asked for, page having taken long, begins again from the start, and the runs given
// before are not given again (see listPages). The Reader that read gets holds the
// object it was read from, on which CommitRead conditions its write. A pass therefore
// costs the API server one GET of the format marker and the pages of one LIST, and a
// chunk it has not cached.
func (b *backend) ScanPartitions(ctx context.Context, f operations.RunFilter, read func(p kv.Partition, indexed phase.Phase, record []byte, r kv.Reader) error, page func() error) error {
	if err := b.checkMarker(ctx); err != nil {
		return err
	}
	given := 0 // the runs given to read since the last page
	return b.listPages(ctx, func(p kv.Partition, s stored) error {
		if _, ok := selects(f, p, s); !ok {
			return nil
		}
		s, err := b.withChunks(ctx, p, s)
		if err != nil {
			return err
		}
		indexed, ok := selects(f, p, s)
		if !ok {
			return nil // changed since the LIST, and f no longer selects it
		}
		given++
		return read(p, indexed, s.keys[s.recordKey].value, reader{b: b, p: p, keys: s.keys, from: &s})
	}, func() error {
		if given == 0 {
			return nil
		}
		given = 0
		return page()
	})
}

// CommitRead is CommitPartition for a commit planned on r, a Reader that ScanPartitions
// made for p: it checks conds against r's keys and writes on condition that the object
// is still the one r was read from, without reading it first. When the write finds the
// object changed since (a 409 Conflict, or an object gone), or r is not such a Reader,
// it is CommitPartition, which reads the object again and checks conds against that, so
// that the outcome is always CommitPartition's. It fails as CommitPartition does: with
// an error wrapping kv.ErrConditionFailed when a condition does not hold.
func (b *backend) CommitRead(ctx context.Context, p kv.Partition, r kv.Reader, run kv.RunChange, conds []kv.Condition, writes []kv.Write) error {
	if b.readOnly {
		return readOnlyError(fmt.Sprintf("commit to the run of %s %q", p.Kind, p.Name), b.ns)
	}
	rd, ok := r.(reader)
	if !ok || rd.from == nil || rd.p != p || rd.b != b || rd.from.obj == nil {
		return b.CommitPartition(ctx, p, run, conds, writes)
	}
	cur := *rd.from
	for _, c := range conds {
		if got := cur.keys[string(c.Key)].ver; got != c.Version {
			return fmt.Errorf("kubestore: key %q has version %d, not %d: %w", c.Key, got, c.Version, kv.ErrConditionFailed)
		}
	}
	err := b.write(ctx, p, cur, run, writes)
	if !errors.Is(err, errRaced) {
		return err
	}
	return b.CommitPartition(ctx, p, run, conds, writes)
}

func (b *backend) CommitPartition(ctx context.Context, p kv.Partition, run kv.RunChange, conds []kv.Condition, writes []kv.Write) error {
	if b.readOnly {
		if p == (kv.Partition{}) {
			return readOnlyError("write the format marker", b.ns)
		}
		return readOnlyError(fmt.Sprintf("commit to the run of %s %q", p.Kind, p.Name), b.ns)
	}
	checked := false // whether the markers were checked
	for range commitAttempts {
		cur, err := b.get(ctx, p)
		if err != nil {
			return err
		}
		if p != (kv.Partition{}) && (cur.obj == nil || cur.pending) && !checked {
			// A commit that creates a run, which the engine makes without reading it
			// first, checks the markers as a read that finds no run does.
			if err := b.checkMarker(ctx); err != nil {
				return err
			}
			if err := b.checkRunsMarker(ctx); err != nil {
				return err
			}
			checked = true
		}
		for _, c := range conds {
			if got := cur.keys[string(c.Key)].ver; got != c.Version {
				return fmt.Errorf("kubestore: key %q has version %d, not %d: %w", c.Key, got, c.Version, kv.ErrConditionFailed)
			}
		}
		err = b.write(ctx, p, cur, run, writes)
		if !errors.Is(err, errRaced) {
			return err
		}
	}
	return fmt.Errorf("kubestore: %d writes of one commit each found the object changed: %w", commitAttempts, kv.ErrConditionFailed)
}

// write writes to the object of p what writes make of cur, on condition that the object
// is still the one cur was read from. It fails with errRaced when it is not. A run's
// keys that do not fit b.inlineBytes go to chunks (see spill); the write of the run's
// object is the commit point, and the chunks that no longer hold its keys are deleted
// after it.
func (b *backend) write(ctx context.Context, p kv.Partition, cur stored, run kv.RunChange, writes []kv.Write) error {
	next := stored{keys: maps.Clone(cur.keys), seq: cur.seq + 1, recordKey: cur.recordKey,
		ops: opCounts{total: cur.ops.total + int64(run.Added), completed: cur.ops.completed + int64(run.Finished)}}
	if cur.obj == nil {
		next.seq = newSeq()
	}
	for _, w := range writes {
		switch {
		case w.Delete && len(w.End) > 0:
			maps.DeleteFunc(next.keys, func(k string, _ item) bool { return k >= string(w.Key) && k < string(w.End) })
		case w.Delete:
			delete(next.keys, string(w.Key))
		default:
			next.keys[string(w.Key)] = item{value: bytes.Clone(w.Value), ver: next.seq}
		}
	}
	res, client, name := b.target(p)
	if len(next.keys) == 0 {
		if cur.obj == nil {
			return nil
		}
		rv, uid := cur.obj.GetResourceVersion(), cur.obj.GetUID()
		err := client.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv, UID: &uid}})
		if err == nil {
			// The chunks of a deleted object are named by none: they go at once, rather
			// than when the garbage collector gets to them. A delete whose outcome is
			// unknown leaves them, as the object may still name them; the collector
			// or the next sweep deletes them once it is gone.
			names := make([]string, len(cur.chunks))
			for i, c := range cur.chunks {
				names[i] = c.ref.name
			}
			b.deleteChunks(names)
		}
		return b.writeError("delete", res, name, err)
	}
	if run.Record != nil {
		k, err := recordKey(cur.recordKey, run.Record, writes)
		if err != nil {
			return fmt.Errorf("kubestore: commit of the run of %s %q: %w", p.Kind, p.Name, err)
		}
		next.recordKey = k
	}
	if p != (kv.Partition{}) && next.recordKey == "" {
		return fmt.Errorf("kubestore: commit of the run of %s %q writes keys of a run without its record", p.Kind, p.Name)
	}
	var refs []metav1.OwnerReference // the ownerReferences of an object this write creates
	if cur.obj == nil {
		var err error
		if refs, err = b.owners.refs(ctx, p, run); err != nil {
			return err
		}
	}
	inline, err := encodeKeys(next.keys)
	if err != nil {
		return err
	}
	var created []string // the chunks this write made, deleted again if it fails
	if p != (kv.Partition{}) && len(inline) > b.inlineBytes {
		if cur.obj == nil {
			if cur.obj, err = b.createPending(ctx, p, next.seq, refs); err != nil {
				return err
			}
		}
		created, err = b.spill(ctx, cur, &next, writes)
		if err == nil {
			inline, err = encodeKeys(next.keys)
		}
		if err != nil {
			b.deleteChunks(created)
			return err
		}
	}
	obj, err := b.object(p, cur, next, run, inline, refs)
	if err != nil {
		b.deleteChunks(created)
		return err
	}
	if p == (kv.Partition{}) && cur.obj == nil {
		// The format marker of a new store names the identity of the runs' marker,
		// made first (see identity.go).
		id, err := b.runsMarker(ctx)
		if err != nil {
			return err
		}
		obj.SetLabels(map[string]string{labelRole: roleFormat, labelStore: id})
	}
	verb := "update"
	if cur.obj == nil {
		verb = "create"
		_, err = client.Create(ctx, obj, metav1.CreateOptions{})
	} else {
		_, err = client.Update(ctx, obj, metav1.UpdateOptions{})
	}
	if err != nil {
		// A write the API server refused leaves the chunks named by no object, and they
		// go. One whose outcome is unknown may have been applied, and its object may
		// name them: they stay, and the sweep deletes them once no object names them.
		// A Conflict may answer client-go's own second sending of a write whose first
		// was applied (see refused): the chunks the object now names stay.
		switch {
		case len(created) == 0 || !refused(err):
		case apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err):
			b.deleteUnnamed(ctx, res, client, name, created)
		default:
			b.deleteChunks(created)
		}
		return b.writeError(verb, res, name, err)
	}
	kept := map[string]bool{}
	for _, c := range next.chunks {
		kept[c.ref.name] = true
	}
	var retired []string
	for _, c := range cur.chunks {
		if !kept[c.ref.name] {
			retired = append(retired, c.ref.name)
		}
	}
	b.deleteChunks(retired)
	return nil
}

// createPending creates the object of the run of p, holding no key, so that the chunks
// of the run's first commit have an owner; readers take the run as absent until the
// commit writes the object. The object has the label itemops.io/role=pending, sequence
// number seq, the store's identity, no other status (which tells it from a run's
// object: see decodeObject), and the ownerReferences refs, which the commit's write
// keeps.
func (b *backend) createPending(ctx context.Context, p kv.Partition, seq kv.Version, refs []metav1.OwnerReference) (*unstructured.Unstructured, error) {
	res, client, name := b.target(p)
	obj := newObject(res, b.ns, name, p)
	obj.SetOwnerReferences(refs)
	obj.SetLabels(map[string]string{labelRole: rolePending, labelKind: string(p.Kind)})
	store := map[string]any{"seq": int64(seq)}
	if b.identity != "" {
		store["identity"] = b.identity
	}
	if err := unstructured.SetNestedMap(obj.Object, store, "status", "store"); err != nil {
		return nil, err
	}
	created, err := client.Create(ctx, obj, metav1.CreateOptions{})
	return created, b.writeError("create", res, name, err)
}

// spill moves the keys of next, other than the run's record, into chunks: the chunks
// of cur that the writes leave alone are kept as they are, and the other keys go to new
// chunks of at most b.chunkBytes of encoded keys each, created, owned by cur's object,
// before spill returns. next.keys keeps only the record, and next.chunks names the
// chunks. spill returns the names of the chunks it created, also when it fails.
func (b *backend) spill(ctx context.Context, cur stored, next *stored, writes []kv.Write) ([]string, error) {
	rest := maps.Clone(next.keys)
	next.keys = map[string]item{next.recordKey: rest[next.recordKey]}
	delete(rest, next.recordKey)
	next.chunks = nil
	for _, c := range cur.chunks {
		if touched(c.ref, writes) || c.keys[next.recordKey].ver != 0 {
			continue
		}
		next.chunks = append(next.chunks, c)
		for k := range c.keys {
			delete(rest, k)
		}
	}
	var created []string
	var batch map[string]item
	size := 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		c, err := b.createChunk(ctx, cur.obj, next.seq, batch)
		if err != nil {
			return err
		}
		created = append(created, c.ref.name)
		next.chunks = append(next.chunks, c)
		batch, size = nil, 0
		return nil
	}
	for _, k := range slices.Sorted(maps.Keys(rest)) {
		n := len(k) + len(rest[k].value) + 3*binary.MaxVarintLen64
		if size+n > b.chunkBytes {
			if err := flush(); err != nil {
				return created, err
			}
		}
		if batch == nil {
			batch = map[string]item{}
		}
		batch[k] = rest[k]
		size += n
	}
	return created, flush()
}

// touched reports whether one of writes sets or deletes a key in the range of ref.
func touched(ref chunkRef, writes []kv.Write) bool {
	for _, w := range writes {
		if len(w.End) > 0 {
			if string(w.Key) <= ref.last && string(w.End) > ref.first {
				return true
			}
		} else if string(w.Key) >= ref.first && string(w.Key) <= ref.last {
			return true
		}
	}
	return false
}

// createChunk creates an ItemopsChunk of keys, owned by head, for the commit that gives
// the run sequence number seq. Its name is "c.", the label itemops.io/run of head's
// chunks, a dot, seq in 16 hex digits (which Store.Sweep reads), a dot and 16 random hex
// digits. No run's object has such a name, since no run's object name starts with "c.".
func (b *backend) createChunk(ctx context.Context, head *unstructured.Unstructured, seq kv.Version, keys map[string]item) (chunk, error) {
	data, err := encodeKeys(keys)
	if err != nil {
		return chunk{}, err
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{"seq": int64(seq), "data": base64.StdEncoding.EncodeToString(data)},
	}}
	obj.SetAPIVersion(chunksResource.GroupVersion().String())
	obj.SetKind(chunkKind)
	obj.SetNamespace(b.ns)
	obj.SetName(fmt.Sprintf("c.%s.%016x.%016x", runLabel(head.GetName()), uint64(seq), rand.Uint64()))
	obj.SetLabels(map[string]string{labelRole: roleChunk, labelRun: runLabel(head.GetName())})
	obj.SetOwnerReferences([]metav1.OwnerReference{{
		APIVersion: runsResource.GroupVersion().String(), Kind: runKind, Name: head.GetName(), UID: head.GetUID(),
	}})
	got, err := b.dyn.Resource(chunksResource).Namespace(b.ns).Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		return chunk{}, fmt.Errorf("kubestore: create a chunk of %s %s/%s: %w", runsResource.Resource, b.ns, head.GetName(), err)
	}
	sorted := slices.Sorted(maps.Keys(keys))
	sum := sha256.Sum256(data)
	ref := chunkRef{name: got.GetName(), first: sorted[0], last: sorted[len(sorted)-1], sum: hex.EncodeToString(sum[:])}
	b.cache.put(ref, keys)
	return chunk{ref: ref, keys: keys}, nil
}

// deleteChunks deletes the chunks named, as far as it can: a chunk left behind names no
// key that any run's object names, so no reader sees it.
func (b *backend) deleteChunks(names []string) {
	ctx, cancel := context.WithTimeout(context.Background(), deleteTimeout)
	defer cancel()
	client := b.dyn.Resource(chunksResource).Namespace(b.ns)
	for _, n := range names {
		_ = client.Delete(ctx, n, metav1.DeleteOptions{})
	}
}

// deleteUnnamed deletes those of the chunks created that the object name of res, read
// again, does not name. When that read fails it deletes none, and leaves them to the
// sweep. A chunk's name is unique to the commit that created it, so the object names
// one only if that commit's write was applied.
func (b *backend) deleteUnnamed(ctx context.Context, res schema.GroupVersionResource, client dynamic.ResourceInterface, name string, created []string) {
	obj, err := b.getObject(ctx, client, res, name)
	if err != nil {
		return
	}
	named := map[string]bool{}
	if obj != nil {
		refs, _, err := unstructured.NestedSlice(obj.Object, append(storePath(res), "chunks")...)
		if err != nil {
			return
		}
		for _, r := range refs {
			ref, err := decodeChunkRef(r)
			if err != nil {
				return
			}
			named[ref.name] = true
		}
	}
	b.deleteChunks(slices.DeleteFunc(created, func(n string) bool { return named[n] }))
}

// writeError returns nil for a nil err, errRaced for an answer that says the object
// is not the one the commit read, and otherwise err with what was written.
func (b *backend) writeError(verb string, res schema.GroupVersionResource, name string, err error) error {
	switch {
	case err == nil:
		return nil
	case apierrors.IsConflict(err), apierrors.IsNotFound(err), apierrors.IsAlreadyExists(err):
		return errRaced
	}
	return fmt.Errorf("kubestore: %s %s %s/%s: %w", verb, res.Resource, b.ns, name, err)
}

// recordKey returns the key that holds the run's record after a commit that writes
// record: the key that held it, if the commit writes record there, or else the one
// key that the commit sets to record. It fails when no key, or more than one, is set to
// record.
func recordKey(old string, record []byte, writes []kv.Write) (string, error) {
	var found []string
	for _, w := range writes {
		if !w.Delete && bytes.Equal(w.Value, record) {
			if string(w.Key) == old {
				return old, nil
			}
			found = append(found, string(w.Key))
		}
	}
	if len(found) != 1 {
		return "", fmt.Errorf("%d keys are set to the run's record, want 1", len(found))
	}
	return found[0], nil
}

// object returns the object that holds next, whose inline keys encode to data, for
// partition p: cur's object with next in place of its keys, or, when cur has none, a new
// object with the ownerReferences refs. It fails with an error wrapping kv.ErrTooLarge
// when the object's JSON would exceed b.maxObjectBytes.
func (b *backend) object(p kv.Partition, cur, next stored, run kv.RunChange, data []byte, refs []metav1.OwnerReference) (*unstructured.Unstructured, error) {
	res, name := locate(p)
	obj := newObject(res, b.ns, name, p)
	obj.SetOwnerReferences(refs)
	if cur.obj != nil {
		obj = cur.obj.DeepCopy()
	}
	lbls := obj.GetLabels()
	if lbls == nil {
		lbls = map[string]string{}
	}
	path := storePath(res)
	fields := map[string]any{"seq": int64(next.seq), "data": base64.StdEncoding.EncodeToString(data)}
	if res == runsResource {
		lbls[labelRole] = roleRun
		lbls[labelKind] = string(p.Kind)
		setOwnerLabels(lbls, p.Name)
		if err := setSummary(obj, next.ops, run); err != nil {
			return nil, corrupt(res.Resource, b.ns, name, "status: %v", err)
		}
		if run.Record != nil {
			lbls[labelPhase] = string(run.Phase)
		}
		fields["recordKey"] = base64.StdEncoding.EncodeToString([]byte(next.recordKey))
		if b.identity != "" {
			fields["identity"] = b.identity
		}
		chunks := make([]any, len(next.chunks))
		for i, c := range next.chunks {
			chunks[i] = encodeChunkRef(c.ref)
		}
		fields["chunks"] = chunks
	} else {
		lbls[labelRole] = roleFormat
	}
	obj.SetLabels(lbls)
	for k, v := range fields {
		if err := unstructured.SetNestedField(obj.Object, v, append(path, k)...); err != nil {
			return nil, corrupt(res.Resource, b.ns, name, "%v", err)
		}
	}
	if res == runsResource {
		sum, err := headSum(obj)
		if err == nil {
			err = unstructured.SetNestedField(obj.Object, sum, append(path, "sum")...)
		}
		if err != nil {
			return nil, corrupt(res.Resource, b.ns, name, "%v", err)
		}
	}
	js, err := obj.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("kubestore: encode %s %s/%s: %w", res.Resource, b.ns, name, err)
	}
	if len(js) > b.maxObjectBytes {
		return nil, fmt.Errorf("kubestore: %s %s/%s would be %d bytes, more than %d: %w", res.Resource, b.ns, name, len(js), b.maxObjectBytes, kv.ErrTooLarge)
	}
	return obj, nil
}

func (b *backend) Limits() kv.Limits { return kv.Limits{} }

// newObject returns a new object of resource named name in namespace ns for the keys of
// p, without labels or keys.
func newObject(res schema.GroupVersionResource, ns, name string, p kv.Partition) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: map[string]any{}}
	obj.SetAPIVersion(res.GroupVersion().String())
	obj.SetName(name)
	obj.SetNamespace(ns)
	if res == runsResource {
		obj.SetKind(runKind)
		obj.Object["spec"] = map[string]any{
			"owner":  map[string]any{"kind": string(p.Kind), "name": p.Name},
			"format": specFormat,
		}
	} else {
		obj.SetKind(chunkKind)
		obj.Object["spec"] = map[string]any{}
	}
	return obj
}

// runLabel returns the value of the label itemops.io/run of the chunks of the run
// whose object is named name: the first 40 hex digits of the name's SHA-256, since a
// label's value is at most 63 bytes.
func runLabel(name string) string {
	sum := sha256.Sum256([]byte(name))
	return hex.EncodeToString(sum[:])[:40]
}
