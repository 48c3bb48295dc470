package opsfile

import (
	"math"
	"unicode/utf8"

	"github.com/itemops/itemops/operations"
)

// The decoder's fast path. Velero's writer and ours write every record in one form: keys
// in a fixed order, no white space, strings without escapes unless they need them,
// integers without fractions, times as "2006-01-02T15:04:05Z". parseCanonical reads a
// record in exactly that form without reflection, and hands anything else (another key
// order, an unknown key, an escape, a time in another form, invalid JSON) back to
// encoding/json, so that what the decoder accepts, what it returns, and its errors do
// not depend on which path read a record. FuzzCanonical checks that both paths agree.

// parseCanonical fills rec from the record b when b is in the canonical form, and
// reports whether it did; when it reports false, rec is to be decoded by encoding/json.
// Strings that repeat from record to record are shared through in.
func parseCanonical(b []byte, rec *wireRecord, in *interner) bool {
	p := canonical{b: b, in: in}
	s := &rec.Spec
	if !p.lit(`{"spec":{"`) {
		return false
	}
	backup := false
	switch {
	case p.lit(`backupName":`):
		backup = true
		if !p.str(&s.BackupName, true) || !p.lit(`,"backupUID":`) || !p.str(&s.BackupUID, true) ||
			!p.lit(`,"backupItemAction":`) || !p.str(&s.BackupItemAction, true) {
			return false
		}
	case p.lit(`restoreName":`):
		if !p.str(&s.RestoreName, true) || !p.lit(`,"restoreUID":`) || !p.str(&s.RestoreUID, true) ||
			!p.lit(`,"restoreItemAction":`) || !p.str(&s.RestoreItemAction, true) {
			return false
		}
	default:
		return false
	}
	if !p.lit(`,"resourceIdentifier":`) || !p.resource(&s.ResourceIdentifier) ||
		!p.lit(`,"operationID":`) || !p.str(&s.OperationID, false) {
		return false
	}
	if backup {
		if !p.lit(`,"postOperationItems":`) || !p.items(&s.PostOperationItems) {
			return false
		}
	}
	if !p.lit(`},"status":{`) || !p.status(&rec.Status) {
		return false
	}
	return p.lit(`}}`) && p.i == len(p.b)
}

// canonical is a cursor over one record.
type canonical struct {
	b  []byte
	i  int
	in *interner
}

// lit consumes s if the input continues with it.
func (p *canonical) lit(s string) bool {
	if len(p.b)-p.i >= len(s) && string(p.b[p.i:p.i+len(s)]) == s {
		p.i += len(s)
		return true
	}
	return false
}

// str reads a string that encoding/json would return unchanged: no escapes, no control
// characters, valid UTF-8. Strings from fields that repeat are interned.
func (p *canonical) str(dst *string, intern bool) bool {
	raw, ok := p.rawString()
	if !ok {
		return false
	}
	if intern {
		*dst = p.in.get(raw)
	} else {
		*dst = string(raw)
	}
	return true
}

// rawString consumes a string as str would accept it and returns its bytes, which stay
// valid only as long as the record.
func (p *canonical) rawString() ([]byte, bool) {
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return nil, false
	}
	start, ascii := p.i+1, true
	for j := start; j < len(p.b); j++ {
		switch c := p.b[j]; {
		case c == '"':
			raw := p.b[start:j]
			if !ascii && !utf8.Valid(raw) {
				return nil, false // encoding/json replaces invalid bytes
			}
			p.i = j + 1
			return raw, true
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false
}

// resource reads a ResourceIdentifier with its keys in their order.
func (p *canonical) resource(r *operations.ResourceIdentifier) bool {
	return p.lit(`{"Group":`) && p.str(&r.Group, true) &&
		p.lit(`,"Resource":`) && p.str(&r.Resource, true) &&
		p.lit(`,"Namespace":`) && p.str(&r.Namespace, true) &&
		p.lit(`,"Name":`) && p.str(&r.Name, false) && p.lit(`}`)
}

// items reads null, or a list of ResourceIdentifiers; [] gives an empty, non-nil list,
// as encoding/json gives.
func (p *canonical) items(dst *[]operations.ResourceIdentifier) bool {
	if p.lit(`null`) {
		return true
	}
	if !p.lit(`[`) {
		return false
	}
	items := []operations.ResourceIdentifier{}
	if p.lit(`]`) {
		*dst = items
		return true
	}
	for {
		var r operations.ResourceIdentifier
		if !p.resource(&r) {
			return false
		}
		items = append(items, r)
		if p.lit(`]`) {
			*dst = items
			return true
		}
		if !p.lit(`,`) {
			return false
		}
	}
}

// status reads the status keys that are present, in their order.
func (p *canonical) status(w *wireStatus) bool {
	first := true
	key := func(k string) bool {
		if first {
			if p.lit(k) {
				first = false
				return true
			}
			return false
		}
		if len(p.b)-p.i > len(k) && p.b[p.i] == ',' && string(p.b[p.i+1:p.i+1+len(k)]) == k {
			p.i += 1 + len(k)
			return true
		}
		return false
	}
	var phase string
	if key(`"phase":`) {
		if !p.str(&phase, true) {
			return false
		}
		w.Phase = operations.OperationPhase(phase)
	}
	if key(`"error":`) && !p.str(&w.Error, false) {
		return false
	}
	if key(`"nCompleted":`) && !p.int(&w.NCompleted) {
		return false
	}
	if key(`"nTotal":`) && !p.int(&w.NTotal) {
		return false
	}
	if key(`"operationUnits":`) && !p.str(&w.OperationUnits, true) {
		return false
	}
	if key(`"description":`) && !p.str(&w.Description, false) {
		return false
	}
	for _, t := range [...]struct {
		key string
		dst *wireTime
	}{{`"created":`, &w.Created}, {`"started":`, &w.Started}, {`"updated":`, &w.Updated}} {
		if key(t.key) {
			raw, ok := p.rawString()
			if !ok {
				return false
			}
			if t.dst.t, ok = parseUTCSecond(raw); !ok {
				return false
			}
		}
	}
	return p.i < len(p.b) && p.b[p.i] == '}'
}

// int reads an integer as encoding/json writes one: an optional minus, no leading
// zeros, no fraction or exponent, within int64.
func (p *canonical) int(dst *int64) bool {
	i, neg := p.i, false
	if i < len(p.b) && p.b[i] == '-' {
		neg, i = true, i+1
	}
	start := i
	var n uint64
	for ; i < len(p.b) && '0' <= p.b[i] && p.b[i] <= '9'; i++ {
		d := uint64(p.b[i] - '0')
		if n > (math.MaxUint64-d)/10 {
			return false
		}
		n = n*10 + d
	}
	switch {
	case i == start, i-start > 1 && p.b[start] == '0': // no digits, or a leading zero
		return false
	case i < len(p.b) && (p.b[i] == '.' || p.b[i] == 'e' || p.b[i] == 'E'):
		return false
	case neg && n > 1<<63, !neg && n > math.MaxInt64:
		return false
	}
	switch {
	case neg && n == 1<<63:
		*dst = math.MinInt64
	case neg:
		*dst = -int64(n)
	default:
		*dst = int64(n)
	}
	p.i = i
	return true
}

// An interner shares the strings that repeat from record to record, so that a file of
// many records allocates each of them once. It holds at most maxInterned strings of at
// most maxInternedLen bytes; others are allocated each time.
type interner struct{ m map[string]string }

const (
	maxInterned    = 1024
	maxInternedLen = 128
)

func (in *interner) get(b []byte) string {
	if s, ok := in.m[string(b)]; ok {
		return s
	}
	s := string(b)
	if len(b) <= maxInternedLen && len(in.m) < maxInterned {
		if in.m == nil {
			in.m = make(map[string]string)
		}
		in.m[s] = s
	}
	return s
}
