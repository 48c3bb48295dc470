package kubestore

import (
	"encoding/json"
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/kv"
)

// FuzzDecodeObject decodes any JSON as a run's object and as a chunk: each decode
// succeeds or fails with operations.ErrCorrupt, and never panics.
func FuzzDecodeObject(f *testing.F) {
	p := kv.Partition{Kind: phase.Backup, Name: "b"}
	b := &backend{ns: "ns", maxObjectBytes: 1 << 20}
	head, err := b.object(p, stored{}, stored{keys: map[string]item{"r": {value: []byte("x"), ver: 3}}, seq: 3, recordKey: "r"},
		kv.RunChange{Record: []byte("x"), Phase: phase.New}, mustEncode(f, map[string]item{"r": {value: []byte("x"), ver: 3}}), nil)
	if err != nil {
		f.Fatalf("object: %v", err)
	}
	js, err := head.MarshalJSON()
	if err != nil {
		f.Fatalf("MarshalJSON: %v", err)
	}
	f.Add(js)
	f.Add([]byte(`{"status":{"store":{"seq":3,"chunks":[{"name":"c","first":"","last":"","sha256":""}]}}}`))
	f.Fuzz(func(t *testing.T, js []byte) {
		var m map[string]any
		if json.Unmarshal(js, &m) != nil {
			return
		}
		obj := &unstructured.Unstructured{Object: m}
		if _, err := decodeObject(runsResource, p, obj, "0123"); err != nil && !errors.Is(err, operations.ErrCorrupt) {
			t.Fatalf("decodeObject of a run: %v, want nil or ErrCorrupt", err)
		}
		if _, err := decodeObject(chunksResource, kv.Partition{}, obj, ""); err != nil && !errors.Is(err, operations.ErrCorrupt) {
			t.Fatalf("decodeObject of the format chunk: %v, want nil or ErrCorrupt", err)
		}
		ref := chunkRef{name: "c", first: "", last: "\xff"}
		if _, err := decodeChunk(obj, ref, obj, 3); err != nil && !errors.Is(err, operations.ErrCorrupt) {
			t.Fatalf("decodeChunk: %v, want nil or ErrCorrupt", err)
		}
	})
}

func mustEncode(f *testing.F, keys map[string]item) []byte {
	data, err := encodeKeys(keys)
	if err != nil {
		f.Fatalf("encodeKeys: %v", err)
	}
	return data
}
