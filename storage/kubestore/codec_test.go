package kubestore

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/itemops/itemops/storage/kv"
)

// sampleKeys returns keys of a few sizes, empty values and a key that is a prefix of
// another among them.
func sampleKeys() map[string]item {
	keys := map[string]item{
		"":    {value: []byte("empty key"), ver: 1},
		"r":   {value: nil, ver: 7},
		"ra":  {value: []byte{0, 1, 2}, ver: 7},
		"o\n": {value: bytes.Repeat([]byte("x"), 300), ver: 3},
	}
	for i := range 20 {
		keys[fmt.Sprintf("o%03d", i)] = item{value: []byte(fmt.Sprintf(`{"id":%d}`, i)), ver: kv.Version(i + 1)}
	}
	return keys
}

var cmpItems = cmp.Comparer(func(a, b item) bool { return a.ver == b.ver && bytes.Equal(a.value, b.value) })

func TestKeysRoundTrip(t *testing.T) {
	for _, keys := range []map[string]item{{}, sampleKeys()} {
		data, err := encodeKeys(keys)
		if err != nil {
			t.Fatalf("encodeKeys: %v", err)
		}
		got, err := decodeKeys(data, 20)
		if err != nil {
			t.Fatalf("decodeKeys: %v", err)
		}
		if diff := cmp.Diff(keys, got, cmpItems); diff != "" {
			t.Errorf("decodeKeys(encodeKeys(keys)) (-want +got):\n%s", diff)
		}
	}
}

// TestKeysRefuseDamage cuts the encoded keys at every byte and flips every bit of them:
// each cut is refused, and each flip is refused or decodes to the keys written (a flip
// in a gzip header field that nothing reads).
func TestKeysRefuseDamage(t *testing.T) {
	keys := sampleKeys()
	data, err := encodeKeys(keys)
	if err != nil {
		t.Fatalf("encodeKeys: %v", err)
	}
	for n := range len(data) {
		if _, err := decodeKeys(data[:n], 20); !errors.Is(err, errData) {
			t.Fatalf("decodeKeys of the first %d of %d bytes: %v, want errData", n, len(data), err)
		}
	}
	for i := range len(data) * 8 {
		d := bytes.Clone(data)
		d[i/8] ^= 1 << (i % 8)
		got, err := decodeKeys(d, 20)
		if err != nil {
			if !errors.Is(err, errData) {
				t.Fatalf("decodeKeys with bit %d flipped: %v, want errData", i, err)
			}
			continue
		}
		if diff := cmp.Diff(keys, got, cmpItems); diff != "" {
			t.Fatalf("decodeKeys with bit %d flipped took damaged keys (-want +got):\n%s", i, diff)
		}
	}
}

// TestKeysRefuseVersions refuses versions that the object's sequence number cannot have
// given, and keys out of order.
func TestKeysRefuseVersions(t *testing.T) {
	data, err := encodeKeys(sampleKeys())
	if err != nil {
		t.Fatalf("encodeKeys: %v", err)
	}
	if _, err := decodeKeys(data, 19); !errors.Is(err, errData) {
		t.Errorf("decodeKeys with a version above seq: %v, want errData", err)
	}
	zero, err := encodeKeys(map[string]item{"a": {ver: 0}})
	if err != nil {
		t.Fatalf("encodeKeys: %v", err)
	}
	if _, err := decodeKeys(zero, 5); !errors.Is(err, errData) {
		t.Errorf("decodeKeys with version 0: %v, want errData", err)
	}
}

func FuzzDecodeKeys(f *testing.F) {
	data, err := encodeKeys(sampleKeys())
	if err != nil {
		f.Fatalf("encodeKeys: %v", err)
	}
	f.Add(data, uint64(20))
	f.Fuzz(func(t *testing.T, data []byte, seq uint64) {
		keys, err := decodeKeys(data, kv.Version(seq))
		if err != nil {
			if !errors.Is(err, errData) {
				t.Fatalf("decodeKeys: %v, want errData", err)
			}
			return
		}
		again, err := encodeKeys(keys)
		if err != nil {
			t.Fatalf("encodeKeys: %v", err)
		}
		back, err := decodeKeys(again, kv.Version(seq))
		if err != nil {
			t.Fatalf("decodeKeys of what encodeKeys wrote: %v", err)
		}
		if diff := cmp.Diff(keys, back, cmpItems); diff != "" {
			t.Fatalf("round trip (-want +got):\n%s", diff)
		}
	})
}
