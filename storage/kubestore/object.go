package kubestore

import (
	"encoding/base64"
	"math/rand/v2"

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
	roleRun     = "run"
	roleFormat  = "format"
	maxSeqStart = 1 << 62
)

// A stored is what one object holds of one partition: its keys, the sequence number of
// the last commit that wrote them (every key's version is at most seq), and, in a run's
// object, which key holds the run's record.
type stored struct {
	obj       *unstructured.Unstructured // as read; nil when the object is absent
	keys      map[string]item
	seq       kv.Version
	recordKey string
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
// object, when obj is not in the shape the store writes.
func decodeObject(resource schema.GroupVersionResource, p kv.Partition, obj *unstructured.Unstructured) (stored, error) {
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
	}
	return s, nil
}

// newSeq returns the sequence number of the first commit of an object: a random number
// below maxSeqStart, so that a run deleted and created again matches no condition read
// from its earlier object.
func newSeq() kv.Version {
	return kv.Version(rand.Uint64N(maxSeqStart-1) + 1)
}
