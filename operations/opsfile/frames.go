package opsfile

import (
	"bytes"
	"fmt"
	"io"
	"math"
)

// sourceReader remembers the first error of the reader a file comes from, so that a
// failure to read is not reported as corrupt data.
type sourceReader struct {
	r   io.Reader
	err error
}

func (s *sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF && s.err == nil {
		s.err = err
	}
	return n, err
}

// initialBuffer is the size of a Decoder's buffer until a record needs more.
const initialBuffer = 64 << 10

// frames cuts the decompressed JSON text into records without holding more than one
// record and some read-ahead, and enforces both size limits. It only finds where each
// value ends; encoding/json checks each record. Text in buf[lo:hi] has been read and not
// consumed; buf[0] is at offset base of the text.
type frames struct {
	r                  io.Reader
	buf                []byte
	lo, hi             int
	base               int64
	limit, recordLimit int64
	err                error // sticky: the first error of r (io.EOF included) or of a limit
}

// offset returns the offset in the text of buf[i].
func (f *frames) offset(i int) int64 { return f.base + int64(i) }

// fill reads more text, keeping buf[keep:hi] (keep ≤ lo) and dropping what is before
// it; it returns by how much indexes into buf moved down. It returns io.EOF at the end
// of the text, and an error wrapping ErrTooLarge once more than limit bytes were read.
func (f *frames) fill(keep int) (int, error) {
	if f.err != nil {
		return 0, f.err
	}
	if keep > 0 {
		copy(f.buf, f.buf[keep:f.hi])
		f.lo -= keep
		f.hi -= keep
		f.base += int64(keep)
	}
	if f.hi == len(f.buf) { // one record fills the buffer
		n := 2 * len(f.buf)
		if m := int(min(f.recordLimit, math.MaxInt/2)) + initialBuffer; n > m {
			n = m
		}
		f.buf = append(f.buf[:f.hi], make([]byte, n-f.hi)...)
	}
	p := f.buf[f.hi:]
	if room := f.limit - f.offset(f.hi); room < int64(len(p)) {
		p = p[:room+1] // one byte past the limit tells the text is too large
	}
	for range 100 {
		n, err := f.r.Read(p)
		f.hi += n
		if f.offset(f.hi) > f.limit {
			f.err = fmt.Errorf("the decompressed file is larger than the size limit of %d bytes: %w", f.limit, ErrTooLarge)
			return keep, f.err
		}
		if err != nil {
			f.err = err
			if n > 0 {
				return keep, nil
			}
			return keep, err
		}
		if n > 0 {
			return keep, nil
		}
	}
	f.err = io.ErrNoProgress
	return keep, f.err
}

// peek skips white space and returns the byte at lo, without consuming it.
func (f *frames) peek() (byte, error) {
	for {
		for i, c := range f.buf[f.lo:f.hi] {
			if !isSpace(c) {
				f.lo += i
				return c, nil
			}
		}
		f.lo = f.hi
		if _, err := f.fill(f.lo); err != nil {
			return 0, err
		}
	}
}

// value consumes the JSON value at lo and returns its text, valid until the next read:
// an object, array or string up to its closing delimiter (without checking what is
// inside), anything else up to the next white space, comma or closing bracket. When the
// text ends inside the value it returns what there is and complete false. A value
// longer than recordLimit gives an error wrapping ErrTooLarge.
func (f *frames) value() (b []byte, complete bool, err error) {
	start, i := f.lo, f.lo
	depth := 0
	inString, scalar := false, false
	switch f.buf[i] {
	case '{', '[':
		depth, i = 1, i+1
	case '"':
		inString, i = true, i+1
	default:
		scalar = true
	}
scan:
	for {
		for i < f.hi {
			if inString {
				// Jump to the next quote; it ends the string unless an odd number of
				// backslashes precede it. The opening quote stops the count.
				j := bytes.IndexByte(f.buf[i:f.hi], '"')
				if j < 0 {
					i = f.hi
					break
				}
				i += j
				k := i - 1
				for f.buf[k] == '\\' {
					k--
				}
				i++
				if (i-2-k)%2 == 1 {
					continue
				}
				inString = false
				if depth == 0 {
					break scan
				}
				continue
			}
			c := f.buf[i]
			if scalar {
				if isSpace(c) || c == ',' || c == ']' || c == '}' {
					break scan
				}
				i++
				continue
			}
			i++
			switch c {
			case '"':
				inString = true
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					break scan
				}
			}
		}
		if int64(i-start) >= f.recordLimit {
			return nil, false, f.recordTooLarge()
		}
		shift, err := f.fill(start)
		start, i = start-shift, i-shift
		switch {
		case err == io.EOF && scalar:
			break scan
		case err == io.EOF:
			return f.buf[start:i], false, nil
		case err != nil:
			return nil, false, err
		}
	}
	if int64(i-start) > f.recordLimit {
		return nil, false, f.recordTooLarge()
	}
	f.lo = i
	return f.buf[start:i], true, nil
}

func (f *frames) recordTooLarge() error {
	return fmt.Errorf("the record is larger than the record size limit of %d bytes: %w", f.recordLimit, ErrTooLarge)
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
