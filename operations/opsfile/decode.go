package opsfile

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"reflect"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// DefaultSizeLimit is the decompressed size, in bytes, beyond which a [Decoder] refuses
// a file unless [WithSizeLimit] sets another limit: 256 MiB, room for more than half a
// million of Velero's records.
const DefaultSizeLimit = 256 << 20

// DefaultRecordSizeLimit is the size, in bytes, beyond which a [Decoder] refuses one
// record unless [WithRecordSizeLimit] sets another limit: 8 MiB, room for the largest
// record the encoder writes for an operation that passes
// [operations.Operation.Validate], so that every record written of what a store
// accepts is read back with the defaults (the package checks this when it compiles). A
// Decoder's memory is bounded by a small multiple of it.
const DefaultRecordSizeLimit = 8 << 20

// The most JSON text the encoder writes for one record of an operation that passes
// operations.Operation.Validate: every string at the limits of package operations and
// made of bytes that are written as six (a '<' as \u003c), and the longest of everything
// else (emptyRecord: every key, the longest phase, the largest counts, times in year
// 9999). The keys of a post-operation item, 51 bytes with its comma, are fewer than the
// six times 64 bytes that operations.MaxSpecBytes counts for each item beyond its
// fields, so the items are within the first term.
const (
	escapedBytes  = 6 // the most bytes appendString writes for one byte of a string
	emptyRecord   = `{"spec":{"backupName":"","backupUID":"","backupItemAction":"","resourceIdentifier":{"Group":"","Resource":"","Namespace":"","Name":""},"operationID":"","postOperationItems":[]},"status":{"phase":"InProgress","error":"","nCompleted":9223372036854775807,"nTotal":9223372036854775807,"operationUnits":"","description":"","created":"9999-12-31T23:59:59Z","started":"9999-12-31T23:59:59Z","updated":"9999-12-31T23:59:59Z"}}`
	maxRecordText = escapedBytes*(operations.MaxSpecBytes+3*operations.MaxTextBytes) + len(emptyRecord)
)

// The default record limit holds the largest record: this constant does not compile
// when it does not.
const _ = uint(DefaultRecordSizeLimit - maxRecordText)

// A DecodeOption configures [Decode] and [NewDecoder].
type DecodeOption interface{ applyDecode(*decodeConfig) }

type decodeOptionFunc func(*decodeConfig)

func (f decodeOptionFunc) applyDecode(c *decodeConfig) { f(c) }

type decodeConfig struct {
	sizeLimit, recordLimit int64
	kind                   phase.Kind
}

// WithSizeLimit sets how many bytes a file may decompress to; a larger file fails with
// an error wrapping [ErrTooLarge] once n+1 decompressed bytes have been read, so a gzip
// bomb costs no more than n bytes of decompression. The default, and the value used
// when n ≤ 0, is [DefaultSizeLimit].
func WithSizeLimit(n int64) DecodeOption {
	return decodeOptionFunc(func(c *decodeConfig) {
		if n > 0 {
			c.sizeLimit = n
		}
	})
}

// WithRecordSizeLimit sets how many bytes of JSON text one record may take; a larger
// record fails with an error wrapping [ErrTooLarge]. A record is held in memory whole
// while it is decoded, so this bounds the decoder's memory; white space between records
// is never held. The default, and the value used when n ≤ 0, is
// [DefaultRecordSizeLimit].
func WithRecordSizeLimit(n int64) DecodeOption {
	return decodeOptionFunc(func(c *decodeConfig) {
		if n > 0 {
			c.recordLimit = n
		}
	})
}

// ExpectKind makes the decoder refuse a file whose records are not of kind k
// (phase.Backup or phase.Restore), with an error wrapping [operations.ErrInvalid], and
// gives an empty file that kind (see [Decoder.Kind]). By default the kind is that of the
// first record.
func ExpectKind(k phase.Kind) DecodeOption {
	return decodeOptionFunc(func(c *decodeConfig) { c.kind = k })
}

// Decode reads a whole itemoperations.json.gz file from r and returns its operations in
// file order (nil for an empty file, or one that holds JSON null). It streams as a
// [Decoder] does, so the only memory that grows with the file is the returned slice. On
// failure it returns no operations and a [*DecodeError] saying where the file went
// wrong, or an error wrapping phase.ErrUnknownKind for a bad [ExpectKind].
//
// Decode takes no context: to stop it early, make r fail (close the connection it reads
// from, or wrap it in a reader that fails once a context is done); Decode then returns
// that error inside a [*DecodeError]. Decode may be called from several goroutines at
// once with different readers.
func Decode(r io.Reader, opts ...DecodeOption) ([]operations.Operation, error) {
	d, err := NewDecoder(r, opts...)
	if err != nil {
		return nil, err
	}
	// Records are gathered in chunks and copied once into a slice of the right size:
	// growing one slice would copy every record about twice.
	var (
		chunks [][]operations.Operation
		chunk  []operations.Operation
		total  int
	)
	for {
		op, err := d.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if len(chunk) == cap(chunk) {
			if len(chunk) > 0 {
				chunks = append(chunks, chunk)
			}
			chunk = make([]operations.Operation, 0, min(max(2*cap(chunk), 16), decodeChunk))
		}
		chunk = append(chunk, op)
		total++
	}
	if total == 0 {
		return nil, nil
	}
	if len(chunks) == 0 {
		return chunk, nil
	}
	ops := make([]operations.Operation, 0, total)
	for _, c := range chunks {
		ops = append(ops, c...)
	}
	return append(ops, chunk...), nil
}

// decodeChunk is the most records Decode gathers in one chunk.
const decodeChunk = 4096

// A Decoder reads an itemoperations.json.gz file one record at a time, so that memory
// does not grow with the number of records: it holds the gzip decompressor's state and
// a buffer of one record and some read-ahead, bounded by the record size limit
// ([WithRecordSizeLimit]). Read records with [Decoder.Next] until it returns io.EOF, or
// range over [Decoder.All].
//
// The file's kind is that of its first record (or the one [ExpectKind] names), and every
// later record must have it. The end of the file is checked as strictly as the records:
// Next returns io.EOF only after the closing bracket (or the null of a file that holds
// null), nothing but white space after it, and the end of the gzip stream with a good
// checksum. Records returned before an error were well-formed, but a caller that needs
// the whole file intact must read to io.EOF.
//
// A Decoder is not safe for concurrent use. It must be made with [NewDecoder]; the zero
// Decoder is not usable. It owns no resources that need closing, and it never closes r.
type Decoder struct {
	src  sourceReader
	in   frames
	kind phase.Kind
	// expected is true when kind came from ExpectKind rather than the first record.
	expected bool
	rec      wireRecord // reused for every record
	intern   interner
	next     int                   // index of the next record to read
	pending  *operations.Operation // the first record, read by NewDecoder
	err      error                 // sticky: io.EOF after the last record, or a *DecodeError
}

// NewDecoder returns a Decoder reading the file in r. It reads the gzip header, the
// opening bracket and the first record (or, for an empty file, up to its end), so that
// [Decoder.Kind] is known, and returns a [*DecodeError] when any of that fails: the
// input is not gzip data, not a JSON array (or null, which is read as an empty file),
// or its first record is malformed, too large or refused. A bad [ExpectKind] gives an
// error wrapping phase.ErrUnknownKind. Nil options are ignored.
//
// A Decoder takes no context: to stop it, make r fail, as for [Decode].
func NewDecoder(r io.Reader, opts ...DecodeOption) (*Decoder, error) {
	cfg := decodeConfig{sizeLimit: DefaultSizeLimit, recordLimit: DefaultRecordSizeLimit}
	for _, o := range opts {
		if o != nil {
			o.applyDecode(&cfg)
		}
	}
	if cfg.kind != "" && cfg.kind != phase.Backup && cfg.kind != phase.Restore {
		return nil, fmt.Errorf("decode operations: expected kind %q: %w", cfg.kind, phase.ErrUnknownKind)
	}
	d := &Decoder{kind: cfg.kind, expected: cfg.kind != ""}
	d.src.r = r
	br := bufio.NewReader(&d.src)
	// gzip.NewReader reads a whole header before it checks the magic number, which would
	// call a short file of anything a truncated gzip header.
	if head, _ := br.Peek(2); len(head) > 0 && (head[0] != 0x1f || len(head) == 2 && head[1] != 0x8b) {
		return nil, &DecodeError{Record: -1, Offset: 0, Err: fmt.Errorf("%w: not gzip data: %w", ErrMalformed, gzip.ErrHeader)}
	}
	zr, err := gzip.NewReader(br)
	if err != nil {
		return nil, d.headerError(err)
	}
	d.in = frames{r: zr, buf: make([]byte, initialBuffer), limit: cfg.sizeLimit, recordLimit: cfg.recordLimit}
	c, err := d.in.peek()
	if err != nil {
		return nil, d.readError(-1, err, "the JSON text is empty")
	}
	if c == 'n' {
		if err := d.readNull(); err != nil {
			return nil, err
		}
		return d, nil
	}
	if c != '[' {
		return nil, d.syntaxError(-1, d.in.offset(d.in.lo), fmt.Sprintf("the file holds %s, want a JSON array", describeStart(c)))
	}
	d.in.lo++
	op, err := d.read()
	switch {
	case err == io.EOF:
	case err != nil:
		return nil, err
	default:
		d.pending = &op
	}
	return d, nil
}

// readNull reads a file whose JSON text starts with 'n': JSON null, which
// encoding/json reads into Velero's slice of operations as a nil slice, is an empty
// file. Nothing but white space may follow it.
func (d *Decoder) readNull() error {
	start := d.in.offset(d.in.lo)
	b, _, err := d.in.value()
	if err != nil {
		return d.readError(-1, err, "")
	}
	if string(b) != "null" {
		return d.syntaxError(-1, start, "the file holds invalid JSON starting with 'n', want a JSON array or null")
	}
	c, err := d.in.peek()
	switch {
	case err == io.EOF:
		d.err = io.EOF
		return nil
	case err != nil:
		return d.readError(-1, err, "")
	}
	return d.syntaxError(-1, d.in.offset(d.in.lo), fmt.Sprintf("%s follows null", describeStart(c)))
}

// Kind returns the kind of the file's operations: that of its first record, or the one
// [ExpectKind] named. It is empty for an empty file read without ExpectKind.
func (d *Decoder) Kind() phase.Kind { return d.kind }

// Next returns the next operation of the file. After the last one it returns io.EOF
// (unwrapped, as io.Reader does), once the rest of the file has been checked. A record
// that cannot be read gives a [*DecodeError] naming the record and the offset in the
// decompressed JSON text; its Err wraps [ErrMalformed] (not gzip, truncated or corrupt
// gzip data, invalid JSON, the wrong shape, a record with neither backup nor restore
// keys, a time that is not RFC 3339), [ErrTooLarge] (past a size limit),
// [operations.ErrInvalid] (a well-formed record refused: an unknown operation phase, an
// empty name or operation ID, a time outside years 0000 to 9999 in UTC, another kind
// than the file's), or the error of the underlying reader. Errors and io.EOF are
// sticky: every later call returns the same.
//
// Times are returned in UTC, to the second; PostOperationItems is nil for a backup
// record whose list is null or absent and empty for one whose list is [], and always
// nil for a restore's.
func (d *Decoder) Next() (operations.Operation, error) {
	if op := d.pending; op != nil {
		d.pending = nil
		return *op, nil
	}
	return d.read()
}

// All returns an iterator over the file's remaining operations, for use with range. It
// yields each operation with a nil error; when reading fails it yields a zero Operation
// with the error of [Decoder.Next] and stops. It stops without yielding at the end of
// the file.
//
//	for op, err := range dec.All() {
//		if err != nil {
//			return err
//		}
//		...
//	}
func (d *Decoder) All() iter.Seq2[operations.Operation, error] {
	return func(yield func(operations.Operation, error) bool) {
		for {
			op, err := d.Next()
			if err == io.EOF {
				return
			}
			if !yield(op, err) || err != nil {
				return
			}
		}
	}
}

// read decodes the next record, or checks the end of the file and returns io.EOF.
func (d *Decoder) read() (operations.Operation, error) {
	if d.err != nil {
		return operations.Operation{}, d.err
	}
	op, err := d.readRecord()
	if err != nil {
		d.err = err
	}
	return op, err
}

func (d *Decoder) readRecord() (operations.Operation, error) {
	in, i := &d.in, d.next
	c, err := in.peek()
	if err != nil {
		return operations.Operation{}, d.readError(-1, err, fmt.Sprintf("the JSON text ends inside the array, after %d records", i))
	}
	if c == ']' {
		in.lo++
		return operations.Operation{}, d.finish()
	}
	if i > 0 {
		if c != ',' {
			return operations.Operation{}, d.syntaxError(i, in.offset(in.lo), fmt.Sprintf("invalid character %s after record %d, want , or ]", quoteChar(c), i-1))
		}
		in.lo++
		if c, err = in.peek(); err != nil {
			return operations.Operation{}, d.readError(i, err, "the JSON text ends after a comma")
		}
		if c == ']' {
			return operations.Operation{}, d.syntaxError(i, in.offset(in.lo), "invalid character ']' after a comma, want a record")
		}
	}
	start := in.offset(in.lo)
	b, complete, err := in.value()
	if err != nil {
		return operations.Operation{}, d.readError(i, err, "")
	}
	if !complete {
		// The input ended inside the record: say so, unless the record has a syntax
		// error before the point where it was cut. A space appended to a cut record
		// fails past its end; a real error fails at or before it.
		var raw json.RawMessage
		var syntax *json.SyntaxError
		if err := json.Unmarshal(append(b, ' '), &raw); errors.As(err, &syntax) && syntax.Offset <= int64(len(b)) {
			return operations.Operation{}, d.syntaxError(i, start+syntax.Offset-1, "invalid JSON: "+syntax.Error())
		}
		return operations.Operation{}, &DecodeError{Record: i, Offset: in.offset(in.hi),
			Err: fmt.Errorf("%w: the JSON text ends inside the record: %w", ErrMalformed, io.ErrUnexpectedEOF)}
	}
	if string(b) == "null" {
		return operations.Operation{}, d.syntaxError(i, start, "the record is JSON null, want an object")
	}
	d.rec = wireRecord{}
	if !parseCanonical(b, &d.rec, &d.intern) {
		d.rec = wireRecord{}
		err = json.Unmarshal(b, &d.rec)
	}
	if err != nil {
		var (
			syntax *json.SyntaxError
			typ    *json.UnmarshalTypeError
		)
		switch {
		case errors.As(err, &syntax):
			return operations.Operation{}, d.syntaxError(i, start+syntax.Offset-1, "invalid JSON: "+syntax.Error())
		case errors.As(err, &typ):
			field := "the record"
			if typ.Field != "" {
				field = typ.Field
			}
			return operations.Operation{}, &DecodeError{Record: i, Offset: start + typ.Offset,
				Err: fmt.Errorf("%w: %s: found JSON %s, want %s", ErrMalformed, field, typ.Value, jsonType(typ.Type))}
		}
		return operations.Operation{}, &DecodeError{Record: i, Offset: start, Err: fmt.Errorf("%w: %w", ErrMalformed, err)}
	}
	op, err := d.operation(&d.rec)
	if err != nil {
		return operations.Operation{}, &DecodeError{Record: i, Offset: start, Err: err}
	}
	d.next++
	return op, nil
}

// finish checks that nothing but white space follows the closing bracket, up to the end
// of the gzip stream, whose checksum the gzip reader verifies there.
func (d *Decoder) finish() error {
	c, err := d.in.peek()
	if err == io.EOF {
		return io.EOF
	}
	if err != nil {
		return d.readError(-1, err, "")
	}
	return d.syntaxError(-1, d.in.offset(d.in.lo), fmt.Sprintf("%s follows the array", describeStart(c)))
}

// headerError describes a failure to read the gzip header.
func (d *Decoder) headerError(err error) error {
	var cause error
	switch {
	case d.src.err != nil && errors.Is(err, d.src.err):
		cause = fmt.Errorf("read: %w", err)
	case err == io.EOF:
		cause = fmt.Errorf("%w: empty input, want gzip data", ErrMalformed)
	case errors.Is(err, io.ErrUnexpectedEOF):
		cause = fmt.Errorf("%w: the gzip header is truncated: %w", ErrMalformed, err)
	default:
		cause = fmt.Errorf("%w: not gzip data: %w", ErrMalformed, err)
	}
	return &DecodeError{Record: -1, Offset: 0, Err: cause}
}

// readError describes a failure of the decompressed stream for record (-1 for none):
// a size limit, the gzip reader, the underlying reader, or, as io.EOF, an end of the
// text where atEOF says what was missing.
func (d *Decoder) readError(record int, err error, atEOF string) error {
	var cause error
	switch {
	case errors.Is(err, ErrTooLarge):
		cause = err
	case d.src.err != nil && errors.Is(err, d.src.err):
		cause = fmt.Errorf("read: %w", err)
	case err == io.EOF:
		cause = fmt.Errorf("%w: %s: %w", ErrMalformed, atEOF, io.ErrUnexpectedEOF)
	case errors.Is(err, io.ErrUnexpectedEOF):
		cause = fmt.Errorf("%w: the gzip data is truncated: %w", ErrMalformed, err)
	default:
		cause = fmt.Errorf("%w: corrupt gzip data: %w", ErrMalformed, err)
	}
	return &DecodeError{Record: record, Offset: d.in.offset(d.in.hi), Err: cause}
}

// syntaxError describes invalid JSON found at offset.
func (d *Decoder) syntaxError(record int, offset int64, msg string) error {
	return &DecodeError{Record: record, Offset: offset, Err: fmt.Errorf("%w: %s", ErrMalformed, msg)}
}

// operation converts a decoded record, checking it as the package documentation says.
func (d *Decoder) operation(rec *wireRecord) (operations.Operation, error) {
	s := &rec.Spec
	backup := s.BackupName != "" || s.BackupUID != "" || s.BackupItemAction != "" || s.PostOperationItems != nil
	restore := s.RestoreName != "" || s.RestoreUID != "" || s.RestoreItemAction != ""
	var op operations.Operation
	switch {
	case backup && restore:
		return op, fmt.Errorf("%w: the record has both backup keys (backupName, backupUID, backupItemAction, postOperationItems) and restore keys (restoreName, restoreUID, restoreItemAction)", ErrMalformed)
	case backup:
		op.Owner = operations.Owner{Kind: phase.Backup, Name: s.BackupName, UID: s.BackupUID}
		op.Action = s.BackupItemAction
		op.PostOperationItems = s.PostOperationItems
	case restore:
		op.Owner = operations.Owner{Kind: phase.Restore, Name: s.RestoreName, UID: s.RestoreUID}
		op.Action = s.RestoreItemAction
	default:
		return op, fmt.Errorf("%w: the record has no backupName or restoreName", ErrMalformed)
	}
	switch {
	case d.kind == "":
		d.kind = op.Owner.Kind
	case op.Owner.Kind != d.kind && d.expected:
		return op, fmt.Errorf("a %s operation, want %s operations: %w", op.Owner.Kind, d.kind, operations.ErrInvalid)
	case op.Owner.Kind != d.kind:
		return op, fmt.Errorf("a %s operation in a file of %s operations (as record 0 says): %w", op.Owner.Kind, d.kind, operations.ErrInvalid)
	}
	op.Resource = s.ResourceIdentifier
	op.ID = s.OperationID
	w := &rec.Status
	for _, t := range [...]struct {
		name string
		t    *wireTime
	}{{"created", &w.Created}, {"started", &w.Started}, {"updated", &w.Updated}} {
		if t.t.bad != "" {
			return op, fmt.Errorf("%w: status.%s: %s", ErrMalformed, t.name, t.t.bad)
		}
	}
	op.Status = operations.Status{
		Phase:          w.Phase,
		Error:          w.Error,
		NCompleted:     w.NCompleted,
		NTotal:         w.NTotal,
		OperationUnits: w.OperationUnits,
		Description:    w.Description,
		Created:        w.Created.t,
		Started:        w.Started.t,
		Updated:        w.Updated.t,
	}
	if err := op.Validate(); err != nil {
		return op, err
	}
	return op, nil
}

// describeStart names the JSON value that begins with c.
func describeStart(c byte) string {
	switch {
	case c == '{':
		return "a JSON object"
	case c == '[':
		return "another JSON array"
	case c == '"':
		return "a JSON string"
	case c == '-' || '0' <= c && c <= '9':
		return "a JSON number"
	case c == 't' || c == 'f':
		return "a JSON boolean"
	case c == 'n':
		return "JSON null"
	}
	return "invalid character " + quoteChar(c)
}

// quoteChar quotes c for an error message.
func quoteChar(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return "'" + string(rune(c)) + "'"
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

// jsonType names the JSON type a Go type of the wire records is decoded from.
func jsonType(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int64:
		return "an integer"
	case reflect.Struct:
		return "an object"
	case reflect.Slice:
		return "an array"
	}
	return t.String()
}
