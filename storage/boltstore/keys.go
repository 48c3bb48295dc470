package boltstore

import (
	"encoding/binary"
	"fmt"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// Top-level buckets, and the buckets inside each run's operations bucket.
var (
	bucketMeta      = []byte("meta")
	bucketRuns      = []byte("runs")
	bucketRunPhases = []byte("run-phases")
	bucketOps       = []byte("operations")

	bucketUnfinished = []byte("unfinished")
	bucketFinished   = []byte("finished")
	bucketIDs        = []byte("ids")
)

// Keys of the meta bucket.
var (
	keyFormat  = []byte("format")
	keyVersion = []byte("version")
)

// formatName is the value of meta/format in every itemops boltstore.
const formatName = "itemops.boltstore"

// schemaVersion is the layout this package writes and reads.
const schemaVersion = 1

// maxNameLen and maxIDLen bound what fits in a bbolt key with the prefixes added to it.
const (
	maxNameLen = 16 << 10
	maxIDLen   = 16 << 10
)

// Kind bytes, the first byte of a run key. Backup sorts before Restore.
const (
	kindBackup  = 'B'
	kindRestore = 'R'
)

// runKey returns the key of o's run: its kind byte, then its name. Keys sort by kind, then
// by name. o must be valid.
func runKey(o operations.Owner) []byte {
	k := make([]byte, 0, 1+len(o.Name))
	if o.Kind == phase.Backup {
		k = append(k, kindBackup)
	} else {
		k = append(k, kindRestore)
	}
	return append(k, o.Name...)
}

// kindPrefix returns the run-key prefix of kind k, or nil when k is not a kind.
func kindPrefix(k phase.Kind) []byte {
	switch k {
	case phase.Backup:
		return []byte{kindBackup}
	case phase.Restore:
		return []byte{kindRestore}
	}
	return nil
}

// ownerOf returns the owner (without UID) a run key names.
func ownerOf(key []byte) (operations.Owner, error) {
	if len(key) < 2 {
		return operations.Owner{}, fmt.Errorf("run key %q: %w", key, ErrCorrupt)
	}
	var o operations.Owner
	switch key[0] {
	case kindBackup:
		o.Kind = phase.Backup
	case kindRestore:
		o.Kind = phase.Restore
	default:
		return operations.Owner{}, fmt.Errorf("run key %q: unknown kind byte: %w", key, ErrCorrupt)
	}
	o.Name = string(key[1:])
	return o, nil
}

// phaseKey returns the key of run key rk in the run-phase index: the phase, a zero byte,
// then rk. Phases hold no zero byte.
func phaseKey(p phase.Phase, rk []byte) []byte {
	k := make([]byte, 0, len(p)+1+len(rk))
	k = append(k, p...)
	k = append(k, 0)
	return append(k, rk...)
}

// seqKey is the 8-byte big-endian form of an operation's first-put sequence number, so
// that keys sort in first-put order.
func seqKey(seq uint64) [8]byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], seq)
	return k
}

// checkOwnerKey reports an error wrapping [operations.ErrInvalid] when o's name is too long
// for a key. o must have passed [operations.Owner.Validate].
func checkOwnerKey(o operations.Owner) error {
	if len(o.Name) > maxNameLen {
		return fmt.Errorf("owner %s: name of %d bytes exceeds the store's limit of %d: %w", o.Kind, len(o.Name), maxNameLen, operations.ErrInvalid)
	}
	return nil
}
