// Package layout is the key layout of the storage engine of storage/kv: the keys of
// runs, of the phase index and of each run's operations, the values of the ID index and
// of a run's operations metadata, and the staged chunks of a batch larger than one
// commit. The documentation of storage/kv draws the layout ("# Layout"); the engine
// writes and reads it, and package storage/internal/salvage reads it back from what a
// damaged store still holds. The records themselves are encoded by
// storage/internal/record.
//
// A key or value that does not parse is reported with an error wrapping
// operations.ErrCorrupt. Everything here is a pure function of its arguments, safe for
// concurrent use.
package layout

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/internal/record"
)

// FormatKey is the key that names the layout of a store; it holds [FormatValue].
const FormatKey = "format"

// The first bytes of the keys of run records, of the phase index and of operations.
const (
	PrefixRun = 'r'
	PrefixIdx = 'p'
	PrefixOps = 'o'
)

// Suffixes of the keys under a run's operations prefix.
const (
	OpsMeta       = 'm' // the run's operations metadata: next sequence number, staged batch
	OpsUnfinished = 'u' // + 8-byte sequence number: a New or InProgress operation's record
	OpsFinished   = 'f' // + 8-byte sequence number: a Completed or Failed operation's record
	OpsID         = 'i' // + operation ID: 8-byte sequence number and phase code
	OpsStaged     = 't' // + 8-byte batch number + 4-byte chunk number: a staged chunk
)

// FormatValue is what the format key holds in every store of this layout.
const FormatValue = "itemops.kv/1"

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

// RunKey is "r", the kind part, then the name, so run keys sort by kind, then name.
func RunKey(o operations.Owner) []byte {
	k := make([]byte, 0, 1+kindLen(o.Kind)+len(o.Name))
	return append(appendKind(append(k, PrefixRun), o.Kind), o.Name...)
}

// CompareOwners orders owners as their run keys sort: by kind (Backup, Restore, then
// kinds of one's own by name), then by name. No kind's part is a prefix of another's,
// so comparing the kind parts, then the names, is comparing the keys.
func CompareOwners(a, b operations.Owner) int {
	var ka, kb [2 + phase.MaxKindBytes]byte // room for the kind part of any valid kind
	return cmp.Or(bytes.Compare(appendKind(ka[:0], a.Kind), appendKind(kb[:0], b.Kind)), cmp.Compare(a.Name, b.Name))
}

// RunPrefix is the prefix of the run keys of kind, or of every kind of one's own when
// kind is empty.
func RunPrefix(kind phase.Kind) []byte {
	if kind == "" {
		return []byte{PrefixRun, kindOwn}
	}
	return appendKind([]byte{PrefixRun}, kind)
}

// OwnerOfRunKey returns the owner (without UID) a run key names.
func OwnerOfRunKey(k []byte) (operations.Owner, error) {
	if len(k) < 3 || k[0] != PrefixRun {
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

// IdxPrefix is the prefix of the phase index entries of runs of kind in phase p. For
// Backup and Restore it is "p", the kind byte, the phase, a zero byte; each entry
// appends the run's name and holds a copy of its record, so runs are listed by phase with
// one scan. For a kind of one's own the phase comes before the kind's name: "p", 'X',
// the phase, a zero byte, then the kind part without its 'X' (the name and a zero byte),
// so that the runs of every kind of one's own in one phase are listed by one scan too,
// the prefix IdxPrefix("", p) (which ends after the phase's zero byte).
func IdxPrefix(kind phase.Kind, p phase.Phase) []byte {
	k := make([]byte, 0, 3+len(p)+kindLen(kind))
	if kind == phase.Backup || kind == phase.Restore {
		k = appendKind(append(k, PrefixIdx), kind)
		return append(append(k, p...), 0)
	}
	k = append(append(append(k, PrefixIdx, kindOwn), p...), 0)
	if kind == "" {
		return k
	}
	return append(append(k, kind...), 0)
}

// IdxKey is the key of the phase index entry of o's run in phase p.
func IdxKey(o operations.Owner, p phase.Phase) []byte { return append(IdxPrefix(o.Kind, p), o.Name...) }

// OwnerOfOwnIdxKey returns the owner (without UID) of a phase index key of a kind of
// one's own, whose prefix IdxPrefix("", p) is start.
func OwnerOfOwnIdxKey(start, k []byte) (operations.Owner, error) {
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

// OpsPrefix is the prefix of every key of the operations of o's run: "o", the kind part,
// the name's length as a varint, then the name, so that no run's prefix is a prefix of
// another's.
func OpsPrefix(o operations.Owner) []byte {
	k := make([]byte, 0, 1+kindLen(o.Kind)+binary.MaxVarintLen64+len(o.Name)+1+8)
	k = appendKind(append(k, PrefixOps), o.Kind)
	k = binary.AppendUvarint(k, uint64(len(o.Name)))
	return append(k, o.Name...)
}

// OpsKey returns a new key under a run's operations prefix: the prefix, then suffix (one
// of OpsMeta, OpsUnfinished...), with room left for the 8-byte number that most such keys
// end with (a sequence number, a batch number), so appending it does not copy the key.
func OpsKey(prefix []byte, suffix byte) []byte {
	k := make([]byte, 0, len(prefix)+1+8)
	return append(append(k, prefix...), suffix)
}

// RecordKey is the key of the record with sequence number seq and phase code code.
func RecordKey(prefix []byte, seq uint64, code byte) []byte {
	return AppendRecordKey(make([]byte, 0, len(prefix)+1+8), prefix, seq, code)
}

// AppendRecordKey appends the key of RecordKey to b.
func AppendRecordKey(b, prefix []byte, seq uint64, code byte) []byte {
	s := byte(OpsFinished)
	if record.Unfinished(code) {
		s = OpsUnfinished
	}
	return binary.BigEndian.AppendUint64(append(append(b, prefix...), s), seq)
}

// IDKey is the key of the ID index entry of operation id.
func IDKey(prefix []byte, id string) []byte { return append(OpsKey(prefix, OpsID), id...) }

// An IDEntry is the ID index value of one operation.
type IDEntry struct {
	Seq  uint64 // the sequence number of the operation's record
	Code byte   // the phase code of the operation (see record.CodePhases)
}

// AppendIDEntry appends the value of e to b.
func AppendIDEntry(b []byte, e IDEntry) []byte {
	return append(binary.BigEndian.AppendUint64(b, e.Seq), e.Code)
}

// ParseIDEntry decodes the value v of the ID index entry of operation id.
func ParseIDEntry(id string, v []byte) (IDEntry, error) {
	if len(v) != 9 || v[8] == 0 || int(v[8]) >= len(record.CodePhases) {
		return IDEntry{}, fmt.Errorf("operation %q: ID index value %x: %w", id, v, operations.ErrCorrupt)
	}
	return IDEntry{binary.BigEndian.Uint64(v), v[8]}, nil
}

// Meta is the operations metadata of one run: the sequence number the next new
// operation gets, a counter that every batch raises (so that two batches of one run
// never commit on the same reading), and the staged batch that is committed but not yet
// applied, if any.
type Meta struct {
	Next    uint64
	Batches uint64
	Staged  uint64 // batch number; 0: none
}

// Formats of the operations metadata, its first byte. Format 1 ended with the number of
// chunks of the staged batch, which nothing read (applying a batch scans its chunks);
// it is still read, and the number skipped.
const (
	MetaFormat1 = 1
	MetaFormat2 = 2
)

// Append appends the value of m, in format 2, to b.
func (m Meta) Append(b []byte) []byte {
	b = append(b, MetaFormat2)
	b = binary.AppendUvarint(b, m.Next)
	b = binary.AppendUvarint(b, m.Batches)
	return binary.AppendUvarint(b, m.Staged)
}

// ParseMeta decodes the value v of a run's operations metadata; a nil v, a run that
// has no operations yet, is the metadata of a run whose next operation gets 1.
func ParseMeta(v []byte) (Meta, error) {
	if v == nil {
		return Meta{Next: 1}, nil
	}
	d := record.NewDecoder(v)
	var m Meta
	f := d.U8()
	if !d.Failed() && f != MetaFormat1 && f != MetaFormat2 {
		return m, fmt.Errorf("operations metadata format %d: %w", f, operations.ErrCorrupt)
	}
	m.Next, m.Batches, m.Staged = d.Uvarint(), d.Uvarint(), d.Uvarint()
	if f == MetaFormat1 {
		if c := d.Uvarint(); c > 1<<31 {
			d.Fail("chunk count %d", c)
		}
	}
	if err := d.End(); err != nil {
		return m, fmt.Errorf("operations metadata: %w: %w", operations.ErrCorrupt, err)
	}
	return m, nil
}

// StagedPrefix is the prefix of the staged chunks of batch number batch of the run
// whose operations prefix is prefix.
func StagedPrefix(prefix []byte, batch uint64) []byte {
	return binary.BigEndian.AppendUint64(OpsKey(prefix, OpsStaged), batch)
}

// StagedKey is the key of chunk number chunk of that batch.
func StagedKey(prefix []byte, batch uint64, chunk int) []byte {
	return binary.BigEndian.AppendUint32(StagedPrefix(prefix, batch), uint32(chunk))
}

// A ChunkWrite is one write of a staged chunk: a put of Value at Key, or, when Delete
// is set, the deletion of Key.
type ChunkWrite struct {
	Key    []byte
	Value  []byte
	Delete bool
}

// ChunkWriteSize is the most bytes that [AppendChunkWrite] appends for a write of a key
// of k bytes and a value of v bytes.
func ChunkWriteSize(k, v int) int { return k + v + 1 + 2*binary.MaxVarintLen32 }

// AppendChunkWrite appends w to the chunk b.
func AppendChunkWrite(b []byte, w ChunkWrite) []byte {
	flag := byte(0)
	if w.Delete {
		flag = 1
	}
	b = append(b, flag)
	b = binary.AppendUvarint(b, uint64(len(w.Key)))
	b = append(b, w.Key...)
	b = binary.AppendUvarint(b, uint64(len(w.Value)))
	return append(b, w.Value...)
}

// ParseChunk decodes a staged chunk.
func ParseChunk(b []byte) ([]ChunkWrite, error) {
	d := record.NewDecoder(b)
	var out []ChunkWrite
	for d.More() {
		flag := d.U8()
		if flag > 1 {
			d.Fail("unknown write flag %d", flag)
		}
		k := d.Bytes()
		v := d.Bytes()
		out = append(out, ChunkWrite{Key: k, Value: v, Delete: flag == 1})
	}
	if err := d.End(); err != nil {
		return nil, fmt.Errorf("staged chunk: %w: %w", operations.ErrCorrupt, err)
	}
	return out, nil
}

// OwnerOfIdxKey returns the owner (without UID) a phase index key names.
func OwnerOfIdxKey(k []byte) (operations.Owner, error) {
	if len(k) < 3 || k[0] != PrefixIdx {
		return operations.Owner{}, fmt.Errorf("phase index key %q: %w", k, operations.ErrCorrupt)
	}
	i := bytes.IndexByte(k[2:], 0)
	if i < 0 {
		return operations.Owner{}, fmt.Errorf("phase index key %q: %w", k, operations.ErrCorrupt)
	}
	switch k[1] {
	case kindBackup, kindRestore:
		kind := phase.Backup
		if k[1] == kindRestore {
			kind = phase.Restore
		}
		if len(k) == 3+i {
			return operations.Owner{}, fmt.Errorf("phase index key %q: no name: %w", k, operations.ErrCorrupt)
		}
		return operations.Owner{Kind: kind, Name: string(k[3+i:])}, nil
	case kindOwn:
		return OwnerOfOwnIdxKey(k[:3+i], k)
	}
	return operations.Owner{}, fmt.Errorf("phase index key %q: unknown kind: %w", k, operations.ErrCorrupt)
}

// CutOpsKey splits a key under a run's operations prefix (see OpsPrefix) into the
// run's owner (without UID), the suffix byte and what follows it. It reports false when
// k is no such key.
func CutOpsKey(k []byte) (o operations.Owner, suffix byte, tail []byte, ok bool) {
	if len(k) == 0 || k[0] != PrefixOps {
		return o, 0, nil, false
	}
	kind, rest, ok := cutKind(k[1:])
	if !ok {
		return o, 0, nil, false
	}
	n, size := binary.Uvarint(rest)
	if size <= 0 || n == 0 || uint64(len(rest)-size) < n+1 {
		return o, 0, nil, false
	}
	rest = rest[size:]
	o = operations.Owner{Kind: kind, Name: string(rest[:n])}
	return o, rest[n], rest[n+1:], true
}
