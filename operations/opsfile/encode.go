package opsfile

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// Encode writes ops to w as one itemoperations.json.gz file, byte for byte as Velero
// writes it (see the package documentation, "Itemoperations files"). The kind of the
// file is the kind of the operations' owners; an empty ops writes an empty array.
//
// Every operation is checked before anything is written: all owners must have the kind of
// the first, and each operation must pass [operations.Operation.Validate] (which bounds
// its times to years 0000 to 9999 in UTC, those of RFC 3339) and carry no
// post-operation items when it is a restore's. The first that fails gives an error
// wrapping [operations.ErrInvalid] that names its index, and w is left untouched. An
// error from w is returned as is, after which w holds an incomplete file. Encode does
// not close w.
//
// Encode takes no context: to stop it early, make w fail (close the connection it
// writes to, or wrap it in a writer that fails once a context is done); Encode then
// returns that error. Encode may be called from several goroutines at once with
// different writers.
func Encode(w io.Writer, ops []operations.Operation) error {
	kind := phase.Backup // any valid kind writes an empty list the same way
	if len(ops) > 0 {
		kind = ops[0].Owner.Kind
	}
	for i := range ops {
		if err := checkEncodable(kind, &ops[i]); err != nil {
			return fmt.Errorf("encode operations: record %d: %w", i, err)
		}
	}
	e := NewEncoder(w, kind)
	for i := range ops {
		e.encode(&ops[i])
	}
	return e.Close()
}

// An Encoder writes one itemoperations.json.gz file record by record, so that memory
// does not grow with the number of records: it keeps at most one chunk of JSON text
// (a few tens of kilobytes) and the gzip compressor's state. Call [Encoder.Encode] once
// per operation, then [Encoder.Close], which ends the JSON array and the gzip stream.
// The bytes written are those [Encode] writes for the same operations.
//
// An Encoder is not safe for concurrent use. It must be made with [NewEncoder]; the zero
// Encoder is not usable.
type Encoder struct {
	kind   phase.Kind
	zw     *gzip.Writer
	buf    []byte // JSON text not yet handed to zw
	n      int    // records encoded
	err    error  // the first error from the writer; sticky
	closed bool
}

// flushSize is how much JSON text an Encoder gathers before compressing it.
const flushSize = 32 << 10

// NewEncoder returns an Encoder that writes a file of kind kind (phase.Backup or
// phase.Restore) to w. It writes nothing until the first [Encoder.Encode] or
// [Encoder.Close]; the gzip header is Velero's (no name, no time stamp), compressed at
// gzip's default level. An Encoder takes no context: to stop it, make w fail, as for
// [Encode].
func NewEncoder(w io.Writer, kind phase.Kind) *Encoder {
	return &Encoder{kind: kind, zw: gzip.NewWriter(w), buf: make([]byte, 0, flushSize+4<<10)}
}

// Encode appends op to the file. op is checked first, as [Encode] checks each operation:
// an operation that is not of the Encoder's kind, fails [operations.Operation.Validate]
// (a time outside years 0000 to 9999 in UTC among others), or is a restore's with
// post-operation items, gives an error wrapping [operations.ErrInvalid], and nothing is
// written for it; the Encoder stays usable. An error from the underlying writer is
// returned, and returned again by every later call: the file is then incomplete. Encode
// after [Encoder.Close] returns an error.
func (e *Encoder) Encode(op operations.Operation) error {
	if e.err != nil {
		return e.err
	}
	if e.closed {
		return errors.New("encode operations: encoder is closed")
	}
	if err := checkEncodable(e.kind, &op); err != nil {
		return fmt.Errorf("encode operations: record %d: %w", e.n, err)
	}
	e.encode(&op)
	return e.err
}

// encode appends a checked op and compresses the text gathered once there is enough.
func (e *Encoder) encode(op *operations.Operation) {
	if e.err != nil {
		return
	}
	if e.n == 0 {
		e.buf = append(e.buf, '[')
	} else {
		e.buf = append(e.buf, ',')
	}
	e.buf = appendRecord(e.buf, e.kind, op)
	e.n++
	if len(e.buf) >= flushSize {
		e.flush()
	}
}

// flush hands the gathered text to the compressor.
func (e *Encoder) flush() {
	if _, err := e.zw.Write(e.buf); err != nil {
		e.err = fmt.Errorf("encode operations: %w", err)
	}
	e.buf = e.buf[:0]
}

// Close ends the JSON array, as Velero's writer does with a newline after it, and the
// gzip stream, and writes what is left to the underlying writer, which it does not close.
// With no records encoded it writes an empty array ("[]" and a newline). Close returns
// the first error from the underlying writer, during Close or before it; only a nil
// result means a complete file was written. Calling Close again returns the same result
// and writes nothing.
func (e *Encoder) Close() error {
	if e.closed {
		return e.err
	}
	e.closed = true
	if e.err != nil {
		return e.err
	}
	if e.n == 0 {
		e.buf = append(e.buf, '[')
	}
	e.buf = append(e.buf, "]\n"...)
	e.flush()
	if e.err != nil {
		return e.err
	}
	if err := e.zw.Close(); err != nil {
		e.err = fmt.Errorf("encode operations: %w", err)
	}
	return e.err
}

// checkEncodable reports why op cannot be written in a file of kind kind, wrapping
// ErrInvalid, or nil.
func checkEncodable(kind phase.Kind, op *operations.Operation) error {
	if err := op.Validate(); err != nil {
		return err
	}
	if kind != phase.Backup && kind != phase.Restore {
		return fmt.Errorf("encoder kind %q is not Backup or Restore: %w", kind, operations.ErrInvalid)
	}
	if op.Owner.Kind != phase.Backup && op.Owner.Kind != phase.Restore {
		return fmt.Errorf("operation %q of %s: kind %q is not Backup or Restore, the only kinds of Velero's files: %w", op.ID, op.Owner, op.Owner.Kind, operations.ErrInvalid)
	}
	if op.Owner.Kind != kind {
		return fmt.Errorf("operation %q belongs to %s, not to a %s: %w", op.ID, op.Owner, kind, operations.ErrInvalid)
	}
	if kind == phase.Restore && len(op.PostOperationItems) > 0 {
		return fmt.Errorf("operation %q of %s: a restore's operation cannot have post-operation items: %w", op.ID, op.Owner, operations.ErrInvalid)
	}
	return nil
}

// appendRecord appends op as one element of the JSON array: what encoding/json writes
// for Velero's BackupOperation or RestoreOperation, field for field.
func appendRecord(b []byte, kind phase.Kind, op *operations.Operation) []byte {
	backup := kind == phase.Backup
	if backup {
		b = append(b, `{"spec":{"backupName":`...)
		b = appendString(b, op.Owner.Name)
		b = append(b, `,"backupUID":`...)
		b = appendString(b, op.Owner.UID)
		b = append(b, `,"backupItemAction":`...)
	} else {
		b = append(b, `{"spec":{"restoreName":`...)
		b = appendString(b, op.Owner.Name)
		b = append(b, `,"restoreUID":`...)
		b = appendString(b, op.Owner.UID)
		b = append(b, `,"restoreItemAction":`...)
	}
	b = appendString(b, op.Action)
	b = append(b, `,"resourceIdentifier":`...)
	b = appendResource(b, &op.Resource)
	b = append(b, `,"operationID":`...)
	b = appendString(b, op.ID)
	if backup {
		// No omitempty in Velero's type: a nil list is null, an empty one [].
		b = append(b, `,"postOperationItems":`...)
		if op.PostOperationItems == nil {
			b = append(b, "null"...)
		} else {
			b = append(b, '[')
			for i := range op.PostOperationItems {
				if i > 0 {
					b = append(b, ',')
				}
				b = appendResource(b, &op.PostOperationItems[i])
			}
			b = append(b, ']')
		}
	}
	b = append(b, `},"status":{`...)
	// Every status field is omitempty: each present one but the first needs a comma.
	mark := len(b)
	s := &op.Status
	if s.Phase != "" {
		b = appendKey(b, mark, `"phase":`)
		b = appendString(b, string(s.Phase))
	}
	if s.Error != "" {
		b = appendKey(b, mark, `"error":`)
		b = appendString(b, s.Error)
	}
	if s.NCompleted != 0 {
		b = appendKey(b, mark, `"nCompleted":`)
		b = strconv.AppendInt(b, s.NCompleted, 10)
	}
	if s.NTotal != 0 {
		b = appendKey(b, mark, `"nTotal":`)
		b = strconv.AppendInt(b, s.NTotal, 10)
	}
	if s.OperationUnits != "" {
		b = appendKey(b, mark, `"operationUnits":`)
		b = appendString(b, s.OperationUnits)
	}
	if s.Description != "" {
		b = appendKey(b, mark, `"description":`)
		b = appendString(b, s.Description)
	}
	if !s.Created.IsZero() {
		b = appendKey(b, mark, `"created":`)
		b = appendTime(b, s.Created)
	}
	if !s.Started.IsZero() {
		b = appendKey(b, mark, `"started":`)
		b = appendTime(b, s.Started)
	}
	if !s.Updated.IsZero() {
		b = appendKey(b, mark, `"updated":`)
		b = appendTime(b, s.Updated)
	}
	return append(b, "}}"...)
}

// appendKey appends key, after a comma unless b has grown no further than mark, the
// length it had when the object was opened.
func appendKey(b []byte, mark int, key string) []byte {
	if len(b) > mark {
		b = append(b, ',')
	}
	return append(b, key...)
}

// appendResource appends r as encoding/json writes Velero's ResourceIdentifier, whose
// fields have no JSON tags.
func appendResource(b []byte, r *operations.ResourceIdentifier) []byte {
	b = append(b, `{"Group":`...)
	b = appendString(b, r.Group)
	b = append(b, `,"Resource":`...)
	b = appendString(b, r.Resource)
	b = append(b, `,"Namespace":`...)
	b = appendString(b, r.Namespace)
	b = append(b, `,"Name":`...)
	b = appendString(b, r.Name)
	return append(b, '}')
}

// appendTime appends t as Kubernetes' metav1.Time marshals a set time: quoted, in UTC,
// in RFC 3339 to the second.
func appendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, time.RFC3339)
	return append(b, '"')
}

// appendString appends s as a JSON string exactly as encoding/json's default (HTML-safe)
// encoder does: '"' and '\\' are escaped with a backslash, as are \b, \f, \n, \r and \t;
// other control characters, '<', '>' and '&' become \u00XX; U+2028 and U+2029 become
// \u2028 and \u2029; and each byte of invalid UTF-8 becomes \ufffd. Everything else is
// copied.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if htmlSafe[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// htmlSafe marks the ASCII bytes that encoding/json's HTML-safe encoder copies into a
// string unchanged: printable ASCII and DEL, but not '"', '\\', '<', '>' and '&'.
var htmlSafe = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = true
	}
	for _, c := range `"\<>&` {
		t[c] = false
	}
	return t
}()
