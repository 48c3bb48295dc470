package kubestore

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/kv"
)

// Group and Version are the API group and version of the resources the store keeps its
// data in (see the package documentation).
const (
	Group   = "store.itemops.io"
	Version = "v1alpha1"
)

// The resources, their kinds and the format the store writes in each run's spec.
var (
	runsResource   = schema.GroupVersionResource{Group: Group, Version: Version, Resource: "itemopsruns"}
	chunksResource = schema.GroupVersionResource{Group: Group, Version: Version, Resource: "itemopschunks"}
)

const (
	runKind     = "ItemopsRun"
	chunkKind   = "ItemopsChunk"
	specFormat  = "itemops.kv/1"
	labelRole   = "itemops.io/role"
	labelKind   = "itemops.io/kind"
	labelPhase  = "itemops.io/phase"
	labelRun    = "itemops.io/run"
	labelStore  = "itemops.io/store"
	labelNS     = "itemops.io/namespace"
	labelName   = "itemops.io/name"
	roleRun     = "run"
	rolePending = "pending"
	roleChunk   = "chunk"
	roleFormat  = "format"
	roleStore   = "store"
	maxSeqStart = 1 << 62
)

// A stored is what one object, with the chunks it names, holds of one partition: its
// keys, the sequence number of the last commit that wrote them (every key's version is
// at most seq), and, in a run's object, which key holds the run's record.
type stored struct {
	obj       *unstructured.Unstructured // as read; nil when the object is absent
	keys      map[string]item            // every key: inline and in chunks
	seq       kv.Version
	recordKey string
	chunks    []chunk  // the chunks a run's object names, in its order
	ops       opCounts // in a run's object: its operations, as status.operations counts them
	// pending says that obj is the object of a run whose first commit is in flight or
	// never came (see createPending): it holds no key, and the run does not exist.
	pending bool
}

// An opCounts is how many operations a run has, and how many of them are finished, as
// the RunChanges of its commits added them up (see kv.RunChange).
type opCounts struct {
	completed, total int64
}

// A chunk is an ItemopsChunk that holds some of a spilled run's keys. It is written
// once and never changed: a commit that changes its keys writes a new chunk.
type chunk struct {
	ref  chunkRef
	keys map[string]item
}

// A chunkRef is what a run's object says of one of its chunks: its name, its first and
// last key, and the SHA-256 of its data, in hex.
type chunkRef struct {
	name, first, last, sum string
}

// storePath is where an object of resource keeps its stored fields.
func storePath(resource schema.GroupVersionResource) []string {
	if resource == runsResource {
		return []string{"status", "store"}
	}
	return []string{"spec"}
}

// decodeObject returns what obj, an object of resource read from the API, holds of
// partition p. It fails with an error wrapping operations.ErrCorrupt, naming the
// object, when obj is not in the shape the store writes, or, when identity is not
// empty, when obj is a run's object that names a store of another identity (see
// Store.Open; one that names none was written before stores had identities). What
// tells a pending object from a run's is its data, not its labels: a pending object has
// no status.store.sum, and labels that say so.
func decodeObject(resource schema.GroupVersionResource, p kv.Partition, obj *unstructured.Unstructured, identity string) (stored, error) {
	bad := func(format string, args ...any) error {
		return corrupt(resource.Resource, obj.GetNamespace(), obj.GetName(), format, args...)
	}
	if resource == runsResource {
		kind, _, err1 := unstructured.NestedString(obj.Object, "spec", "owner", "kind")
		name, _, err2 := unstructured.NestedString(obj.Object, "spec", "owner", "name")
		format, _, err3 := unstructured.NestedString(obj.Object, "spec", "format")
		switch {
		case err1 != nil || err2 != nil || err3 != nil:
			return stored{}, bad("spec is not in the store's shape")
		case format != specFormat:
			return stored{}, bad("format %q, want %q", format, specFormat)
		case phase.Kind(kind) != p.Kind || name != p.Name:
			return stored{}, bad("holds the run of %s %q, not of %s %q", kind, name, p.Kind, p.Name)
		}
	}
	path := storePath(resource)
	seq, found, err := unstructured.NestedInt64(obj.Object, append(path, "seq")...)
	if err != nil || !found || seq < 1 {
		return stored{}, bad("no sequence number")
	}
	if resource == runsResource {
		id, found, err := unstructured.NestedString(obj.Object, append(path, "identity")...)
		if err != nil || identity != "" && found && id != identity {
			return stored{}, bad("names the store %q, not %q, which this Store opened", id, identity)
		}
		if _, found, _ := unstructured.NestedFieldNoCopy(obj.Object, append(path, "sum")...); !found {
			if !isPending(obj, p) {
				return stored{}, bad("no status.store.sum")
			}
			return stored{obj: obj, keys: map[string]item{}, seq: kv.Version(seq), pending: true}, nil
		}
	}
	enc, _, err := unstructured.NestedString(obj.Object, append(path, "data")...)
	if err != nil {
		return stored{}, bad("data is not a string")
	}
	data, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return stored{}, bad("data is not base64: %v", err)
	}
	keys, err := decodeKeys(data, kv.Version(seq))
	if err != nil {
		return stored{}, bad("%v", err)
	}
	s := stored{obj: obj, keys: keys, seq: kv.Version(seq)}
	if resource == runsResource {
		got, _, _ := unstructured.NestedString(obj.Object, append(path, "sum")...)
		if want, err := headSum(obj); err != nil || got != want {
			return stored{}, bad("status and labels do not have the SHA-256 that status.store.sum gives")
		}
		rk, found, err := unstructured.NestedString(obj.Object, append(path, "recordKey")...)
		if err != nil || !found {
			return stored{}, bad("no record key")
		}
		raw, err := base64.StdEncoding.DecodeString(rk)
		if err != nil {
			return stored{}, bad("record key is not base64: %v", err)
		}
		if _, ok := keys[string(raw)]; !ok {
			return stored{}, bad("the record key %q holds no value", raw)
		}
		s.recordKey = string(raw)
		if err := checkOwnerLabels(obj, p.Name); err != nil {
			return stored{}, bad("%v", err)
		}
		if s.ops, err = decodeSummary(obj); err != nil {
			return stored{}, bad("%v", err)
		}
		refs, _, err := unstructured.NestedSlice(obj.Object, append(path, "chunks")...)
		if err != nil {
			return stored{}, bad("chunks is not a list")
		}
		for i, r := range refs {
			ref, err := decodeChunkRef(r)
			if err != nil {
				return stored{}, bad("chunk %d: %v", i, err)
			}
			s.chunks = append(s.chunks, chunk{ref: ref})
		}
	}
	return s, nil
}

// isPending reports whether obj, a run's object of p without status.store.sum, is in
// the shape of a pending object (see createPending): a status that holds only the
// sequence number and the store's identity, and the labels that createPending gives it.
func isPending(obj *unstructured.Unstructured, p kv.Partition) bool {
	status, _, _ := unstructured.NestedMap(obj.Object, "status")
	store, _ := status["store"].(map[string]any)
	delete(store, "seq")
	delete(store, "identity")
	l := obj.GetLabels()
	return len(status) == 1 && len(store) == 0 && l[labelRole] == rolePending && l[labelKind] == string(p.Kind) && l[labelPhase] == ""
}

// headSum returns the SHA-256, in hex, of what a run's object says of the run beside
// its spec, which the API server keeps immutable: the labels itemops.io/role, kind and
// phase, and the whole status but status.store.sum (the phase, the summary of
// operations and history that kubectl shows, and the keys), as JSON with sorted keys.
// A hand edit of any of them (a phase rewritten, a count changed, a chunk dropped from
// the list) then shows as damage rather than as a run that reads, or shows, otherwise.
func headSum(obj *unstructured.Unstructured) (string, error) {
	status, _, err := unstructured.NestedMap(obj.Object, "status")
	if err != nil {
		return "", err
	}
	if store, ok := status["store"].(map[string]any); ok {
		delete(store, "sum")
	}
	l := obj.GetLabels()
	js, err := json.Marshal(map[string]any{
		"labels": []string{l[labelRole], l[labelKind], l[labelPhase]},
		"status": status,
	})
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(js)
	return hex.EncodeToString(sum[:]), nil
}

// decodeChunkRef returns the chunkRef that v, an element of status.store.chunks, holds.
func decodeChunkRef(v any) (chunkRef, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return chunkRef{}, fmt.Errorf("not an object")
	}
	var ref chunkRef
	for field, dst := range map[string]*string{"name": &ref.name, "first": &ref.first, "last": &ref.last, "sha256": &ref.sum} {
		v, ok := m[field].(string)
		if !ok {
			return chunkRef{}, fmt.Errorf("no %s", field)
		}
		*dst = v
	}
	first, err1 := base64.StdEncoding.DecodeString(ref.first)
	last, err2 := base64.StdEncoding.DecodeString(ref.last)
	if err1 != nil || err2 != nil || string(first) > string(last) {
		return chunkRef{}, fmt.Errorf("its first and last keys are not a range")
	}
	ref.first, ref.last = string(first), string(last)
	return ref, nil
}

// encodeChunkRef returns ref as an element of status.store.chunks.
func encodeChunkRef(ref chunkRef) map[string]any {
	return map[string]any{
		"name":   ref.name,
		"first":  base64.StdEncoding.EncodeToString([]byte(ref.first)),
		"last":   base64.StdEncoding.EncodeToString([]byte(ref.last)),
		"sha256": ref.sum,
	}
}

// decodeChunk returns the keys of obj, an ItemopsChunk that ref names as a chunk of
// the run whose object head holds seq. It fails with an error wrapping
// operations.ErrCorrupt, naming both objects, when obj's data is not what ref says or a
// key lies outside ref's range.
func decodeChunk(head *unstructured.Unstructured, ref chunkRef, obj *unstructured.Unstructured, seq kv.Version) (map[string]item, error) {
	bad := func(format string, args ...any) error {
		return corrupt(runsResource.Resource, head.GetNamespace(), head.GetName(), "chunk %s: %s", ref.name, fmt.Sprintf(format, args...))
	}
	enc, _, err := unstructured.NestedString(obj.Object, "spec", "data")
	if err != nil {
		return nil, bad("data is not a string")
	}
	data, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return nil, bad("data is not base64: %v", err)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != ref.sum {
		return nil, bad("data does not have the SHA-256 that the run's object gives")
	}
	keys, err := decodeKeys(data, seq)
	if err != nil {
		return nil, bad("%v", err)
	}
	for k := range keys {
		if k < ref.first || k > ref.last {
			return nil, bad("key %q outside the chunk's range", k)
		}
	}
	return keys, nil
}

// newSeq returns the sequence number of the first commit of an object: a random number
// below maxSeqStart, so that a run deleted and created again matches no condition read
// from its earlier object.
func newSeq() kv.Version {
	return kv.Version(rand.Uint64N(maxSeqStart-1) + 1)
}

// setSummary sets in obj, a run's object, what kubectl shows of the run after a commit
// that makes run: status.operations from ops, and, when the commit writes the run's
// record, status.phase and status.history.
func setSummary(obj *unstructured.Unstructured, ops opCounts, run kv.RunChange) error {
	summary := map[string]any{
		"completed": ops.completed,
		"total":     ops.total,
		"summary":   fmt.Sprintf("%d/%d", ops.completed, ops.total),
	}
	if err := unstructured.SetNestedMap(obj.Object, summary, "status", "operations"); err != nil {
		return err
	}
	if run.Record == nil {
		return nil
	}
	history := make([]any, len(run.History))
	for i, t := range run.History {
		history[i] = map[string]any{
			"from":   string(t.From),
			"to":     string(t.To),
			"event":  string(t.Event),
			"time":   t.Time.UTC().Format(time.RFC3339Nano),
			"reason": t.Reason,
		}
	}
	if err := unstructured.SetNestedSlice(obj.Object, history, "status", "history"); err != nil {
		return err
	}
	return unstructured.SetNestedField(obj.Object, string(run.Phase), "status", "phase")
}

// decodeSummary returns the counts of status.operations of obj, a run's object.
func decodeSummary(obj *unstructured.Unstructured) (opCounts, error) {
	completed, _, err1 := unstructured.NestedInt64(obj.Object, "status", "operations", "completed")
	total, _, err2 := unstructured.NestedInt64(obj.Object, "status", "operations", "total")
	if err1 != nil || err2 != nil || completed < 0 || completed > total {
		return opCounts{}, fmt.Errorf("status.operations does not count operations")
	}
	return opCounts{completed: completed, total: total}, nil
}
