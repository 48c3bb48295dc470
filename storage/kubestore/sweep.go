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
// this process's, a run's object labelled itemops.io/role=pending may still be the
// first commit of its run in flight; a sweep deletes it only after that. The tests
// shorten it.
var pendingGrace = time.Minute

// Sweep deletes what commits that died before their commit point left behind: the
// chunks that no run's object names and that no commit can name any more, and the
// objects of runs whose first commit never came (labelled itemops.io/role=pending) once
// they are a minute old. It returns how many objects it deleted. [Open] sweeps the
// namespace once; a process that runs for long may call Sweep from time to time. A
// sweep reads the metadata of the namespace's chunks and pending objects (two LISTs)
// and the object of each run that has chunks (a GET each), and deletes one object a
// request.
//
// Sweep never deletes what a commit in flight, of this process or another, will name.
// A commit creates its chunks with the sequence number that its write of the run's
// object gives the run, one more than the object's when the commit read it (the first
// commit of a run, the pending object's own), and that write is conditional on the
// object being unchanged. Sweep reads the chunks first and
// the run's object after them, and deletes a chunk only when that object does not name
// it and its number is at most the object's: the object has then moved past the
// commit that made the chunk, whose write can no longer succeed, and no later commit
// names a chunk that the object does not. A chunk whose run's object is gone, or is
// another object of the same name, belongs to no run any more. A run's object labelled
// pending is deleted only when it has not changed since Sweep read it; a commit in
// flight that meets its deletion creates the object again, so that a clock that is
// wrong costs that commit a retry, never a key.
//
// Sweep fails with ctx.Err() (wrapped) when ctx ends first, and with the API server's
// error, wrapped, when a read fails; a delete that fails, or finds the object gone
// or changed, is left to the next sweep. A run's object that does not decode is left
// alone, with its chunks, and reported with an error wrapping operations.ErrCorrupt
// that names it, after the rest of the sweep is done.
func (s *Store) Sweep(ctx context.Context) (int, error) {
	return s.b.sweep(ctx)
}

// A chunkMeta is what a sweep knows of one chunk: its name, UID, the sequence number
// its name carries, and the UID of the run's object that owns it.
type chunkMeta struct {
	name     string
	uid      string
	seq      kv.Version
	ownerUID string
}

// chunkSeq returns the sequence number that the name of a chunk carries (see
// createChunk), or false when name is not a chunk's.
func chunkSeq(name string) (kv.Version, bool) {
	parts := strings.Split(name, ".")
	if len(parts) != 4 || parts[0] != "c" || len(parts[2]) != 16 {
		return 0, false
	}
	seq, err := strconv.ParseUint(parts[2], 16, 64)
	return kv.Version(seq), err == nil && seq > 0
}

func (b *backend) sweep(ctx context.Context) (int, error) {
	// The chunks first, then the runs' objects: see Store.Sweep.
	owned := map[string][]chunkMeta{} // by the name of the run's object
	err := b.listMeta(ctx, chunksResource, labelRole+"="+roleChunk, func(m metav1.PartialObjectMetadata) {
		seq, ok := chunkSeq(m.Name)
		refs := m.OwnerReferences
		if !ok || len(refs) != 1 || refs[0].Kind != runKind {
			return
		}
		owned[refs[0].Name] = append(owned[refs[0].Name], chunkMeta{name: m.Name, uid: string(m.UID), seq: seq, ownerUID: string(refs[0].UID)})
	})
	if err != nil {
		return 0, err
	}
	deleted := 0
	gone := map[string]bool{} // the UIDs of the pending runs' objects deleted here
	err = b.listMeta(ctx, runsResource, labelRole+"="+rolePending, func(m metav1.PartialObjectMetadata) {
		if time.Since(m.CreationTimestamp.Time) < pendingGrace {
			return
		}
		if b.deleteIf(ctx, runsResource, m.Name, string(m.UID), m.ResourceVersion) {
			deleted++
			gone[string(m.UID)] = true
		}
	})
	if err != nil {
		return deleted, err
	}
	var damaged []error
	client := b.dyn.Resource(runsResource).Namespace(b.ns)
	for name, chunks := range owned {
		head, err := b.getObject(ctx, client, runsResource, name)
		if err != nil {
			return deleted, err
		}
		named, limit := map[string]bool{}, kv.Version(0)
		if head != nil && !gone[string(head.GetUID())] {
			kind, _, _ := unstructured.NestedString(head.Object, "spec", "owner", "kind")
			owner, _, _ := unstructured.NestedString(head.Object, "spec", "owner", "name")
			s, err := decodeObject(runsResource, kv.Partition{Kind: phase.Kind(kind), Name: owner}, head)
			if err != nil {
				damaged = append(damaged, err)
				continue
			}
			for _, c := range s.chunks {
				named[c.ref.name] = true
			}
			// A commit in flight on a pending object makes chunks of the object's own
			// number; on a run's, of one more.
			limit = s.seq
			if head.GetLabels()[labelRole] == rolePending {
				limit--
			}
		}
		for _, c := range chunks {
			ours := head != nil && c.ownerUID == string(head.GetUID()) && !gone[c.ownerUID]
			if ours && (named[c.name] || c.seq > limit) {
				continue
			}
			if b.deleteIf(ctx, chunksResource, c.name, c.uid, "") {
				deleted++
			}
		}
	}
	return deleted, errors.Join(damaged...)
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
