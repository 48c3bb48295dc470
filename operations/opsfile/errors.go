package opsfile

import (
	"errors"
	"fmt"
)

// ErrMalformed is returned, inside a [*DecodeError], when an itemoperations file is not
// what the codec reads: not gzip data, truncated or corrupt gzip data, invalid JSON, or
// JSON of the wrong shape.
var ErrMalformed = errors.New("malformed operations file")

// ErrTooLarge is returned, inside a [*DecodeError], when an itemoperations file
// decompresses to more bytes than the decoder's size limit, or one record is larger than
// its record size limit (see [WithSizeLimit] and [WithRecordSizeLimit]).
var ErrTooLarge = errors.New("input too large")

// A DecodeError reports where reading an itemoperations file failed. Err wraps
// [ErrMalformed], [ErrTooLarge], [operations.ErrInvalid], or the error of the reader the
// file came from, so [errors.Is] sees through it.
type DecodeError struct {
	// Record is the index, from 0, of the record being read, or -1 when the failure is
	// outside every record (the gzip header, the array's brackets, data after the array).
	Record int
	// Offset is the byte offset, from 0, in the decompressed JSON text at which the
	// failure was found: the offending byte for invalid JSON, the byte just past a value
	// of the wrong type, the start of a record that is well-formed but refused, and the
	// end of the text read for truncated input, corrupt gzip data, a failed read or a
	// size limit.
	Offset int64
	Err    error
}

// Error says where decoding failed and why.
func (e *DecodeError) Error() string {
	if e.Record < 0 {
		return fmt.Sprintf("decode operations: json offset %d: %v", e.Offset, e.Err)
	}
	return fmt.Sprintf("decode operations: record %d at json offset %d: %v", e.Record, e.Offset, e.Err)
}

// Unwrap returns the cause.
func (e *DecodeError) Unwrap() error { return e.Err }
