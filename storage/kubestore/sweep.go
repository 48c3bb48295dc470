package kubestore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/kv"
)

// pendingGrace is how long after its creation, by the API server's clock read against
// this process's, a pending run's object (see createPending) may still be the first
// commit of its run in flight; a sweep deletes it only after that. The tests shorten
// it.
var pendingGrace = time.Minute

// Sweep deletes what commits left behind that no run's object names: the chunks of
// commits that died before their commit point, were refused at it, or whose write of
// the run's object had an unknown outcome and was not applied, once no commit can name
// them any more; and the objects of runs whose first commit never came (pending: a
// status that holds only a sequence number and the store's identity, and the label
// that says so; a run's object labelled pending by hand is damage) once they are a
// minute old. It returns how many objects it deleted. [Open] sweeps the namespace
// once; a process that runs for long may call Sweep from time to time. A sweep reads
// the metadata of the namespace's chunks and every run's object (two LISTs, the second
// of whole objects), and deletes one object a request.
//
// Sweep never deletes a chunk that a run's object names, whatever the chunk's labels
// or ownerReferences say: it finds a chunk's run by the chunk's name, which carries the
// label of its run's object's name and the sequence number of the commit that made it.
// A run's object that does not decode (edited by hand, or naming another store) keeps
// every chunk whose name carries its label, and is reported with an error wrapping
// operations.ErrCorrupt that names it, after the rest of the sweep is done.
//
// Nor does Sweep delete what a commit in flight, of this process or another, will
// name. A commit creates its chunks with the sequence number that its write of the
// run's object gives the run, one more than the object's when the commit read it (the
// first commit of a run, the pending object's own), and that write is conditional on
// the object being unchanged. Sweep reads the chunks first and the runs' objects after
// them, and deletes a chunk that the object does not name only when its number is at
// most the object's, or its ownerReference names another object than the one of that
// name: the object has then moved past the commit that made the chunk, whose write can
// no longer succeed, and no later commit names a chunk that the object does not. A
// chunk whose run's object is gone belongs to no run any more. A pending object is
// deleted only when it has not changed since Sweep read it; a commit in flight that
// meets its deletion creates the object again, so that a clock that is wrong costs that
// commit a retry, never a key.
//
// Sweep fails with ctx.Err() (wrapped) when ctx ends first, and with the API server's
// error, wrapped, when a read fails; a delete that fails, or finds the object gone or
// changed, is left to the next sweep. It fails with an error wrapping
// operations.ErrCorrupt, and deletes nothing, when the store's markers are not those
// the Store opened (see the package documentation, "Identity"). On a store opened with
// [Options.ReadOnly] it fails with an error wrapping [ErrReadOnly], and reads nothing.
func (s *Store) Sweep(ctx context.Context) (int, error) {
	return s.b.sweep(ctx)
}

// A chunkMeta is what a sweep or a check knows of one chunk: its name, UID, the
// sequence number its name carries, the UID of the run's object that its
// ownerReference names, and, for a check, its labels, ownerReferences and creation.
type chunkMeta struct {
	name     string
	uid      string
	seq      kv.Version
	ownerUID string
	labels   map[string]string
	refs     []metav1.OwnerReference
	created  time.Time
}

// parseChunkName returns the label of the run's object (see runLabel) and the sequence
// number that the name of a chunk carries (see createChunk), or false when name is not
// a chunk's.
func parseChunkName(name string) (run string, seq kv.Version, ok bool) {
	parts := strings.Split(name, ".")
	if len(parts) != 4 || parts[0] != "c" || len(parts[1]) != 40 || len(parts[2]) != 16 {
		return "", 0, false
	}
	n, err := strconv.ParseUint(parts[2], 16, 64)
	return parts[1], kv.Version(n), err == nil && n > 0
}

// A sweptRun is what a sweep or a check knows of one run's object, pending or not.
type sweptRun struct {
	name    string // the object's
	uid     string
	named   map[string]bool // the chunks it names
	limit   kv.Version      // a commit in flight on it makes chunks of a higher number
	damaged bool            // it does not decode: every chunk it might name is kept
	gone    bool            // this sweep deleted it, a pending object
}

// keeps reports whether a sweep keeps chunk c, whose name carries the label of r's
// object (r is nil when there is no such object): when r names it, whatever its
// ownerReference says; when r does not decode, and so might name it; and when a
// commit in flight on r, the object that owns it, may still name it. A chunk of an
// object the sweep deleted goes.
func (r *sweptRun) keeps(c chunkMeta) bool {
	return r != nil && !r.gone && (r.damaged || r.named[c.name] || c.ownerUID == r.uid && c.seq > r.limit)
}

// A survey is what one reading of a namespace found of its chunks and runs' objects,
// which a sweep and a check judge (see backend.survey).
type survey struct {
	chunks  map[string][]chunkMeta       // by the label of their run's object, from their names, each in name order
	foreign []string                     // the ItemopsChunks named neither as a chunk nor as the format marker
	runs    map[string]*sweptRun         // by the label of the object's name
	objects int                          // the runs' objects, pending or not, sound or not
	damaged []error                      // one for each run's object that does not decode
	pending []*unstructured.Unstructured // the pending objects
	marker  *unstructured.Unstructured   // the runs' marker, as the LIST gave it; nil when absent
}

// survey reads the metadata of every chunk of b's namespace, then every run's object,
// whole, in that order (see Store.Sweep), whatever their labels say, and decodes each
// run's object on its own. It calls each, when not nil, with each run's object that
// decodes, pending or not, as the LIST gave it; an error each returns ends the survey
// with that error. It fails with the API server's error, wrapped, when a LIST fails,
// and with ctx.Err() when ctx ends first.
func (b *backend) survey(ctx context.Context, each func(p kv.Partition, s stored) error) (*survey, error) {
	sv := &survey{chunks: map[string][]chunkMeta{}, runs: map[string]*sweptRun{}}
	err := b.listMeta(ctx, chunksResource, "", func(m metav1.PartialObjectMetadata) {
		run, seq, ok := parseChunkName(m.Name)
		if !ok {
			if m.Name != formatName {
				sv.foreign = append(sv.foreign, m.Name)
			}
			return
		}
		cm := chunkMeta{name: m.Name, uid: string(m.UID), seq: seq, labels: m.Labels, refs: m.OwnerReferences, created: m.CreationTimestamp.Time}
		if refs := m.OwnerReferences; len(refs) == 1 && refs[0].Kind == runKind {
			cm.ownerUID = string(refs[0].UID)
		}
		sv.chunks[run] = append(sv.chunks[run], cm)
	})
	if err != nil {
		return nil, err
	}
	client := b.dyn.Resource(runsResource).Namespace(b.ns)
	opts := metav1.ListOptions{Limit: listPage}
	for {
		l, err := client.List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("kubestore: list %s in %s: %w", runsResource.Resource, b.ns, err)
		}
		for i := range l.Items {
			obj := &l.Items[i]
			if obj.GetName() == formatName {
				sv.marker = obj
				continue
			}
			sv.objects++
			r := &sweptRun{name: obj.GetName(), uid: string(obj.GetUID()), named: map[string]bool{}}
			sv.runs[runLabel(obj.GetName())] = r
			kind, _, _ := unstructured.NestedString(obj.Object, "spec", "owner", "kind")
			owner, _, _ := unstructured.NestedString(obj.Object, "spec", "owner", "name")
			p := kv.Partition{Kind: phase.Kind(kind), Name: owner}
			s, err := decodeObject(runsResource, p, obj, b.identity)
			if err == nil && objectName(p) != obj.GetName() {
				err = corrupt(runsResource.Resource, b.ns, obj.GetName(), "holds the run of %s %q, whose object is %s", kind, owner, objectName(p))
			}
			if err != nil {
				r.damaged = true
				sv.damaged = append(sv.damaged, err)
				continue
			}
			for _, ch := range s.chunks {
				r.named[ch.ref.name] = true
			}
			// A commit in flight on a pending object makes chunks of the object's own
			// number; on a run's, of one more.
			r.limit = s.seq
			if s.pending {
				r.limit--
				sv.pending = append(sv.pending, obj)
			}
			if each != nil {
				if err := each(p, s); err != nil {
					return nil, err
				}
			}
		}
		if l.GetContinue() == "" {
			break
		}
		opts.Continue = l.GetContinue()
	}
	return sv, nil
}

func (b *backend) sweep(ctx context.Context) (int, error) {
	if b.readOnly {
		return 0, readOnlyError("sweep", b.ns)
	}
	// A namespace that no longer holds the store this one opened (its runs' objects
	// deleted, say, to be restored from a backup) is left alone.
	if err := b.checkMarker(ctx); err != nil {
		return 0, err
	}
	if err := b.checkRunsMarker(ctx); err != nil {
		return 0, err
	}
	// Every chunk and every run's object is read, whatever its labels say.
	sv, err := b.survey(ctx, nil)
	if err != nil {
		return 0, err
	}
	deleted := 0
	for _, obj := range sv.pending {
		if time.Since(obj.GetCreationTimestamp().Time) < pendingGrace {
			continue
		}
		if b.deleteIf(ctx, runsResource, obj.GetName(), string(obj.GetUID()), obj.GetResourceVersion()) {
			deleted++
			sv.runs[runLabel(obj.GetName())].gone = true
		}
	}
	for label, cs := range sv.chunks {
		r := sv.runs[label]
		for _, ch := range cs {
			if r.keeps(ch) {
				continue
			}
			if b.deleteIf(ctx, chunksResource, ch.name, ch.uid, "") {
				deleted++
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return deleted, err
	}
	return deleted, errors.Join(sv.damaged...)
}

// listMeta calls fn with the metadata of every object of res in b's namespace that
// the label selector sel selects, read in pages of one consistent LIST.
func (b *backend) listMeta(ctx context.Context, res schema.GroupVersionResource, sel string, fn func(metav1.PartialObjectMetadata)) error {
	client := b.meta.Resource(res).Namespace(b.ns)
	opts := metav1.ListOptions{LabelSelector: sel, Limit: listPage}
	for {
		l, err := client.List(ctx, opts)
		if err != nil {
			return fmt.Errorf("kubestore: list %s in %s: %w", res.Resource, b.ns, err)
		}
		for _, m := range l.Items {
			fn(m)
		}
		if l.GetContinue() == "" {
			return nil
		}
		opts.Continue = l.GetContinue()
	}
}

// deleteIf deletes the object of res called name if it has uid and, unless rv is
// empty, resourceVersion rv, and reports whether it did.
func (b *backend) deleteIf(ctx context.Context, res schema.GroupVersionResource, name, uid, rv string) bool {
	pre := &metav1.Preconditions{UID: (*types.UID)(&uid)}
	if rv != "" {
		pre.ResourceVersion = &rv
	}
	return b.dyn.Resource(res).Namespace(b.ns).Delete(ctx, name, metav1.DeleteOptions{Preconditions: pre}) == nil
}
