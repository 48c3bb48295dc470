package boltstore

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/itemops/itemops/storage/kv"
)

// Every value of the kv bucket (schema 3) is the version it was written at (8 bytes,
// big-endian), the engine's value, then a checksum of the entry (4 bytes, big-endian):
// the CRC-32C of the key, the version and the engine's value, seeded with the key's
// length. bbolt keeps no checksums of its pages, so these are what tell a
// changed byte of a key or value from the data: CRC-32C finds every change of up to 32
// bits in a row, so every changed byte, and any other change but one in 2^32.
const (
	versionSize = 8
	sumSize     = 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// entrySum is the checksum of the entry of key whose value, without its checksum, is v.
// The key's length seeds the CRC, which makes the sum depend on where the key ends as
// a length prefix would, without a buffer for it.
func entrySum(key, v []byte) uint32 {
	return crc32.Update(crc32.Update(uint32(len(key)), castagnoli, key), castagnoli, v)
}

// appendEntry appends to b the stored value of key: seq, value and the checksum.
func appendEntry(b, key []byte, seq uint64, value []byte) []byte {
	start := len(b)
	b = append(binary.BigEndian.AppendUint64(b, seq), value...)
	return binary.BigEndian.AppendUint32(b, entrySum(key, b[start:]))
}

// parseValue checks the stored value v of key against its checksum and returns the
// engine's value and its version. A value that fails is an error wrapping
// [ErrCorrupt].
func parseValue(k, v []byte) ([]byte, kv.Version, error) {
	value, version, err := checkValue(k, v)
	if err != nil {
		return nil, 0, fmt.Errorf("%v: %w", err, ErrCorrupt)
	}
	return value, version, nil
}

// checkValue is parseValue with an error that does not wrap ErrCorrupt.
func checkValue(k, v []byte) ([]byte, kv.Version, error) {
	if len(v) < versionSize+sumSize {
		return nil, 0, fmt.Errorf("value of key %q is %d bytes, shorter than its version and checksum", k, len(v))
	}
	body := v[:len(v)-sumSize]
	if want, got := binary.BigEndian.Uint32(v[len(body):]), entrySum(k, body); want != got {
		return nil, 0, fmt.Errorf("key %q fails its checksum (stored %08x, computed %08x)", k, want, got)
	}
	return body[versionSize:], kv.Version(binary.BigEndian.Uint64(body)), nil
}
