// Package salvage reads back the runs and operations that a damaged store of the engine
// of storage/kv still holds, one record at a time, from the entries a driver could read
// (storage/boltstore's Salvage reads them from a damaged file page by page). It is
// internal: boltstore is its one user, and a driver of a new backend that needs it too
// can be given it by exporting it then, which breaks nobody.
package salvage

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/internal/layout"
	"github.com/itemops/itemops/storage/internal/record"
)

// A Run is a run that [Read] read back, with those of its operations it read back, in
// the order their IDs were first put.
type Run struct {
	Run        operations.Run
	Operations []operations.Operation
	// Rebuilt is set when the run's record and its copy were both lost and Run was
	// rebuilt from its operations' records (see [Read]): its phase, counts and
	// history are not the ones it had.
	Rebuilt bool
}

// A Loss is a record that [Read] could not read back. Owner is the run it belongs
// to, when its key tells (its Kind is empty when not); ID is the operation's ID when the
// loss is of one operation whose ID is known, and empty otherwise; Why says what was
// found.
type Loss struct {
	Owner operations.Owner
	ID    string
	Why   string
}

// Read reads back every run and operation held in entries, the keys and values that a
// damaged store of the engine still holds, one record at a time: a run is read from its
// record, or from its copy in the phase index when its record is gone; each of its
// operations is read from its own record, so one that is lost costs only itself. It
// applies, in entries, which it changes, a batch that was committed but not yet applied
// (see the documentation of storage/kv, "Batches larger than one commit"), as a reader
// of the store would.
//
// A run whose record and copy are both lost, but some of whose operations' records are
// read, is rebuilt from them and marked [Run.Rebuilt]; every record it cannot read back
// is a [Loss]. The rules of both (the rebuilt run's owner, phase, reason and times; what
// counts as a loss) are written once, for users, in the docs of storage/boltstore's
// SalvagedRun and Loss, which Salvage returns; Read is their implementation.
//
// The runs come in the order of operations.Store.ListRuns, the losses in the order of
// their keys. Read reads entries alone: it is safe for concurrent use on distinct maps.
func Read(entries map[string][]byte) ([]Run, []Loss) {
	all := entries
	var lost []Loss
	applyStaged(all, &lost)

	// A store read as one snapshot never holds both the unfinished (u) and the finished
	// (f) record of one sequence number; a damaged one read page by page might, one of
	// them a stale copy. The ID index entry says which is the operation's (when the one
	// it names is gone, the operation is lost); without it, the finished one is: a
	// record moves from u to f once, never back.
	type runOps struct {
		records map[uint64]*[2][]byte     // by sequence number: the u and the f record
		ids     map[uint64]layout.IDEntry // by sequence number, from the ID index
		names   map[uint64]string         // the ID of each entry of ids
	}
	runs := map[operations.Owner]operations.Run{}
	copies := map[operations.Owner]operations.Run{}
	undecoded := map[operations.Owner]error{} // run records that do not decode
	ops := map[operations.Owner]*runOps{}
	opsOf := func(o operations.Owner) *runOps {
		if ops[o] == nil {
			ops[o] = &runOps{records: map[uint64]*[2][]byte{}, ids: map[uint64]layout.IDEntry{}, names: map[uint64]string{}}
		}
		return ops[o]
	}
	for _, k := range slices.Sorted(maps.Keys(all)) {
		v := all[k]
		key := []byte(k)
		switch {
		case k == layout.FormatKey:
		case k == "":
			lost = append(lost, Loss{Why: "an empty key"})
		case key[0] == layout.PrefixRun:
			o, err := layout.OwnerOfRunKey(key)
			if err != nil {
				lost = append(lost, Loss{Why: err.Error()})
				continue
			}
			if run, err := record.DecodeRun(o, v); err != nil {
				undecoded[o] = err
			} else {
				runs[o] = run
			}
		case key[0] == layout.PrefixIdx:
			// Only a copy: a run it would name is lost only with its record.
			if o, err := layout.OwnerOfIdxKey(key); err == nil {
				if run, err := record.DecodeRun(o, v); err == nil {
					copies[o] = run
				}
			}
		case key[0] == layout.PrefixOps:
			o, suffix, tail, ok := layout.CutOpsKey(key)
			switch {
			case !ok:
				lost = append(lost, Loss{Why: fmt.Sprintf("key %q is of no form of the layout", key)})
			case (suffix == layout.OpsUnfinished || suffix == layout.OpsFinished) && len(tail) == 8:
				seq := binary.BigEndian.Uint64(tail)
				ro := opsOf(o)
				if ro.records[seq] == nil {
					ro.records[seq] = new([2][]byte)
				}
				ro.records[seq][btoi(suffix == layout.OpsFinished)] = v
			case suffix == layout.OpsID:
				// An entry that does not parse costs nothing: the record names its ID.
				if e, err := layout.ParseIDEntry(string(tail), v); err == nil {
					ro := opsOf(o)
					ro.ids[e.Seq], ro.names[e.Seq] = e, string(tail)
				}
			case suffix == layout.OpsMeta, suffix == layout.OpsStaged:
				// applyStaged applied the batch they name, if any
			default:
				lost = append(lost, Loss{Owner: o, Why: fmt.Sprintf("key %q is of no form of the layout", key)})
			}
		default:
			lost = append(lost, Loss{Why: fmt.Sprintf("key %q is of no form of the layout", key)})
		}
	}

	owners := make([]operations.Owner, 0, len(runs)+len(copies)+len(ops))
	for _, m := range []map[operations.Owner]operations.Run{runs, copies} {
		for o := range m {
			owners = append(owners, o)
		}
	}
	for o := range ops {
		owners = append(owners, o)
	}
	slices.SortFunc(owners, func(a, b operations.Owner) int { return bytes.Compare(layout.RunKey(a), layout.RunKey(b)) })
	owners = slices.Compact(owners)

	// The profiles of the kinds of one's own, from the runs read: a run rebuilt needs
	// its kind's, which no key or operation record holds.
	profiles := map[phase.Kind][]phase.Profile{}
	for _, m := range []map[operations.Owner]operations.Run{runs, copies} {
		for o, r := range m {
			if !slices.Contains(profiles[o.Kind], r.Profile) {
				profiles[o.Kind] = append(profiles[o.Kind], r.Profile)
			}
		}
	}

	var out []Run
	for _, o := range owners {
		run, ok := runs[o]
		if !ok {
			run, ok = copies[o]
		}
		ro := ops[o]
		if ro == nil {
			ro = &runOps{}
		}
		seqs := make([]uint64, 0, len(ro.records)+len(ro.ids))
		for seq := range ro.records {
			seqs = append(seqs, seq)
		}
		for seq := range ro.ids {
			if ro.records[seq] == nil {
				seqs = append(seqs, seq)
			}
		}
		slices.Sort(seqs)
		var kept []operations.Operation
		for _, seq := range seqs {
			id, rec := ro.names[seq], []byte(nil)
			if both := ro.records[seq]; both != nil {
				if e, indexed := ro.ids[seq]; indexed {
					rec = both[btoi(!record.Unfinished(e.Code))]
				} else {
					rec = both[btoi(both[1] != nil)]
				}
			}
			if rec == nil {
				lost = append(lost, Loss{Owner: o, ID: id, Why: "its record is lost (gone, or left out as damaged): only its ID index entry remains"})
				continue
			}
			op, err := record.DecodeOperation(o, rec)
			if err != nil {
				lost = append(lost, Loss{Owner: o, ID: id, Why: fmt.Sprintf("its record does not decode: %v", err)})
				continue
			}
			kept = append(kept, op)
		}
		if ok {
			out = append(out, Run{Run: run, Operations: kept})
			continue
		}
		if len(kept) > 0 {
			run, err := rebuildRun(o, kept, profiles[o.Kind])
			if err == nil {
				out = append(out, Run{Run: run, Operations: kept, Rebuilt: true})
				continue
			}
			for _, op := range kept {
				lost = append(lost, Loss{Owner: o, ID: op.ID, Why: fmt.Sprintf("its run's record is gone, no copy of it remains, and the run cannot be rebuilt: %v", err)})
			}
		}
		if err, bad := undecoded[o]; bad {
			lost = append(lost, Loss{Owner: o, Why: fmt.Sprintf("its run record does not decode, and no copy of it remains: %v", err)})
		}
	}
	slices.SortStableFunc(lost, func(a, b Loss) int {
		return cmp.Or(bytes.Compare(layout.RunKey(a.Owner), layout.RunKey(b.Owner)), cmp.Compare(a.ID, b.ID))
	})
	return out, lost
}

// rebuildRun returns a run for owner o, whose record and copy are lost, from its
// operations ops (at least one), as [Read] describes; profiles are those of the runs
// of o's kind that were read. It fails with an error wrapping phase.ErrUnknownKind when
// o's kind is one of one's own and profiles is not exactly one profile, and with the
// error of [operations.Run.SetPhase] or [operations.Run.Validate] when the run is not
// valid.
func rebuildRun(o operations.Owner, ops []operations.Operation, profiles []phase.Profile) (operations.Run, error) {
	run := operations.Run{Owner: operations.Owner{Kind: o.Kind, Name: o.Name, UID: ops[0].Owner.UID}, Phase: phase.New}
	if o.Kind != phase.Backup && o.Kind != phase.Restore {
		if len(profiles) != 1 {
			return operations.Run{}, fmt.Errorf("its kind is one of one's own, and %d profiles of it were read (one is needed): %w", len(profiles), phase.ErrUnknownKind)
		}
		run.Profile = profiles[0]
	}
	var last time.Time
	for i, op := range ops {
		if i == 0 || op.Status.Created.Before(run.Created) {
			run.Created = op.Status.Created
		}
		for _, t := range []time.Time{op.Status.Created, op.Status.Updated} {
			if t.After(last) {
				last = t
			}
		}
	}
	reason := fmt.Sprintf("salvage: the run's record was lost; its phase, counts and history are unknown; %d of its operations were saved", len(ops))
	if err := run.SetPhase(phase.Failed, reason, last); err != nil {
		return operations.Run{}, err
	}
	run.FailureReason = reason
	if err := run.Validate(); err != nil {
		return operations.Run{}, err
	}
	return run, nil
}

// applyStaged applies, in all, each run's batch that its operations metadata names as
// committed but not applied: the writes of its chunks, as the engine's rollForward does.
func applyStaged(all map[string][]byte, lost *[]Loss) {
	for _, k := range slices.Sorted(maps.Keys(all)) {
		o, suffix, tail, ok := layout.CutOpsKey([]byte(k))
		if !ok || suffix != layout.OpsMeta || len(tail) != 0 {
			continue
		}
		meta, err := layout.ParseMeta(all[k])
		if err != nil || meta.Staged == 0 {
			continue
		}
		start := layout.StagedPrefix(layout.OpsPrefix(o), meta.Staged)
		for _, ck := range slices.Sorted(maps.Keys(all)) {
			if !bytes.HasPrefix([]byte(ck), start) {
				continue
			}
			writes, err := layout.ParseChunk(all[ck])
			if err != nil {
				*lost = append(*lost, Loss{Owner: o, Why: fmt.Sprintf("a chunk of a batch committed but not applied: %v", err)})
				continue
			}
			for _, w := range writes {
				if w.Delete {
					delete(all, string(w.Key))
				} else {
					all[string(w.Key)] = w.Value
				}
			}
		}
	}
}

// btoi is 1 for true and 0 for false.
func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
