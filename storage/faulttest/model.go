package faulttest

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/itemops/itemops/operations"
)

// The model is the contract of operations.Store (see operations/store.go), for the runs
// of one owner: porcupine checks each owner's calls apart (a history is linearizable
// when each object's is), and a ListRuns is checked as one read of each owner, of
// whether and how it lists that owner's run. That projection is a necessary condition
// of a linearizable multi-object read, not a sufficient one: a ListRuns that mixes two
// moments of two runs passes it.

// A runRec is a run as the model keeps it: normalized, with a key that two equal runs
// share.
type runRec struct {
	run operations.Run
	key string
}

// An opRec is an operation as the model keeps it.
type opRec struct {
	op  operations.Operation
	key string
}

// normalRun returns r with its times in UTC, without monotonic readings, and an empty
// History as nil, and its key: two runs a store must read back as equal have one key.
func normalRun(r operations.Run) *runRec {
	r = r.Clone()
	for _, t := range []*time.Time{&r.Created, &r.Started, &r.Completed, &r.Updated, &r.Cancel.At} {
		*t = normalTime(*t)
	}
	for i := range r.History {
		r.History[i].Time = normalTime(r.History[i].Time)
	}
	if len(r.History) == 0 {
		r.History = nil
	}
	return &runRec{run: r, key: keyOf(r)}
}

func normalOps(ops []operations.Operation) []opRec {
	out := make([]opRec, len(ops))
	for i, op := range ops {
		op = op.Clone()
		for _, t := range []*time.Time{&op.Status.Created, &op.Status.Started, &op.Status.Updated,
			&op.Monitor.ProgressAt, &op.Monitor.ErrorSince, &op.Monitor.NextPoll} {
			*t = normalTime(*t)
		}
		if len(op.PostOperationItems) == 0 {
			op.PostOperationItems = nil
		}
		out[i] = opRec{op: op, key: keyOf(op)}
	}
	return out
}

func normalTime(t time.Time) time.Time { return t.Round(0).UTC() }

func keyOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("unencodable %T: %v", v, err)
	}
	return string(b)
}

// An input is what a call asked.
type input struct {
	method    string
	owner     operations.Owner
	run       *runRec // CreateRun, CreateRunWithOperations
	ops       []opRec // CreateRunWithOperations, PutOperations
	id        string  // GetOperation
	runFilter operations.RunFilter
	opFilter  operations.OperationFilter
	updates   []invocation // UpdateRun: each call of its update function
	read      *state       // CommitPass: the run and its unfinished operations as ReadPass read them
}

// write reports whether the method writes.
func (in *input) write() bool {
	switch in.method {
	case "CreateRun", "CreateRunWithOperations", "UpdateRun", "DeleteRun", "PutOperations", "CommitPass":
		return true
	}
	return false
}

// An invocation is one call of an UpdateRun's update function: the run it was given,
// what it made of it, and its error.
type invocation struct {
	before, after *runRec
	err           error
}

// A result is what a call's error says of its outcome.
type result int

const (
	ok       result = iota
	unknown         // it may or may not have taken effect
	notFound        // operations.ErrNotFound
	exists          // operations.ErrExists
	conflict        // operations.ErrConflict: nothing written
	refused         // an invalid record, or the update function's error: nothing written
)

var resultNames = [...]string{"ok", "unknown", "not found", "exists", "conflict", "refused"}

// An output is what a call answered.
type output struct {
	result result
	run    *runRec // GetRun, UpdateRun; for a ListRuns projected onto an owner, its run as listed, or nil
	ops    []opRec // GetOperation (one), ListOperations
}

// state is one owner's part of the store: its run, if any, and its operations in the
// order their IDs were first put. A state is never changed once made.
type state struct {
	run *runRec
	ops []opRec
}

func (s *state) find(id string) int {
	return slices.IndexFunc(s.ops, func(o opRec) bool { return o.op.ID == id })
}

// put returns s with ops put, or ok false when the contract refuses a replacement.
func (s *state) put(ops []opRec) (*state, bool) {
	next := &state{run: s.run, ops: slices.Clone(s.ops)}
	for _, o := range ops {
		i := next.find(o.op.ID)
		if i < 0 {
			next.ops = append(next.ops, o)
			continue
		}
		if operations.ValidateOperationUpdate(next.ops[i].op, o.op) != nil {
			return nil, false
		}
		next.ops[i] = o
	}
	return next, true
}

var empty = &state{}

// unfinished returns the operations of s that are New or InProgress, in order.
func (s *state) unfinished() []opRec {
	var out []opRec
	for _, o := range s.ops {
		if !o.op.Status.Phase.Finished() {
			out = append(out, o)
		}
	}
	return out
}

// sameOps reports whether a and b hold equal operations in one order.
func sameOps(a, b []opRec) bool {
	return slices.EqualFunc(a, b, func(x, y opRec) bool { return x.key == y.key })
}

// step returns the states a call may lead s to, none when the call's answer is not one
// the contract allows in s.
func step(s *state, in *input, out *output) []any {
	same := []any{s}
	switch in.method {
	case "CreateRun", "CreateRunWithOperations":
		created := &state{run: in.run, ops: in.ops}
		switch {
		case out.result == ok && s.run == nil:
			return []any{created}
		case out.result == exists && s.run != nil, out.result == refused:
			return same
		case out.result == unknown && s.run == nil:
			return []any{s, created}
		case out.result == unknown:
			return same
		}
	case "GetRun":
		switch {
		case out.result == ok && s.run != nil && s.run.key == out.run.key, out.result == notFound && s.run == nil:
			return same
		}
	case "ListRuns": // projected onto one owner: out.run is the run listed, or nil
		listed := s.run != nil && in.runFilter.Match(s.run.run)
		if listed && out.run != nil && out.run.key == s.run.key || !listed && out.run == nil {
			return same
		}
	case "UpdateRun":
		return updateRun(s, in, out)
	case "DeleteRun":
		switch {
		case out.result == ok && s.run != nil:
			return []any{empty}
		case out.result == notFound && s.run == nil, out.result == refused, out.result == conflict && s.run != nil:
			return same
		case out.result == unknown && s.run != nil:
			return []any{s, empty}
		case out.result == unknown:
			return same
		}
	case "PutOperations":
		if s.run == nil {
			if out.result == notFound || out.result == unknown || out.result == refused {
				return same
			}
			return nil
		}
		next, valid := s.put(in.ops)
		switch {
		case out.result == ok && valid:
			return []any{next}
		case out.result == conflict, out.result == refused, out.result == unknown && !valid:
			return same
		case out.result == unknown:
			return []any{s, next}
		}
	case "ReadPass": // one run of a page: out.run and out.ops, its unfinished operations
		if s.run != nil && s.run.key == out.run.key && sameOps(s.unfinished(), out.ops) {
			return same
		}
	case "CommitPass":
		// A commit is made only on the run and unfinished operations it was read with
		// (a write between them that left them as they were may still make it stale).
		if s.run == nil || in.read == nil {
			if out.result != ok {
				return same
			}
			return nil
		}
		asRead := in.read.run.key == s.run.key && sameOps(s.unfinished(), in.read.ops)
		next, valid := s.put(in.ops)
		switch {
		case out.result == ok && asRead && valid:
			return []any{next}
		case out.result == refused:
			return same
		case (out.result == unknown || out.result == conflict) && asRead && valid:
			// ErrStale may answer the call's own write sent twice (see
			// operations.PassReader), so it is an unknown outcome too.
			return []any{s, next}
		case out.result == unknown, out.result == conflict:
			return same
		}
	case "GetOperation":
		i := s.find(in.id)
		switch {
		case out.result == ok && i >= 0 && s.ops[i].key == out.ops[0].key, out.result == notFound && i < 0:
			return same
		}
	case "ListOperations":
		switch {
		case out.result == notFound && s.run == nil:
			return same
		case out.result == ok && s.run != nil:
			var want []opRec
			for _, o := range s.ops {
				if in.opFilter.Match(o.op) {
					want = append(want, o)
				}
			}
			if slices.EqualFunc(want, out.ops, func(a, b opRec) bool { return a.key == b.key }) {
				return same
			}
		}
	}
	return nil
}

// updateRun is step for UpdateRun. A write is the work of one call of the update
// function: the one given the run as it is in s.
func updateRun(s *state, in *input, out *output) []any {
	if s.run == nil {
		if out.result == notFound || out.result == unknown {
			return []any{s}
		}
		return nil
	}
	var next []any
	for _, u := range in.updates {
		if u.before.key != s.run.key {
			continue
		}
		valid := u.err == nil && operations.ValidateRunUpdate(u.before.run, u.after.run) == nil
		switch {
		case out.result == ok && valid && u.after.key == out.run.key:
			return []any{&state{run: u.after, ops: s.ops}}
		case out.result == refused && !valid:
			return []any{s}
		case out.result == unknown && valid:
			next = append(next, &state{run: u.after, ops: s.ops})
		}
	}
	switch out.result {
	case conflict, unknown:
		return append(next, s)
	}
	return nil
}

func (s *state) hash() uint64 {
	h := fnv.New64a()
	if s.run != nil {
		h.Write([]byte(s.run.key))
	}
	for _, o := range s.ops {
		h.Write([]byte(o.key))
	}
	return h.Sum64()
}

func (s *state) equal(t *state) bool {
	if (s.run == nil) != (t.run == nil) || s.run != nil && s.run.key != t.run.key {
		return false
	}
	return slices.EqualFunc(s.ops, t.ops, func(a, b opRec) bool { return a.key == b.key })
}

func (s *state) String() string {
	if s.run == nil {
		return "no run"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", s.run.run.Owner, s.run.run.Phase)
	if s.run.run.CancelRequested() {
		b.WriteString(" cancel requested")
	}
	fmt.Fprintf(&b, ", %d operations:", len(s.ops))
	for _, o := range s.ops {
		fmt.Fprintf(&b, " %s=%s", o.op.ID, o.op.Status.Phase)
	}
	return b.String()
}

func describe(in *input, out *output) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s(%s", in.method, in.owner.Name)
	switch in.method {
	case "CreateRun", "CreateRunWithOperations", "PutOperations", "CommitPass":
		for _, o := range in.ops {
			fmt.Fprintf(&b, " %s=%s", o.op.ID, o.op.Status.Phase)
		}
	case "GetOperation":
		fmt.Fprintf(&b, " %s", in.id)
	case "ListRuns":
		fmt.Fprintf(&b, " %+v", in.runFilter)
	case "ListOperations":
		fmt.Fprintf(&b, " %v", in.opFilter.Phases)
	case "UpdateRun":
		for _, u := range in.updates {
			fmt.Fprintf(&b, " %s->%s", u.before.run.Phase, u.after.run.Phase)
			if u.err != nil {
				b.WriteString("!")
			}
		}
	}
	fmt.Fprintf(&b, ") -> %s", resultNames[out.result])
	if out.run != nil {
		fmt.Fprintf(&b, " %s", out.run.run.Phase)
	}
	if in.method == "ListOperations" || in.method == "GetOperation" || in.method == "ReadPass" {
		for _, o := range out.ops {
			fmt.Fprintf(&b, " %s=%s", o.op.ID, o.op.Status.Phase)
		}
	}
	return b.String()
}

// model is the porcupine model of the store, partitioned by owner.
func model() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
			byOwner := make(map[operations.Owner][]porcupine.Operation)
			var order []operations.Owner
			for _, op := range history {
				o := op.Input.(*input).owner
				o.UID = ""
				if _, ok := byOwner[o]; !ok {
					order = append(order, o)
				}
				byOwner[o] = append(byOwner[o], op)
			}
			out := make([][]porcupine.Operation, len(order))
			for i, o := range order {
				out[i] = byOwner[o]
			}
			return out
		},
		Init: func() []any { return []any{empty} },
		Step: func(s, in, out any) []any {
			return step(s.(*state), in.(*input), out.(*output))
		},
		Equal:             func(a, b any) bool { return a.(*state).equal(b.(*state)) },
		Hash:              func(s any) uint64 { return s.(*state).hash() },
		DescribeOperation: func(in, out any) string { return describe(in.(*input), out.(*output)) },
		DescribeState:     func(s any) string { return s.(*state).String() },
	}
	return nm.ToModel()
}

// operationsOf returns the calls of h as porcupine's operations, with each ListRuns
// projected onto every owner of owners.
func operationsOf(calls []call, owners []operations.Owner) []porcupine.Operation {
	var out []porcupine.Operation
	for i := range calls {
		c := &calls[i]
		if c.in.method != "ListRuns" {
			out = append(out, porcupine.Operation{ClientId: c.client, Input: &c.in, Call: c.start, Output: &c.out, Return: c.end})
			continue
		}
		for _, o := range owners {
			in := c.in
			in.owner = o
			res := &output{result: ok}
			for j := range c.listed {
				if l := c.listed[j].run.Owner; l.Kind == o.Kind && l.Name == o.Name {
					res.run = &c.listed[j]
				}
			}
			out = append(out, porcupine.Operation{ClientId: c.client, Input: &in, Call: c.start, Output: res, Return: c.end})
		}
	}
	return out
}
