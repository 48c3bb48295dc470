package kv

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/internal/record"
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

// Kind bytes. Backup sorts before Restore, and both before the kinds of one's own
// (kindOwn), which follow their byte by their name and a zero byte.
const (
	kindBackup  = 'B'
	kindRestore = 'R'
	kindOwn     = 'X'
)

// appendKind appends the kind part of a key: 'B' or 'R' for Backup and Restore, and
// for a kind of one's own 'X', its name, and a zero byte. A kind's name is letters and
// digits (phase.Kind.Validate), so the zero byte ends it: no kind's part is a prefix of
// another's, and kinds of one's own sort by name.
func appendKind(b []byte, k phase.Kind) []byte {
	switch k {
	case phase.Backup:
		return append(b, kindBackup)
	case phase.Restore:
		return append(b, kindRestore)
	}
	return append(append(append(b, kindOwn), k...), 0)
}

// kindLen is the length of the kind part of a key of kind k.
func kindLen(k phase.Kind) int {
	if k == phase.Backup || k == phase.Restore {
		return 1
	}
	return len(k) + 2
}

// cutKind reads the kind part at the start of b and returns the kind and the rest. It
// reports false when b does not start with one.
func cutKind(b []byte) (phase.Kind, []byte, bool) {
	if len(b) == 0 {
		return "", nil, false
	}
	switch b[0] {
	case kindBackup:
		return phase.Backup, b[1:], true
	case kindRestore:
		return phase.Restore, b[1:], true
	case kindOwn:
		i := bytes.IndexByte(b[1:], 0)
		if i < 0 {
			return "", nil, false
		}
		k := phase.Kind(b[1 : 1+i])
		if k == phase.Backup || k == phase.Restore || k.Validate() != nil {
			return "", nil, false
		}
		return k, b[2+i:], true
	}
	return "", nil, false
}

// runKey is "r", the kind part, then the name, so run keys sort by kind, then name.
func runKey(o operations.Owner) []byte {
	k := make([]byte, 0, 1+kindLen(o.Kind)+len(o.Name))
	return append(appendKind(append(k, prefixRun), o.Kind), o.Name...)
}

// compareOwners orders owners as their run keys sort: by kind (Backup, Restore, then
// kinds of one's own by name), then by name. No kind's part is a prefix of another's,
// so comparing the kind parts, then the names, is comparing the keys.
func compareOwners(a, b operations.Owner) int {
	var ka, kb [2 + phase.MaxKindBytes]byte // room for the kind part of any valid kind
	return cmp.Or(bytes.Compare(appendKind(ka[:0], a.Kind), appendKind(kb[:0], b.Kind)), cmp.Compare(a.Name, b.Name))
}

// runPrefix is the prefix of the run keys of kind, or of every kind of one's own when
// kind is empty.
func runPrefix(kind phase.Kind) []byte {
	if kind == "" {
		return []byte{prefixRun, kindOwn}
	}
	return appendKind([]byte{prefixRun}, kind)
}

// ownerOfRunKey returns the owner (without UID) a run key names.
func ownerOfRunKey(k []byte) (operations.Owner, error) {
	if len(k) < 3 || k[0] != prefixRun {
		return operations.Owner{}, fmt.Errorf("run key %q: %w", k, operations.ErrCorrupt)
	}
	kind, name, ok := cutKind(k[1:])
	if !ok {
		return operations.Owner{}, fmt.Errorf("run key %q: unknown kind: %w", k, operations.ErrCorrupt)
	}
	if len(name) == 0 {
		return operations.Owner{}, fmt.Errorf("run key %q: no name: %w", k, operations.ErrCorrupt)
	}
	return operations.Owner{Kind: kind, Name: string(name)}, nil
}

// idxPrefix is the prefix of the phase index entries of runs of kind in phase p. For
// Backup and Restore it is "p", the kind byte, the phase, a zero byte; each entry
// appends the run's name and holds a copy of its record, so runs are listed by phase with
// one scan. For a kind of one's own the phase comes before the kind's name: "p", 'X',
// the phase, a zero byte, then the kind part without its 'X' (the name and a zero byte),
// so that the runs of every kind of one's own in one phase are listed by one scan too,
// the prefix idxPrefix("", p) (which ends after the phase's zero byte).
func idxPrefix(kind phase.Kind, p phase.Phase) []byte {
	k := make([]byte, 0, 3+len(p)+kindLen(kind))
	if kind == phase.Backup || kind == phase.Restore {
		k = appendKind(append(k, prefixIdx), kind)
		return append(append(k, p...), 0)
	}
	k = append(append(append(k, prefixIdx, kindOwn), p...), 0)
	if kind == "" {
		return k
	}
	return append(append(k, kind...), 0)
}

func idxKey(o operations.Owner, p phase.Phase) []byte { return append(idxPrefix(o.Kind, p), o.Name...) }

// ownerOfOwnIdxKey returns the owner (without UID) of a phase index key of a kind of
// one's own, whose prefix idxPrefix("", p) is start.
func ownerOfOwnIdxKey(start, k []byte) (operations.Owner, error) {
	rest := k[len(start):]
	i := bytes.IndexByte(rest, 0)
	var kind phase.Kind
	if i > 0 {
		kind = phase.Kind(rest[:i])
	}
	if i < 0 || kind == phase.Backup || kind == phase.Restore || kind.Validate() != nil || i+1 == len(rest) {
		return operations.Owner{}, fmt.Errorf("phase index key %q: %w", k, operations.ErrCorrupt)
	}
	return operations.Owner{Kind: kind, Name: string(rest[i+1:])}, nil
}

// opsPrefix is the prefix of every key of the operations of o's run: "o", the kind part,
// the name's length as a varint, then the name, so that no run's prefix is a prefix of
// another's.
func opsPrefix(o operations.Owner) []byte {
	k := make([]byte, 0, 1+kindLen(o.Kind)+binary.MaxVarintLen64+len(o.Name)+1+8)
	k = appendKind(append(k, prefixOps), o.Kind)
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
	if record.Unfinished(code) {
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
	if len(v) != 9 || v[8] == 0 || int(v[8]) >= len(record.CodePhases) {
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
	d := record.NewDecoder(v)
	var m opsMetaValue
	f := d.U8()
	if !d.Failed() && f != opsMetaFormat1 && f != opsMetaFormat2 {
		return m, fmt.Errorf("operations metadata format %d: %w", f, operations.ErrCorrupt)
	}
	m.next, m.batches, m.staged = d.Uvarint(), d.Uvarint(), d.Uvarint()
	if f == opsMetaFormat1 {
		if c := d.Uvarint(); c > 1<<31 {
			d.Fail("chunk count %d", c)
		}
	}
	if err := d.End(); err != nil {
		return m, fmt.Errorf("operations metadata: %w: %w", operations.ErrCorrupt, err)
	}
	return m, nil
}
