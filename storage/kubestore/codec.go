package kubestore

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/itemops/itemops/storage/kv"
)

// maxDecodedBytes bounds what one object's keys may take once decompressed, so that a
// small object edited into a compression bomb is refused rather than read into memory.
const maxDecodedBytes = 256 << 20

// An item is the value of a key and the version of the commit that wrote it.
type item struct {
	value []byte
	ver   kv.Version
}

// errData is the cause of every error decodeKeys returns; the caller adds the object.
var errData = errors.New("damaged key data")

// encodeKeys returns the gzip of keys in key order, each as the uvarint length of the
// key, the key, the uvarint version, the uvarint length of the value and the value.
func encodeKeys(keys map[string]item) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	var n [binary.MaxVarintLen64]byte
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		it := keys[k]
		zw.Write(binary.AppendUvarint(n[:0], uint64(len(k))))
		zw.Write([]byte(k))
		zw.Write(binary.AppendUvarint(n[:0], uint64(it.ver)))
		zw.Write(binary.AppendUvarint(n[:0], uint64(len(it.value))))
		zw.Write(it.value)
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// decodeKeys returns the keys that encodeKeys wrote into data. It refuses, with an error
// wrapping errData, data that is not one gzip stream of such entries, whose checksum
// does not hold, whose keys are not in strictly increasing order, whose versions are 0
// or above seq, or that decompresses to more than maxDecodedBytes.
func decodeKeys(data []byte, seq kv.Version) (map[string]item, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errData, err)
	}
	zr.Multistream(false)
	r := bufio.NewReader(io.LimitReader(zr, maxDecodedBytes+1))
	keys := map[string]item{}
	var prev []byte
	read := 0
	field := func() ([]byte, error) {
		n, err := binary.ReadUvarint(r)
		if err != nil {
			return nil, err
		}
		if n > uint64(maxDecodedBytes-read) {
			return nil, fmt.Errorf("a length of %d bytes past the end", n)
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		read += int(n)
		return b, nil
	}
	for {
		if _, err := r.Peek(1); err == io.EOF {
			break
		}
		k, err := field()
		if err != nil {
			return nil, fmt.Errorf("%w: key after %q: %v", errData, prev, err)
		}
		if prev != nil && bytes.Compare(k, prev) <= 0 {
			return nil, fmt.Errorf("%w: key %q after %q", errData, k, prev)
		}
		v, err := binary.ReadUvarint(r)
		if err != nil {
			return nil, fmt.Errorf("%w: version of key %q: %v", errData, k, err)
		}
		if v == 0 || v > uint64(seq) {
			return nil, fmt.Errorf("%w: key %q has version %d, outside 1 to %d", errData, k, v, seq)
		}
		val, err := field()
		if err != nil {
			return nil, fmt.Errorf("%w: value of key %q: %v", errData, k, err)
		}
		keys[string(k)] = item{value: val, ver: kv.Version(v)}
		prev = k
	}
	// The entries ended at the end of what the limit let through: gzip has checked its
	// checksum there unless the limit cut the stream, which a byte more shows.
	var more [1]byte
	switch _, err := io.ReadFull(zr, more[:]); {
	case err == nil:
		return nil, fmt.Errorf("%w: more than %d bytes decompressed", errData, maxDecodedBytes)
	case err != io.EOF:
		return nil, fmt.Errorf("%w: %v", errData, err)
	}
	return keys, nil
}
