package etcdstore

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// Records are JSON objects with short keys and a format version "v", so that a person
// can read them with etcdctl. The owner's kind and name come from the key, not the
// record. Times are RFC 3339 with nanoseconds and their offset, so they keep their
// instant; their location comes back as a fixed zone, or UTC.

// recordVersion is the "v" of every record this package writes.
const recordVersion = 1

type wireRun struct {
	V                int              `json:"v"`
	UID              string           `json:"uid,omitempty"`
	Phase            phase.Phase      `json:"phase"`
	Profile          phase.Profile    `json:"profile"`
	OperationTimeout time.Duration    `json:"operationTimeout,omitempty"`
	ItemsTotal       int              `json:"itemsTotal,omitempty"`
	ItemsDone        int              `json:"itemsDone,omitempty"`
	Errors           int              `json:"errors,omitempty"`
	Warnings         int              `json:"warnings,omitempty"`
	FailedOperations int              `json:"failedOperations,omitempty"`
	FailureReason    string           `json:"failureReason,omitempty"`
	Created          time.Time        `json:"created"`
	Started          time.Time        `json:"started"`
	Completed        time.Time        `json:"completed"`
	Updated          time.Time        `json:"updated"`
	History          []wireTransition `json:"history,omitempty"`
}

type wireTransition struct {
	From   phase.Phase `json:"from"`
	To     phase.Phase `json:"to"`
	Event  phase.Event `json:"event"`
	Time   time.Time   `json:"time"`
	Reason string      `json:"reason,omitempty"`
}

// encodeRun encodes r, or fails with an error wrapping [operations.ErrInvalid] when a time
// of it cannot be written (its year is outside 0–9999).
func encodeRun(r *operations.Run) ([]byte, error) {
	w := wireRun{
		V: recordVersion, UID: r.Owner.UID, Phase: r.Phase, Profile: r.Profile,
		OperationTimeout: r.OperationTimeout, ItemsTotal: r.ItemsTotal, ItemsDone: r.ItemsDone,
		Errors: r.Errors, Warnings: r.Warnings, FailedOperations: r.FailedOperations,
		FailureReason: r.FailureReason,
		Created:       r.Created, Started: r.Started, Completed: r.Completed, Updated: r.Updated,
	}
	if len(r.History) > 0 {
		w.History = make([]wireTransition, len(r.History))
		for i, t := range r.History {
			w.History[i] = wireTransition{From: t.From, To: t.To, Event: t.Event, Time: t.Time, Reason: t.Reason}
		}
	}
	b, err := json.Marshal(&w)
	if err != nil {
		return nil, fmt.Errorf("run %s: %w: %v", r.Owner, operations.ErrInvalid, err)
	}
	return b, nil
}

// decodeRun decodes the record of the run of o (whose UID comes from the record).
func decodeRun(o operations.Owner, b []byte) (operations.Run, error) {
	var w wireRun
	if err := json.Unmarshal(b, &w); err != nil {
		return operations.Run{}, fmt.Errorf("run %s: record: %w: %v", o, ErrCorrupt, err)
	}
	if w.V != recordVersion {
		return operations.Run{}, fmt.Errorf("run %s: record version %d: %w", o, w.V, ErrCorrupt)
	}
	o.UID = w.UID
	r := operations.Run{
		Owner: o, Phase: w.Phase, Profile: w.Profile,
		OperationTimeout: w.OperationTimeout, ItemsTotal: w.ItemsTotal, ItemsDone: w.ItemsDone,
		Errors: w.Errors, Warnings: w.Warnings, FailedOperations: w.FailedOperations,
		FailureReason: w.FailureReason,
		Created:       w.Created, Started: w.Started, Completed: w.Completed, Updated: w.Updated,
	}
	if len(w.History) > 0 {
		r.History = make([]operations.Transition, len(w.History))
		for i, t := range w.History {
			r.History[i] = operations.Transition{From: t.From, To: t.To, Event: t.Event, Time: t.Time, Reason: t.Reason}
		}
	}
	return r, nil
}

type wireOperation struct {
	V              int                       `json:"v"`
	UID            string                    `json:"uid,omitempty"`
	ID             string                    `json:"id"`
	Action         string                    `json:"action,omitempty"`
	Resource       wireResource              `json:"resource"`
	Post           []wireResource            `json:"postOperationItems,omitempty"`
	Phase          operations.OperationPhase `json:"phase"`
	Error          string                    `json:"error,omitempty"`
	NCompleted     int64                     `json:"nCompleted,omitempty"`
	NTotal         int64                     `json:"nTotal,omitempty"`
	OperationUnits string                    `json:"operationUnits,omitempty"`
	Description    string                    `json:"description,omitempty"`
	Created        time.Time                 `json:"created"`
	Started        time.Time                 `json:"started"`
	Updated        time.Time                 `json:"updated"`
}

type wireResource struct {
	Group     string `json:"group,omitempty"`
	Resource  string `json:"resource,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
}

// encodeOperation encodes op, or fails with an error wrapping [operations.ErrInvalid] when
// a time of it cannot be written (its year is outside 0–9999).
func encodeOperation(op *operations.Operation) ([]byte, error) {
	s := &op.Status
	w := wireOperation{
		V: recordVersion, UID: op.Owner.UID, ID: op.ID, Action: op.Action,
		Resource: wireResource(op.Resource),
		Phase:    s.Phase, Error: s.Error, NCompleted: s.NCompleted, NTotal: s.NTotal,
		OperationUnits: s.OperationUnits, Description: s.Description,
		Created: s.Created, Started: s.Started, Updated: s.Updated,
	}
	if len(op.PostOperationItems) > 0 {
		w.Post = make([]wireResource, len(op.PostOperationItems))
		for i, r := range op.PostOperationItems {
			w.Post[i] = wireResource(r)
		}
	}
	b, err := json.Marshal(&w)
	if err != nil {
		return nil, fmt.Errorf("operation %q of %s: %w: %v", op.ID, op.Owner, operations.ErrInvalid, err)
	}
	return b, nil
}

// decodeOperation decodes an operation record of the run of o.
func decodeOperation(o operations.Owner, b []byte) (operations.Operation, error) {
	var w wireOperation
	if err := json.Unmarshal(b, &w); err != nil {
		return operations.Operation{}, fmt.Errorf("operation record: %w: %v", ErrCorrupt, err)
	}
	if w.V != recordVersion {
		return operations.Operation{}, fmt.Errorf("operation record version %d: %w", w.V, ErrCorrupt)
	}
	if !w.Phase.Valid() {
		return operations.Operation{}, fmt.Errorf("operation %q: phase %q: %w", w.ID, w.Phase, ErrCorrupt)
	}
	o.UID = w.UID
	op := operations.Operation{
		Owner: o, Action: w.Action, Resource: operations.ResourceIdentifier(w.Resource), ID: w.ID,
		Status: operations.Status{
			Phase: w.Phase, Error: w.Error, NCompleted: w.NCompleted, NTotal: w.NTotal,
			OperationUnits: w.OperationUnits, Description: w.Description,
			Created: w.Created, Started: w.Started, Updated: w.Updated,
		},
	}
	if len(w.Post) > 0 {
		op.PostOperationItems = make([]operations.ResourceIdentifier, len(w.Post))
		for i, r := range w.Post {
			op.PostOperationItems[i] = operations.ResourceIdentifier(r)
		}
	}
	return op, nil
}

// meta is the record that versions a run's operations: every batch rewrites it, so a
// compare of its revision tells whether anything changed since it was read.
type meta struct {
	V int `json:"v"`
	// Next is the sequence number the next new operation ID gets; Count is how many
	// operation IDs the run has.
	Next  uint64 `json:"next"`
	Count uint64 `json:"count"`
	// Batch names a batch that is committed but not yet wholly applied, and Chunks is
	// how many chunks it was staged in.
	Batch  string `json:"batch,omitempty"`
	Chunks int    `json:"chunks,omitempty"`
}

func encodeMeta(m meta) []byte {
	m.V = recordVersion
	b, _ := json.Marshal(&m) // cannot fail: integers and strings
	return b
}

func decodeMeta(b []byte) (meta, error) {
	var m meta
	if err := json.Unmarshal(b, &m); err != nil {
		return meta{}, fmt.Errorf("operations metadata: %w: %v", ErrCorrupt, err)
	}
	if m.V != recordVersion || m.Next == 0 || (m.Batch != "") != (m.Chunks > 0) {
		return meta{}, fmt.Errorf("operations metadata %s: %w", b, ErrCorrupt)
	}
	return m, nil
}

// Phase codes, kept in the ID index beside each operation's sequence number.
var phaseCodes = map[operations.OperationPhase]byte{
	operations.OperationNew:        'N',
	operations.OperationInProgress: 'I',
	operations.OperationCompleted:  'C',
	operations.OperationFailed:     'F',
}

func codePhase(c byte) (operations.OperationPhase, bool) {
	switch c {
	case 'N':
		return operations.OperationNew, true
	case 'I':
		return operations.OperationInProgress, true
	case 'C':
		return operations.OperationCompleted, true
	case 'F':
		return operations.OperationFailed, true
	}
	return "", false
}

// idValue is the ID index value of an operation: its sequence key, ':', its phase code.
func idValue(seq uint64, p operations.OperationPhase) []byte {
	return append([]byte(seqKey(seq)+":"), phaseCodes[p])
}

func parseIDValue(id string, v []byte) (uint64, operations.OperationPhase, error) {
	if len(v) != 18 || v[16] != ':' {
		return 0, "", fmt.Errorf("operation %q: ID index value %q: %w", id, v, ErrCorrupt)
	}
	seq, err := parseSeq(string(v[:16]))
	p, ok := codePhase(v[17])
	if err != nil || !ok {
		return 0, "", fmt.Errorf("operation %q: ID index value %q: %w", id, v, ErrCorrupt)
	}
	return seq, p, nil
}

// A mutation is one write of a planned batch: a put of val under key, or a delete of key.
// key is relative to the run's operations prefix.
type mutation struct {
	del bool
	key string
	val []byte
}

// Chunks of a staged batch are a version byte, then mutations, each a kind byte ('P' or
// 'D'), the key's length as a uvarint, the key, and for a put the value's length as a
// uvarint and the value.
const chunkVersion = 1

func appendMutation(b []byte, m mutation) []byte {
	if m.del {
		b = append(b, 'D')
	} else {
		b = append(b, 'P')
	}
	b = binary.AppendUvarint(b, uint64(len(m.key)))
	b = append(b, m.key...)
	if !m.del {
		b = binary.AppendUvarint(b, uint64(len(m.val)))
		b = append(b, m.val...)
	}
	return b
}

// encodedSize is an upper bound of what appendMutation adds.
func (m mutation) encodedSize() int { return 1 + 2*binary.MaxVarintLen64 + len(m.key) + len(m.val) }

func decodeChunk(b []byte) ([]mutation, error) {
	if len(b) == 0 || b[0] != chunkVersion {
		return nil, fmt.Errorf("staged chunk: version: %w", ErrCorrupt)
	}
	b = b[1:]
	var out []mutation
	field := func() ([]byte, bool) {
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			return nil, false
		}
		f := b[k : k+int(n)]
		b = b[k+int(n):]
		return f, true
	}
	for len(b) > 0 {
		var m mutation
		switch b[0] {
		case 'P':
		case 'D':
			m.del = true
		default:
			return nil, fmt.Errorf("staged chunk: mutation kind %q: %w", b[0], ErrCorrupt)
		}
		b = b[1:]
		k, ok := field()
		if !ok {
			return nil, fmt.Errorf("staged chunk: truncated key: %w", ErrCorrupt)
		}
		m.key = string(k)
		if !m.del {
			if m.val, ok = field(); !ok {
				return nil, fmt.Errorf("staged chunk: truncated value: %w", ErrCorrupt)
			}
		}
		out = append(out, m)
	}
	return out, nil
}
