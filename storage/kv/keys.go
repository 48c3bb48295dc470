package kv

import (
	"encoding/binary"
	"fmt"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// The key layout; see the package documentation.
var (
	keyFormat = []byte("format")
	prefixRun = byte('r')
	prefixIdx = byte('p')
	prefixOps = byte('o')
)

// Suffixes of the keys under a run's operations prefix.
const (
	opsMeta       = 'm' // the run's operations metadata: next sequence number, staged batch
	opsUnfinished = 'u' // + 8-byte sequence number: a New or InProgress operation's record
	opsFinished   = 'f' // + 8-byte sequence number: a Completed or Failed operation's record
	opsID         = 'i' // + operation ID: 8-byte sequence number and phase code
	opsStaged     = 't' // + 8-byte batch number + 4-byte chunk number: a staged chunk
)

// formatValue is what the format key holds in every store of this layout.
const formatValue = "itemops.kv/1"

// Kind bytes. Backup sorts before Restore.
const (
	kindBackup  = 'B'
	kindRestore = 'R'
)

func kindByte(k phase.Kind) byte {
	if k == phase.Backup {
		return kindBackup
	}
	return kindRestore
}

func kindOf(b byte) (phase.Kind, bool) {
	switch b {
	case kindBackup:
		return phase.Backup, true
	case kindRestore:
		return phase.Restore, true
	}
	return "", false
}

// runKey is "r", the kind byte, then the name, so run keys sort by kind, then name.
func runKey(o operations.Owner) []byte {
	k := make([]byte, 0, 2+len(o.Name))
	return append(append(k, prefixRun, kindByte(o.Kind)), o.Name...)
}

// ownerOfRunKey returns the owner (without UID) a run key names.
func ownerOfRunKey(k []byte) (operations.Owner, error) {
	if len(k) < 3 || k[0] != prefixRun {
		return operations.Owner{}, fmt.Errorf("run key %q: %w", k, operations.ErrCorrupt)
	}
	kind, ok := kindOf(k[1])
	if !ok {
		return operations.Owner{}, fmt.Errorf("run key %q: unknown kind: %w", k, operations.ErrCorrupt)
	}
	return operations.Owner{Kind: kind, Name: string(k[2:])}, nil
}

// idxPrefix is the prefix of the phase index entries of runs of kind in phase p: "p",
// the kind byte, the phase, a zero byte. Each entry appends the run's name and holds a
// copy of its record, so runs are listed by phase with one scan.
func idxPrefix(kind phase.Kind, p phase.Phase) []byte {
	k := make([]byte, 0, 3+len(p))
	k = append(append(k, prefixIdx, kindByte(kind)), p...)
	return append(k, 0)
}

func idxKey(o operations.Owner, p phase.Phase) []byte { return append(idxPrefix(o.Kind, p), o.Name...) }

// opsPrefix is the prefix of every key of the operations of o's run: "o", the kind byte,
// the name's length as a varint, then the name, so that no run's prefix is a prefix of
// another's.
func opsPrefix(o operations.Owner) []byte {
	k := make([]byte, 0, 2+binary.MaxVarintLen64+len(o.Name)+1+8)
	k = append(k, prefixOps, kindByte(o.Kind))
	k = binary.AppendUvarint(k, uint64(len(o.Name)))
	return append(k, o.Name...)
}

// opsKey returns a new key under a run's operations prefix: the prefix, then suffix (one
// of opsMeta, opsUnfinished...), with room left for the 8-byte number that most such keys
// end with (a sequence number, a batch number), so appending it does not copy the key.
func opsKey(prefix []byte, suffix byte) []byte {
	k := make([]byte, 0, len(prefix)+1+8)
	return append(append(k, prefix...), suffix)
}

// recordKey is the key of the record with sequence number seq and phase code code.
func recordKey(prefix []byte, seq uint64, code byte) []byte {
	return appendRecordKey(make([]byte, 0, len(prefix)+1+8), prefix, seq, code)
}

// appendRecordKey appends the key of recordKey to b.
func appendRecordKey(b, prefix []byte, seq uint64, code byte) []byte {
	s := byte(opsFinished)
	if unfinishedCode(code) {
		s = opsUnfinished
	}
	return binary.BigEndian.AppendUint64(append(append(b, prefix...), s), seq)
}

// keyArena hands out keys cut from one buffer, so that a batch's keys cost an
// allocation for a few hundred rather than one each. A key it returns stays valid when
// it grows.
type keyArena struct{ buf []byte }

// record returns the key of recordKey.
func (a *keyArena) record(prefix []byte, seq uint64, code byte) []byte {
	start := len(a.buf)
	a.buf = appendRecordKey(a.buf, prefix, seq, code)
	return a.buf[start:len(a.buf):len(a.buf)]
}

func idKey(prefix []byte, id string) []byte { return append(opsKey(prefix, opsID), id...) }

// end returns the smallest key after every key that starts with prefix, or nil when
// there is none (prefix is all 0xff).
func end(prefix []byte) []byte {
	e := append([]byte(nil), prefix...)
	for i := len(e) - 1; i >= 0; i-- {
		if e[i] < 0xff {
			e[i]++
			return e[:i+1]
		}
	}
	return nil
}

// notFoundIfInvalid checks an owner that a call reads or changes the run of, before the
// call reads anything: an owner that no run can have (one that fails
// operations.Owner.Validate, a name too long included) has none, so it returns an error
// wrapping operations.ErrNotFound.
func notFoundIfInvalid(o operations.Owner) error {
	if err := o.Validate(); err != nil {
		return fmt.Errorf("%w: %w", operations.ErrNotFound, err)
	}
	return nil
}

// An idEntry is the ID index value of one operation.
type idEntry struct {
	seq  uint64
	code byte
}

func appendIDEntry(b []byte, e idEntry) []byte {
	return append(binary.BigEndian.AppendUint64(b, e.seq), e.code)
}

func parseIDEntry(id string, v []byte) (idEntry, error) {
	if len(v) != 9 || v[8] == 0 || int(v[8]) >= len(codePhases) {
		return idEntry{}, fmt.Errorf("operation %q: ID index value %x: %w", id, v, operations.ErrCorrupt)
	}
	return idEntry{binary.BigEndian.Uint64(v), v[8]}, nil
}

// opsMetaValue is the operations metadata of one run: the sequence number the next new
// operation gets, a counter that every batch raises (so that two batches of one run
// never commit on the same reading), and the staged batch that is committed but not yet
// applied, if any.
type opsMetaValue struct {
	next    uint64
	batches uint64
	staged  uint64 // batch number; 0: none
}

// Formats of the operations metadata, its first byte. Format 1 ended with the number of
// chunks of the staged batch, which nothing read (applying a batch scans its chunks);
// it is still read, and the number skipped.
const (
	opsMetaFormat1 = 1
	opsMetaFormat2 = 2
)

func (m opsMetaValue) append(b []byte) []byte {
	b = append(b, opsMetaFormat2)
	b = binary.AppendUvarint(b, m.next)
	b = binary.AppendUvarint(b, m.batches)
	return binary.AppendUvarint(b, m.staged)
}

func parseOpsMeta(v []byte) (opsMetaValue, error) {
	if v == nil {
		return opsMetaValue{next: 1}, nil
	}
	d := decoder{b: v}
	var m opsMetaValue
	f := d.u8()
	if d.err == nil && f != opsMetaFormat1 && f != opsMetaFormat2 {
		return m, fmt.Errorf("operations metadata format %d: %w", f, operations.ErrCorrupt)
	}
	m.next, m.batches, m.staged = d.uvarint(), d.uvarint(), d.uvarint()
	if f == opsMetaFormat1 {
		if c := d.uvarint(); c > 1<<31 {
			d.fail("chunk count %d", c)
		}
	}
	if err := d.end(); err != nil {
		return m, fmt.Errorf("operations metadata: %w: %w", operations.ErrCorrupt, err)
	}
	return m, nil
}
