// Package record is the encoding of the run and operation records of the storage engine
// (storage/kv), and the reader of length-prefixed values that the engine's other values
// use too. It is internal to storage/ so that the engine and a driver that migrates
// records of this encoding from a layout of its own (storage/boltstore's schema 1) share
// one codec without making it part of the engine's API. Every decoder fails with an
// error wrapping operations.ErrCorrupt on bytes that are not a whole value, and never
// panics.
package record

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// The record encoding. Every value starts with a format byte, so a later version of the
// store can read old records beside new ones; decoders refuse any other byte with
// operations.ErrCorrupt. Integers are varints, strings and lists are length-prefixed,
// and a slice's count is written plus one so that nil (0) and empty (1) stay apart.
const (
	runFormat1 = 1 // runFormat1 is the first byte of a run record without a cancel request
	runFormat2 = 2 // runFormat2 is the first byte of a run record with one, after its history
	opFormat1  = 1 // opFormat1 is the first byte of an operation record without a Monitor's state
	opFormat2  = 2 // opFormat2 is the first byte of one with it, after the fields of opFormat1
)

// The fields of an operation's MonitorState that a record of opFormat2 holds, as bits of
// the byte that follows the fields of opFormat1. Only the fields that are not zero are
// written, each after the byte, in the order of the bits; the byte is never zero, since
// opFormat2 is written only for a state that is not zero. A reader refuses a byte with
// a bit it does not know, and a field written with its zero value: each state has one
// encoding, so that a damaged byte cannot decode to a record that encodes otherwise.
const (
	stateProgressAt = 1 << 0
	stateAttempts   = 1 << 1
	stateErrorSince = 1 << 2
	stateNextPoll   = 1 << 3
	stateLastError  = 1 << 4
	// stateMaxCompleted came after the others: a build that does not know it refuses
	// only the records that hold it, those of an operation whose progress went back
	// under a stall timeout.
	stateMaxCompleted = 1 << 5
	stateFields       = stateProgressAt | stateAttempts | stateErrorSince | stateNextPoll | stateLastError | stateMaxCompleted
)

// Operation phase codes, as written in byte 1 of an operation record and in the engine's
// index of operation IDs. Zero is never written.
const (
	codeNew        byte = 1
	codeInProgress byte = 2
	codeCompleted  byte = 3
	codeFailed     byte = 4
)

// phaseCode returns the code of p, or 0 when p is not an operation phase.
func phaseCode(p operations.OperationPhase) byte {
	switch p {
	case operations.OperationNew:
		return codeNew
	case operations.OperationInProgress:
		return codeInProgress
	case operations.OperationCompleted:
		return codeCompleted
	case operations.OperationFailed:
		return codeFailed
	}
	return 0
}

// CodePhases maps a code back to its phase; index 0 is unused.
var CodePhases = [...]operations.OperationPhase{"", operations.OperationNew, operations.OperationInProgress, operations.OperationCompleted, operations.OperationFailed}

// Unfinished reports whether c is the code of New or InProgress.
func Unfinished(c byte) bool { return c == codeNew || c == codeInProgress }

// Time forms, the first byte of an encoded time. Every reader decodes a time to the
// same instant in the same Location, whatever its own time.Local: UTC, or a fixed zone
// of the name and offset the writer's time had.
const (
	timeZero   = 0 // the zero time; nothing follows
	timeUTC    = 1 // seconds, nanoseconds; decoded in UTC
	timeLocal1 = 2 // seconds, nanoseconds; read only (see below); decoded in UTC
	timeOffset = 3 // seconds, nanoseconds, zone name, offset; decoded in a fixed zone
)

// Records written before the engine wrote timeOffset for a time in time.Local hold
// timeLocal1 for it, which names no zone: once decoded in each reader's time.Local,
// so two processes sharing an etcd disagreed on the time's Location. It is decoded in
// UTC, the same instant for every reader, and never written again.

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendInt(b []byte, v int64) []byte { return binary.AppendVarint(b, v) }

// appendTime appends t: the zero time as timeZero, a time in UTC as timeUTC, and any
// other (time.Local included) as timeOffset with the name and offset of its zone at
// that instant, so that it decodes the same in every process.
func appendTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, timeZero)
	}
	form := byte(timeOffset)
	if t.Location() == time.UTC {
		form = timeUTC
	}
	b = append(b, form)
	b = binary.AppendVarint(b, t.Unix())
	b = binary.AppendUvarint(b, uint64(t.Nanosecond()))
	if form == timeOffset {
		name, offset := t.Zone()
		b = appendString(b, name)
		b = binary.AppendVarint(b, int64(offset))
	}
	return b
}

func appendResource(b []byte, r operations.ResourceIdentifier) []byte {
	b = appendString(b, r.Group)
	b = appendString(b, r.Resource)
	b = appendString(b, r.Namespace)
	return appendString(b, r.Name)
}

// AppendOperation appends the record of op; the owner's kind and name are not written,
// as the record's key names them. op must have passed [operations.Operation.Validate].
// An operation whose Monitor state is zero is written in opFormat1, so that records of
// Monitors without a stall timeout or retry policy are what they always were.
func AppendOperation(b []byte, op *operations.Operation) []byte {
	format := byte(opFormat1)
	if op.Monitor != (operations.MonitorState{}) {
		format = opFormat2
	}
	b = append(b, format, phaseCode(op.Status.Phase))
	b = appendString(b, op.Owner.UID)
	b = appendString(b, op.Action)
	b = appendResource(b, op.Resource)
	b = appendString(b, op.ID)
	if op.PostOperationItems == nil {
		b = append(b, 0)
	} else {
		b = binary.AppendUvarint(b, uint64(len(op.PostOperationItems))+1)
		for _, r := range op.PostOperationItems {
			b = appendResource(b, r)
		}
	}
	st := &op.Status
	b = appendString(b, st.Error)
	b = appendInt(b, st.NCompleted)
	b = appendInt(b, st.NTotal)
	b = appendString(b, st.OperationUnits)
	b = appendString(b, st.Description)
	b = appendTime(b, st.Created)
	b = appendTime(b, st.Started)
	b = appendTime(b, st.Updated)
	if format == opFormat2 {
		b = appendMonitorState(b, &op.Monitor)
	}
	return b
}

// appendMonitorState appends ms, which is not zero, as opFormat2 holds it.
func appendMonitorState(b []byte, ms *operations.MonitorState) []byte {
	var fields byte
	for _, f := range [...]struct {
		bit byte
		set bool
	}{
		{stateProgressAt, !ms.ProgressAt.IsZero()},
		{stateAttempts, ms.Attempts != 0},
		{stateErrorSince, !ms.ErrorSince.IsZero()},
		{stateNextPoll, !ms.NextPoll.IsZero()},
		{stateLastError, ms.LastError != ""},
		{stateMaxCompleted, ms.MaxCompleted != 0},
	} {
		if f.set {
			fields |= f.bit
		}
	}
	b = append(b, fields)
	if fields&stateProgressAt != 0 {
		b = appendTime(b, ms.ProgressAt)
	}
	if fields&stateAttempts != 0 {
		b = appendInt(b, int64(ms.Attempts))
	}
	if fields&stateErrorSince != 0 {
		b = appendTime(b, ms.ErrorSince)
	}
	if fields&stateNextPoll != 0 {
		b = appendTime(b, ms.NextPoll)
	}
	if fields&stateLastError != 0 {
		b = appendString(b, ms.LastError)
	}
	if fields&stateMaxCompleted != 0 {
		b = appendInt(b, ms.MaxCompleted)
	}
	return b
}

// Profile flags of a run record. The base flags name the machine a kind of one's own
// follows (phase.Profile's Base); runs of Backup and Restore have neither. With
// profilePhases, the flags are followed by phase.Profile's Phases as a uvarint.
const (
	profileQueue             = 1 << 0
	profileRestoreFinalizing = 1 << 1
	profileBaseBackup        = 1 << 2
	profileBaseRestore       = 1 << 3
	profilePhases            = 1 << 4
	profileFlags             = profileQueue | profileRestoreFinalizing | profileBaseBackup | profileBaseRestore | profilePhases
)

// AppendRun appends the record of r; the owner's kind and name are not written, as the
// record's key names them.
func AppendRun(b []byte, r *operations.Run) []byte {
	format := byte(runFormat1)
	if r.CancelRequested() {
		format = runFormat2
	}
	b = append(b, format)
	b = appendString(b, r.Owner.UID)
	b = appendString(b, string(r.Phase))
	var flags byte
	if r.Profile.Queue {
		flags |= profileQueue
	}
	if r.Profile.RestoreFinalizing {
		flags |= profileRestoreFinalizing
	}
	switch r.Profile.Base {
	case phase.Backup:
		flags |= profileBaseBackup
	case phase.Restore:
		flags |= profileBaseRestore
	}
	if r.Profile.Phases != 0 {
		flags |= profilePhases
	}
	b = append(b, flags)
	if r.Profile.Phases != 0 {
		b = binary.AppendUvarint(b, uint64(r.Profile.Phases))
	}
	b = appendInt(b, int64(r.OperationTimeout))
	b = appendInt(b, int64(r.ItemsTotal))
	b = appendInt(b, int64(r.ItemsDone))
	b = appendInt(b, int64(r.Errors))
	b = appendInt(b, int64(r.Warnings))
	b = appendInt(b, int64(r.FailedOperations))
	b = appendString(b, r.FailureReason)
	b = appendTime(b, r.Created)
	b = appendTime(b, r.Started)
	b = appendTime(b, r.Completed)
	b = appendTime(b, r.Updated)
	if r.History == nil {
		b = append(b, 0)
	} else {
		b = binary.AppendUvarint(b, uint64(len(r.History))+1)
		for i := range r.History {
			h := &r.History[i]
			b = appendString(b, string(h.From))
			b = appendString(b, string(h.To))
			b = appendString(b, string(h.Event))
			b = appendTime(b, h.Time)
			b = appendString(b, h.Reason)
		}
	}
	if format == runFormat2 {
		b = appendString(b, r.Cancel.Reason)
		b = appendTime(b, r.Cancel.At)
	}
	return b
}

// A Decoder reads one value: a record, or a value of the engine's that is written with
// the same varints and length-prefixed strings. The first problem it meets is kept, after
// which every read returns a zero value, so callers check [Decoder.End] once at the end.
// Make one with [NewDecoder].
type Decoder struct {
	b   []byte
	off int
	err error
	// s is b as a string, made by the first str that reads a string that is not
	// empty: the strings of a record are cut from it, one allocation for them all.
	s string

	timesLocal1 int // times read of the form timeLocal1, which encode again as timeUTC
}

// NewDecoder returns a Decoder that reads b from its first byte.
func NewDecoder(b []byte) Decoder { return Decoder{b: b} }

// More reports whether bytes are left to read and no read has failed.
func (d *Decoder) More() bool { return d.err == nil && d.off < len(d.b) }

// Failed reports whether a read has failed.
func (d *Decoder) Failed() bool { return d.err != nil }

// Fail records a problem at the current byte, unless one is recorded already: End then
// reports it, and every later read returns a zero value.
func (d *Decoder) Fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("at byte %d: "+format, append([]any{d.off}, args...)...)
	}
}

// U8 reads one byte; none left is a failure.
func (d *Decoder) U8() byte {
	if d.err != nil {
		return 0
	}
	if d.off >= len(d.b) {
		d.Fail("truncated")
		return 0
	}
	c := d.b[d.off]
	d.off++
	return c
}

// Uvarint reads an unsigned varint; a bad or overlong one is a failure.
func (d *Decoder) Uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.off:])
	if n <= 0 || overlong(d.b[d.off:d.off+n]) {
		d.Fail("bad unsigned varint")
		return 0
	}
	d.off += n
	return v
}

func (d *Decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b[d.off:])
	if n <= 0 || overlong(d.b[d.off:d.off+n]) {
		d.Fail("bad varint")
		return 0
	}
	d.off += n
	return v
}

// overlong reports whether the varint v (its bytes) has a shorter form: more than one
// byte, the last of them zero. The encoder never writes one, so each value has one
// encoding, and a record holding an overlong varint is damaged.
func overlong(v []byte) bool { return len(v) > 1 && v[len(v)-1] == 0 }

// int reads a varint that must fit an int.
func (d *Decoder) intv() int {
	v := d.varint()
	if v < math.MinInt || v > math.MaxInt {
		d.Fail("integer %d out of range", v)
		return 0
	}
	return int(v)
}

// count reads a slice length written plus one; nil reports a nil slice. Each element takes
// at least size bytes, so a count the rest of the record cannot hold is refused before any
// allocation.
func (d *Decoder) count(size int) (n int, isNil bool) {
	v := d.Uvarint()
	if d.err != nil || v == 0 {
		return 0, true
	}
	v--
	if v > uint64(len(d.b)-d.off)/uint64(size) {
		d.Fail("list of %d elements exceeds the record", v)
		return 0, true
	}
	return int(v), false
}

// span reads a length-prefixed byte string and returns it in place, within the record.
func (d *Decoder) span() []byte {
	n := d.Uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)-d.off) {
		d.Fail("string of %d bytes exceeds the record", n)
		return nil
	}
	b := d.b[d.off : d.off+int(n)]
	d.off += int(n)
	return b
}

// str reads a length-prefixed string, copied out of the record (see Decoder.s).
func (d *Decoder) str() string {
	b := d.span()
	if len(b) == 0 {
		return ""
	}
	if d.s == "" {
		d.s = string(d.b)
	}
	end := d.off // span has moved d.off past b
	return d.s[end-len(b) : end]
}

// Bytes reads a length-prefixed byte string, copying it out of the value.
func (d *Decoder) Bytes() []byte { return append([]byte(nil), d.span()...) }

func (d *Decoder) tm() time.Time {
	form := d.U8()
	if d.err != nil || form == timeZero {
		return time.Time{}
	}
	if form > timeOffset {
		d.Fail("unknown time form %d", form)
		return time.Time{}
	}
	sec := d.varint()
	nsec := d.Uvarint()
	if d.err != nil {
		return time.Time{}
	}
	if nsec >= uint64(time.Second) {
		d.Fail("nanoseconds %d out of range", nsec)
		return time.Time{}
	}
	t := time.Unix(sec, int64(nsec)).UTC()
	if form == timeLocal1 {
		d.timesLocal1++
	}
	if form != timeOffset {
		return t
	}
	name := d.span()
	offset := d.varint()
	if d.err != nil {
		return time.Time{}
	}
	if offset < -24*3600 || offset > 24*3600 {
		d.Fail("zone offset %d out of range", offset)
		return time.Time{}
	}
	return t.In(zones.get(name, int(offset)))
}

// zones holds the fixed zones that times were decoded in, so that decoding a time does
// not make a new *time.Location each time: a store's times come from a few zones, and a
// Monitor's pass decodes one or more times per operation.
var zones zoneCache

// zoneCache maps a zone's name and offset to its fixed zone. It holds at most
// maxCachedZones zones (a damaged or hostile store cannot make it grow without bound); a
// zone beyond them is made anew each time.
type zoneCache struct {
	mu    sync.RWMutex
	names map[string][]zone // by name: one per offset seen
	n     int               // the zones held
}

type zone struct {
	offset int
	loc    *time.Location
}

const maxCachedZones = 64

// get returns the fixed zone of name (the bytes of a record) and offset.
func (c *zoneCache) get(name []byte, offset int) *time.Location {
	c.mu.RLock()
	loc := findZone(c.names[string(name)], offset) // the conversion does not copy name
	c.mu.RUnlock()
	if loc != nil {
		return loc
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if loc := findZone(c.names[string(name)], offset); loc != nil {
		return loc
	}
	loc = time.FixedZone(string(name), offset)
	if c.n < maxCachedZones {
		if c.names == nil {
			c.names = make(map[string][]zone)
		}
		c.names[string(name)] = append(c.names[string(name)], zone{offset, loc})
		c.n++
	}
	return loc
}

// findZone returns the zone of zs whose offset is offset, or nil.
func findZone(zs []zone, offset int) *time.Location {
	for _, z := range zs {
		if z.offset == offset {
			return z.loc
		}
	}
	return nil
}

func (d *Decoder) resource() operations.ResourceIdentifier {
	return operations.ResourceIdentifier{Group: d.str(), Resource: d.str(), Namespace: d.str(), Name: d.str()}
}

// End reports the first problem a read met, or an error when bytes are left over, or
// nil when the value was read whole. Its errors do not wrap operations.ErrCorrupt: the
// caller, which knows what the value is, adds it.
func (d *Decoder) End() error {
	if d.err == nil && d.off != len(d.b) {
		d.Fail("%d trailing bytes", len(d.b)-d.off)
	}
	return d.err
}

// DecodeOperation decodes an operation record of owner o (whose UID is taken from the
// record). The result shares no memory with b. It fails with an error wrapping
// operations.ErrCorrupt when b is not such a record.
func DecodeOperation(o operations.Owner, b []byte) (operations.Operation, error) {
	d := NewDecoder(b)
	return d.operation(o)
}

func (d *Decoder) operation(o operations.Owner) (operations.Operation, error) {
	f := d.U8()
	if d.err == nil && f != opFormat1 && f != opFormat2 {
		return operations.Operation{}, fmt.Errorf("unknown operation record format %d: %w", f, operations.ErrCorrupt)
	}
	code := d.U8()
	if d.err == nil && (code == 0 || int(code) >= len(CodePhases)) {
		return operations.Operation{}, fmt.Errorf("unknown operation phase code %d: %w", code, operations.ErrCorrupt)
	}
	op := operations.Operation{Owner: operations.Owner{Kind: o.Kind, Name: o.Name}}
	op.Owner.UID = d.str()
	op.Action = d.str()
	op.Resource = d.resource()
	op.ID = d.str()
	if n, isNil := d.count(4); !isNil {
		op.PostOperationItems = make([]operations.ResourceIdentifier, n)
		for i := range op.PostOperationItems {
			op.PostOperationItems[i] = d.resource()
		}
	}
	op.Status.Phase = CodePhases[code]
	op.Status.Error = d.str()
	op.Status.NCompleted = d.varint()
	op.Status.NTotal = d.varint()
	op.Status.OperationUnits = d.str()
	op.Status.Description = d.str()
	op.Status.Created = d.tm()
	op.Status.Started = d.tm()
	op.Status.Updated = d.tm()
	if f == opFormat2 {
		d.monitorState(&op.Monitor)
	}
	if err := d.End(); err != nil {
		return operations.Operation{}, fmt.Errorf("operation record: %w: %w", operations.ErrCorrupt, err)
	}
	return op, nil
}

// monitorState reads the Monitor's state of a record of opFormat2 into ms; a byte of
// fields that is zero or has an unknown bit, or a field of zero value, is a failure (see
// stateFields).
func (d *Decoder) monitorState(ms *operations.MonitorState) {
	fields := d.U8()
	if d.err == nil && (fields == 0 || fields&^stateFields != 0) {
		d.Fail("Monitor state fields %#x", fields)
		return
	}
	if fields&stateProgressAt != 0 {
		ms.ProgressAt = d.setTime()
	}
	if fields&stateAttempts != 0 {
		if ms.Attempts = d.intv(); ms.Attempts == 0 {
			d.Fail("attempts written as zero")
		}
	}
	if fields&stateErrorSince != 0 {
		ms.ErrorSince = d.setTime()
	}
	if fields&stateNextPoll != 0 {
		ms.NextPoll = d.setTime()
	}
	if fields&stateLastError != 0 {
		if ms.LastError = d.str(); ms.LastError == "" {
			d.Fail("last error written empty")
		}
	}
	if fields&stateMaxCompleted != 0 {
		if ms.MaxCompleted = d.varint(); ms.MaxCompleted == 0 {
			d.Fail("highest count completed written as zero")
		}
	}
}

// setTime reads a time that was written because it is set: the zero time is a failure.
func (d *Decoder) setTime() time.Time {
	t := d.tm()
	if d.err == nil && t.IsZero() {
		d.Fail("a time written as zero")
	}
	return t
}

// OperationCode returns the phase code of an operation record without decoding the rest
// (an index into CodePhases), or an error wrapping operations.ErrCorrupt when b does not
// start as an operation record.
func OperationCode(b []byte) (byte, error) {
	if len(b) < 2 || b[0] != opFormat1 && b[0] != opFormat2 || b[1] == 0 || int(b[1]) >= len(CodePhases) {
		return 0, fmt.Errorf("operation record header %x: %w", b[:min(len(b), 2)], operations.ErrCorrupt)
	}
	return b[1], nil
}

// DecodeRun decodes the run record of owner o (whose UID is taken from the record). The
// result shares no memory with b, and its phase is one of its kind and profile. It fails
// with an error wrapping operations.ErrCorrupt when b is not such a record, or when its
// phase or profile does not fit o's kind.
func DecodeRun(o operations.Owner, b []byte) (operations.Run, error) {
	d := NewDecoder(b)
	return d.run(o)
}

func (d *Decoder) run(o operations.Owner) (operations.Run, error) {
	f := d.U8()
	if d.err == nil && f != runFormat1 && f != runFormat2 {
		return operations.Run{}, fmt.Errorf("unknown run record format %d: %w", f, operations.ErrCorrupt)
	}
	r := operations.Run{Owner: operations.Owner{Kind: o.Kind, Name: o.Name}}
	r.Owner.UID = d.str()
	r.Phase = phase.Phase(d.str())
	flags := d.U8()
	if flags&^profileFlags != 0 || flags&profileBaseBackup != 0 && flags&profileBaseRestore != 0 {
		d.Fail("unknown profile flags %#x", flags)
	}
	r.Profile = phase.Profile{Queue: flags&profileQueue != 0, RestoreFinalizing: flags&profileRestoreFinalizing != 0}
	switch {
	case flags&profileBaseBackup != 0:
		r.Profile.Base = phase.Backup
	case flags&profileBaseRestore != 0:
		r.Profile.Base = phase.Restore
	}
	if flags&profilePhases != 0 {
		set := d.Uvarint()
		if set == 0 || set > math.MaxUint16 {
			d.Fail("phases %#x out of range", set)
		}
		r.Profile.Phases = phase.Set(set)
	}
	r.OperationTimeout = time.Duration(d.varint())
	r.ItemsTotal = d.intv()
	r.ItemsDone = d.intv()
	r.Errors = d.intv()
	r.Warnings = d.intv()
	r.FailedOperations = d.intv()
	r.FailureReason = d.str()
	r.Created = d.tm()
	r.Started = d.tm()
	r.Completed = d.tm()
	r.Updated = d.tm()
	if n, isNil := d.count(5); !isNil {
		r.History = make([]operations.Transition, n)
		for i := range r.History {
			h := &r.History[i]
			h.From = phase.Phase(d.str())
			h.To = phase.Phase(d.str())
			h.Event = phase.Event(d.str())
			h.Time = d.tm()
			h.Reason = d.str()
		}
	}
	if f == runFormat2 {
		r.Cancel = operations.CancelRequest{Reason: d.str(), At: d.tm()}
		if d.err == nil && !r.CancelRequested() {
			// AppendRun writes this form only for a request: an empty one is damage.
			d.Fail("a cancel request with neither reason nor time")
		}
	}
	if err := d.End(); err != nil {
		return operations.Run{}, fmt.Errorf("run record: %w: %w", operations.ErrCorrupt, err)
	}
	// Only the phase is checked: the owner comes from the record's key, and texts
	// stored before operations' limits existed stay readable.
	if err := phase.Validate(r.Owner.Kind, r.Phase, r.Profile); err != nil {
		return operations.Run{}, fmt.Errorf("run record: %w: %w", operations.ErrCorrupt, err)
	}
	return r, nil
}
