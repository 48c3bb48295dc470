package kv

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/internal/layout"
	"github.com/itemops/itemops/storage/internal/record"
)

// passPage is how many runs a page of [Store.ReadPass] holds on a [Backend]: each page
// is one Read, so a pass over many runs never holds one read transaction (bbolt) or one
// revision (etcd) for long.
const passPage = 100

// A PassBackend is an optional ability of a [PartitionedBackend]: it lets the engine
// read a Monitor's pass in one read per page of runs and write what a poll found
// without reading the run again (see operations.PassReader, which [Store] implements
// on it). [Open] gives every [Backend]'s engine this ability; storage/kubestore has it.
// A PartitionedBackend without it still gets a working ReadPass, which reads each run
// in a read of its own.
type PassBackend interface {
	// ScanPartitions calls read for every run that f selects, as ScanRuns selects them
	// and in any order, with its partition, the phase it was indexed under (as ScanRuns
	// gives it), its record and a Reader of its partition's keys; after each page of
	// runs, it calls page. Every call of read within one page sees one consistent
	// snapshot, and page is called outside of it, so that the engine may work as long
	// as it likes between pages. ScanPartitions stops at the first error read or page
	// returns, and returns it. record and the byte slices that r passes are valid only
	// until read returns; the engine keeps r itself after that only to give it to
	// CommitRead.
	ScanPartitions(ctx context.Context, f operations.RunFilter, read func(p Partition, indexed phase.Phase, record []byte, r Reader) error, page func() error) error

	// CommitRead is CommitPartition for a commit planned on what r, a Reader that
	// ScanPartitions gave for p, showed: the backend may take r's keys and versions as
	// the current ones rather than read them again, as long as the commit fails with an
	// error wrapping ErrConditionFailed when a condition does not hold.
	CommitRead(ctx context.Context, p Partition, r Reader, run RunChange, conds []Condition, writes []Write) error
}

var (
	_ operations.PassReader = (*Store)(nil)
	_ PassBackend           = (*flat)(nil)
)

// passSnapshot is the Snapshot of an operations.PassRun that ReadPass makes: what
// CommitPass needs to write the run's operations on condition that they are as read.
type passSnapshot struct {
	s       *Store
	o       operations.Owner
	runVer  Version
	metaVer Version
	meta    layout.Meta
	found   map[string]layout.IDEntry // the unfinished operations by ID
	r       Reader                    // the Reader the run was read with, for CommitRead; nil on a backend without it
}

// ReadPass calls fn with the runs that f selects, and their unfinished operations, in
// pages (see operations.PassReader): on a [Backend], pages of up to 100 runs, each one
// Read; on a [PassBackend], the pages of its ScanPartitions; on another
// [PartitionedBackend], one page of every run, each run read by a read of its own. A
// run with a staged batch left to apply is read again alone, after the batch is
// applied. It fails as [Store.ListRuns] and [Store.ListOperations] do, and returns
// fn's error as it is.
func (s *Store) ReadPass(ctx context.Context, f operations.RunFilter, fn func(page []operations.PassRun) error) error {
	if s == nil {
		return ErrClosed
	}
	pb, ok := s.b.(PassBackend)
	if !ok {
		return s.readPassByRun(ctx, f, fn)
	}
	var (
		page   []operations.PassRun
		staged []operations.Owner // runs of the page with a staged batch
		// given holds the runs already read: a run that fn moved from one phase of f
		// to another that a later page reads is not given again.
		given = make(map[runName]bool)
	)
	fromUser := false // the error is fn's, returned as it is
	err := pb.ScanPartitions(ctx, f, func(p Partition, indexed phase.Phase, rec []byte, r Reader) error {
		run, err := decodeListed(p, indexed, rec)
		if err != nil || !f.Match(run) {
			return err
		}
		name := runName{run.Owner.Kind, run.Owner.Name}
		if given[name] {
			return nil
		}
		given[name] = true
		pr, err := s.readPassRun(ctx, r, run, rec)
		if errors.Is(err, errStaged) {
			staged = append(staged, run.Owner)
			return nil
		}
		if err != nil {
			return err
		}
		page = append(page, pr)
		return nil
	}, func() error {
		for _, o := range staged {
			pr, err := s.passRunAlone(ctx, o, f)
			if errors.Is(err, operations.ErrNotFound) || errors.Is(err, errNotSelected) {
				continue // deleted, or changed phase, since the page's read
			}
			if err != nil {
				return err
			}
			page = append(page, pr)
		}
		if len(page) == 0 {
			return nil
		}
		err := fn(page)
		fromUser = err != nil
		page, staged = nil, staged[:0]
		return err
	})
	if err != nil && !fromUser {
		return fmt.Errorf("read pass: %w", err)
	}
	return err
}

// A runName names a run within one ReadPass.
type runName struct {
	kind phase.Kind
	name string
}

// errStaged is what readPassRun returns for a run with a staged batch left to apply;
// errNotSelected what passRunAlone returns for a run that f no longer selects.
var (
	errStaged      = errors.New("staged batch to apply")
	errNotSelected = errors.New("not selected")
)

// decodeListed decodes the record of the run of p that a scan found, indexed under
// the phase indexed (empty when the scan did not select by phase), as ListRuns does.
func decodeListed(p Partition, indexed phase.Phase, rec []byte) (operations.Run, error) {
	o := p.owner()
	run, err := record.DecodeRun(o, rec)
	switch {
	case err != nil && indexed == "":
		return operations.Run{}, fmt.Errorf("run %s: %w", o, err)
	case err != nil:
		return operations.Run{}, fmt.Errorf("phase index entry of run %s: %w", o, err)
	case indexed != "" && run.Phase != indexed:
		return operations.Run{}, fmt.Errorf("phase index entry of run %s in %s holds phase %s: %w", o, indexed, run.Phase, operations.ErrCorrupt)
	}
	return run, nil
}

// readPassRun reads, with r, the versions of run's record and operations metadata and
// its unfinished operations. rec, when not nil, is the record a scan gave for run,
// which r must hold too: a backend's Reader and its scan show one snapshot. It returns
// errStaged when the run has a staged batch left to apply.
func (s *Store) readPassRun(ctx context.Context, r Reader, run operations.Run, rec []byte) (operations.PassRun, error) {
	o := run.Owner
	prefix := layout.OpsPrefix(o)
	v, runVer, err := r.Get(ctx, layout.RunKey(o))
	switch {
	case err != nil:
		return operations.PassRun{}, err
	case v == nil || rec != nil && !bytes.Equal(v, rec):
		return operations.PassRun{}, fmt.Errorf("run %s: its record and the one its scan found differ in one snapshot: %w", o, operations.ErrCorrupt)
	}
	// One Scan reads the metadata ('m'), any staged chunks ('t') and the unfinished
	// operations ('u'), which sort in that order: one request on a remote backend.
	metaKey, start := layout.OpsKey(prefix, layout.OpsMeta), layout.OpsKey(prefix, layout.OpsUnfinished)
	snap := &passSnapshot{s: s, o: o, runVer: runVer, found: make(map[string]layout.IDEntry)}
	snap.meta, _ = layout.ParseMeta(nil) // a run without metadata has had no operation
	var (
		ops     []operations.Operation
		metaErr error // the metadata's, reported once the scan has ended
	)
	err = r.Scan(ctx, metaKey, end(start), func(k, v []byte, ver Version) error {
		switch {
		case bytes.Equal(k, metaKey):
			snap.metaVer = ver
			if snap.meta, metaErr = layout.ParseMeta(v); metaErr == nil {
				// Room for every operation the run was ever given, up to a bound, saves
				// the copies of growing the list and the map one doubling at a time.
				room := int(min(max(snap.meta.Next, 1)-1, 1024))
				ops, snap.found = make([]operations.Operation, 0, room), make(map[string]layout.IDEntry, room)
			}
			return nil
		case !bytes.HasPrefix(k, start):
			return nil // a staged chunk, which the metadata names
		case len(k) != len(start)+8:
			return fmt.Errorf("operation record key %q: %w", k, operations.ErrCorrupt)
		}
		op, err := record.DecodeOperation(o, v)
		if err != nil {
			return fmt.Errorf("operation record %x: %w", k[len(start):], err)
		}
		if op.Status.Phase.Finished() {
			return fmt.Errorf("operation %q: finished, under an unfinished key: %w", op.ID, operations.ErrCorrupt)
		}
		if _, dup := snap.found[op.ID]; dup {
			return fmt.Errorf("operation %q: stored twice: %w", op.ID, operations.ErrCorrupt)
		}
		snap.found[op.ID] = layout.IDEntry{Seq: binary.BigEndian.Uint64(k[len(start):]), Code: v[1]}
		ops = append(ops, op)
		return nil
	})
	if err != nil {
		return operations.PassRun{}, fmt.Errorf("run %s: %w", o, err)
	}
	if metaErr != nil {
		return operations.PassRun{}, fmt.Errorf("run %s: %w", o, metaErr)
	}
	if snap.meta.Staged != 0 {
		return operations.PassRun{}, errStaged
	}
	if _, ok := s.b.(PassBackend); ok {
		snap.r = r
	}
	return operations.PassRun{Run: run, Operations: ops, Snapshot: snap}, nil
}

// passRunAlone reads the run of o for a pass in a read of its own, after applying a
// staged batch it finds. It returns errNotSelected when f does not select the run.
func (s *Store) passRunAlone(ctx context.Context, o operations.Owner, f operations.RunFilter) (operations.PassRun, error) {
	var pr operations.PassRun
	err := s.retry(ctx, func() error {
		staged := false
		err := s.b.ReadPartition(ctx, partitionOf(o), func(r Reader) error {
			run, _, err := readRun(ctx, r, o)
			if err != nil {
				return err
			}
			if !f.Match(run) {
				return errNotSelected
			}
			pr, err = s.readPassRun(ctx, r, run, nil)
			staged = errors.Is(err, errStaged)
			if staged {
				return nil
			}
			return err
		})
		if err != nil || !staged {
			return err
		}
		if err := s.rollForward(ctx, partitionOf(o), layout.OpsPrefix(o)); err != nil {
			return err
		}
		return errLost
	})
	if snap, ok := pr.Snapshot.(*passSnapshot); ok {
		snap.r = nil // not a Reader of ScanPartitions
	}
	return pr, err
}

// readPassByRun is ReadPass on a backend without PassBackend: the runs listed by
// ScanRuns, each then read alone, in one page.
func (s *Store) readPassByRun(ctx context.Context, f operations.RunFilter, fn func(page []operations.PassRun) error) error {
	runs, err := s.ListRuns(ctx, f)
	if err != nil {
		return fmt.Errorf("read pass: %w", err)
	}
	page := make([]operations.PassRun, 0, len(runs))
	for _, run := range runs {
		pr, err := s.passRunAlone(ctx, run.Owner, f)
		if errors.Is(err, operations.ErrNotFound) || errors.Is(err, errNotSelected) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read pass: %w", err)
		}
		page = append(page, pr)
	}
	if len(page) == 0 {
		return nil
	}
	return fn(page)
}

// CommitPass writes ops, replacements of unfinished operations of r, in one commit (or
// staged, when the batch is larger than one commit of the backend), on condition that
// r's run record and operations metadata are as ReadPass read them: every write of a
// run's operations changes its metadata, and every write of the run its record. It
// fails as operations.PassReader says, with an error wrapping operations.ErrStale when
// a condition does not hold. It takes the run's turn (see [turns]) as every write
// does.
func (s *Store) CommitPass(ctx context.Context, r operations.PassRun, ops []operations.Operation) error {
	if s == nil {
		return ErrClosed
	}
	snap, ok := r.Snapshot.(*passSnapshot)
	if !ok || snap.s != s {
		return fmt.Errorf("commit pass: the run was not read by this store's ReadPass: %w", operations.ErrInvalid)
	}
	o := snap.o
	recs, err := encodeBatch(o, ops)
	if err != nil {
		return fmt.Errorf("commit pass of %s: %w", o, err)
	}
	if len(ops) == 0 {
		return nil
	}
	found := make([]layout.IDEntry, len(ops))
	for i := range ops {
		e, ok := snap.found[ops[i].ID]
		if !ok {
			return fmt.Errorf("commit pass of %s: batch item %d: operation %q is not one of the run's unfinished operations as read: %w", o, i, ops[i].ID, operations.ErrInvalid)
		}
		found[i] = e
	}
	prefix := layout.OpsPrefix(o)
	meta := snap.meta
	body, change, err := planBatch(o, prefix, &meta, ops, recs, found)
	if err != nil {
		return fmt.Errorf("commit pass of %s: %w", o, err)
	}
	rk := layout.RunKey(o)
	conds := []Condition{{Key: rk, Version: snap.runVer}, {Key: layout.OpsKey(prefix, layout.OpsMeta), Version: snap.metaVer}}
	w, err := s.turns.wait(ctx, string(rk))
	if err != nil {
		return fmt.Errorf("commit pass of %s: %w", o, err)
	}
	defer w.done()
	err = s.commitBatch(ctx, partitionOf(o), prefix, snap.r, conds, change, body, meta)
	if errors.Is(err, ErrConditionFailed) {
		return fmt.Errorf("commit pass of %s: %w", o, operations.ErrStale)
	}
	if err != nil {
		return fmt.Errorf("commit pass of %s: %w", o, err)
	}
	return nil
}

// ScanPartitions reads the runs as ScanRuns does, a page of passPage runs per Read,
// each Read resuming its scan after the last key of the one before.
func (f *flat) ScanPartitions(ctx context.Context, q operations.RunFilter, read func(p Partition, indexed phase.Phase, record []byte, r Reader) error, page func() error) error {
	for _, sc := range f.scans(q) {
		from := sc.start
		for from != nil {
			var next []byte // where the next Read resumes; nil: the range is done
			n := 0
			err := f.b.Read(ctx, func(r Reader) error {
				return r.Scan(ctx, from, sc.end, func(k, v []byte, _ Version) error {
					if n == passPage {
						next = slices.Clone(k)
						return errStop
					}
					n++
					p, err := sc.partition(k)
					if err != nil {
						return err
					}
					return read(p, sc.phase, v, r)
				})
			})
			if err != nil && !errors.Is(err, errStop) {
				return err
			}
			if n > 0 {
				if err := page(); err != nil {
					return err
				}
			}
			from = next
		}
	}
	return nil
}

// CommitRead is CommitPartition: a Backend checks the conditions itself.
func (f *flat) CommitRead(ctx context.Context, p Partition, _ Reader, run RunChange, conds []Condition, writes []Write) error {
	return f.CommitPartition(ctx, p, run, conds, writes)
}
