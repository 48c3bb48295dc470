package storetest_test

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/internal/testutil/racebuild"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/storetest"
)

// The suite is checked on two fronts: a second, deliberately plain store must pass it
// (so it asks for the contract, not for memstore's particulars), and the same store with
// one rule broken must fail it, in the subtest named for that rule.

// faultEnv names the fault a child process of TestSuiteCatchesFaults injects.
const faultEnv = "STORETEST_FAULT"

// A fault breaks one rule of the contract in simpleStore.
type fault string

const (
	noFault         fault = ""
	noCopyIn        fault = "no-copy-in"          // keeps the caller's values
	noCopyOut       fault = "no-copy-out"         // hands out its own values
	noRunValidation fault = "no-run-validation"   // UpdateRun skips ValidateRunUpdate
	partialBatch    fault = "partial-batch"       // writes a batch while validating it
	splitBatch      fault = "split-batch"         // lets readers in between a batch's writes
	ignoreContext   fault = "ignore-context"      // never looks at ctx
	moveOnUpsert    fault = "move-on-upsert"      // a replaced operation moves to the end
	unlockedUpdate  fault = "unlocked-update"     // read-modify-write without holding the lock
	keepOpsOnDelete fault = "keep-ops-on-delete"  // a re-created run gets its old operations
	creationOrder   fault = "creation-order"      // ListRuns in creation order
	ignoreOpFilter  fault = "ignore-op-filter"    // ListOperations returns everything
	missingRunOK    fault = "put-without-run-ok"  // PutOperations creates a missing run
	updateMissingOK fault = "update-missing-call" // UpdateRun calls update on a zero run
	ignoreUID       fault = "ignore-uid"          // a run answers for an owner of another UID
	dropState       fault = "drop-monitor-state"  // PutOperations forgets an operation's MonitorState
)

func TestSimpleStore(t *testing.T) {
	t.Parallel()
	f := fault(os.Getenv(faultEnv))
	storetest.Run(t, func(*testing.T) operations.Store { return newSimpleStore(f) }, storetest.WithoutRunStarter(), storetest.WithoutPassReader())
}

func TestSuiteCatchesFaults(t *testing.T) {
	if os.Getenv(faultEnv) != "" {
		return // a child process: only TestSimpleStore is meant to run
	}
	tests := []struct {
		fault    fault
		run      string   // the part of the suite the child runs
		wantFail []string // subtests that must fail, below TestSimpleStore/
	}{
		{noCopyIn, "Isolation", []string{"Isolation/RunAfterCreate", "Isolation/OperationsAfterPut"}},
		{noCopyOut, "Isolation", []string{"Isolation/RunAfterGet", "Isolation/RunAfterList", "Isolation/RunAfterUpdate", "Isolation/OperationAfterGet", "Isolation/OperationsAfterList"}},
		{noRunValidation, "Runs", []string{"Runs/UpdateRefused", "Runs/TerminalStaysTerminal", "Runs/ListFollowsUpdatesAndDeletes"}},
		{partialBatch, "Operations", []string{"Operations/InvalidBatchWritesNothing", "Operations/FinishedStaysFinished"}},
		{splitBatch, "Concurrency", []string{"Concurrency/PutOperationsOneRun", "Concurrency/ReadersSeeWholeBatches"}},
		{ignoreContext, "Context", []string{"Context/Cancelled", "Context/DeadlineExceeded"}},
		{moveOnUpsert, "Operations", []string{"Operations/UpsertKeepsFirstPutOrder"}},
		{unlockedUpdate, "Concurrency", []string{"Concurrency/UpdateRunLosesNoWrite"}},
		{keepOpsOnDelete, "Runs", []string{"Runs/Delete"}},
		{creationOrder, "Runs", []string{"Runs/ListOrder"}},
		{ignoreOpFilter, "Operations", []string{"Operations/ListFilter", "Operations/ListFilterFollowsUpdates"}},
		{missingRunOK, "Operations", []string{"Operations/PutWithoutRun", "Operations/EmptyBatch"}},
		{updateMissingOK, "Runs", []string{"Runs/UpdateMissing"}},
		{ignoreUID, "Runs", []string{"Runs/CreateAndGet", "Runs/CreateExisting", "Runs/Update", "Runs/UIDMismatch"}},
		{dropState, "Operations", []string{"Operations/KeepsMonitorState"}},
	}
	for _, tc := range tests {
		t.Run(string(tc.fault), func(t *testing.T) {
			t.Parallel() // each runs a child process of its own
			args := []string{"-test.run=^TestSimpleStore$/^" + tc.run + "$", "-test.v", "-test.count=1"}
			if testing.Short() {
				args = append(args, "-test.short")
			}
			cmd := exec.Command(os.Args[0], args...)
			cmd.Env = append(racebuild.Environ(), faultEnv+"="+string(tc.fault))
			out, err := cmd.CombinedOutput()
			require.Error(t, err, "the suite passed a store with fault %s:\n%s", tc.fault, out)
			for _, name := range tc.wantFail {
				require.Contains(t, string(out), "--- FAIL: TestSimpleStore/"+name+" ",
					"fault %s: subtest %s did not fail:\n%s", tc.fault, name, out)
			}
			require.NotContains(t, string(out), "panic:", "the suite panicked")
		})
	}
}

// simpleStore is a plain Store: one mutex held by every method but while an update
// function runs, maps, and no index.
// Its fault, when set, breaks one rule.
type simpleStore struct {
	fault fault

	mu        sync.Mutex
	runs      map[key]*simpleRun
	created   []key                          // creation order, for creationOrder
	graveyard map[key][]operations.Operation // for keepOpsOnDelete
}

type key struct {
	kind string
	name string
}

func keyOf(o operations.Owner) key { return key{string(o.Kind), o.Name} }

type simpleRun struct {
	run     operations.Run
	version int // raised by every update of run
	ops     []operations.Operation
	index   map[string]int
}

var _ operations.Store = (*simpleStore)(nil)

func newSimpleStore(f fault) *simpleStore {
	return &simpleStore{fault: f, runs: map[key]*simpleRun{}, graveyard: map[key][]operations.Operation{}}
}

func (s *simpleStore) ctxErr(ctx context.Context) error {
	if s.fault == ignoreContext {
		return nil
	}
	return ctx.Err()
}

func (s *simpleStore) in(r operations.Run) operations.Run {
	if s.fault == noCopyIn {
		return r
	}
	return r.Clone()
}

func (s *simpleStore) out(r operations.Run) operations.Run {
	if s.fault == noCopyOut {
		return r
	}
	return r.Clone()
}

func (s *simpleStore) inOp(op operations.Operation) operations.Operation {
	if s.fault == noCopyIn {
		return op
	}
	return op.Clone()
}

func (s *simpleStore) outOp(op operations.Operation) operations.Operation {
	if s.fault == noCopyOut {
		return op
	}
	return op.Clone()
}

// uid refuses owner o for sr, a stored run of its kind and name, when both have UIDs and
// they differ; sr may be nil.
func (s *simpleStore) uid(sr *simpleRun, o operations.Owner) error {
	if s.fault == ignoreUID || sr == nil || o.UID == "" || sr.run.Owner.UID == "" || o.UID == sr.run.Owner.UID {
		return nil
	}
	return fmt.Errorf("run %s has UID %q: %w", o, sr.run.Owner.UID, operations.ErrUIDMismatch)
}

func (s *simpleStore) CreateRun(ctx context.Context, r operations.Run) error {
	if err := s.ctxErr(ctx); err != nil {
		return err
	}
	if err := r.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := keyOf(r.Owner)
	if old, ok := s.runs[k]; ok {
		if err := s.uid(old, r.Owner); err != nil {
			return err
		}
		return fmt.Errorf("create run %s: %w", r.Owner, operations.ErrExists)
	}
	sr := &simpleRun{run: s.in(r), index: map[string]int{}}
	if s.fault == keepOpsOnDelete {
		for _, op := range s.graveyard[k] {
			sr.index[op.ID] = len(sr.ops)
			sr.ops = append(sr.ops, op)
		}
	}
	s.runs[k] = sr
	s.created = append(s.created, k)
	return nil
}

func (s *simpleStore) GetRun(ctx context.Context, o operations.Owner) (operations.Run, error) {
	if err := s.ctxErr(ctx); err != nil {
		return operations.Run{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sr := s.runs[keyOf(o)]
	if sr == nil {
		return operations.Run{}, fmt.Errorf("get run %s: %w", o, operations.ErrNotFound)
	}
	if err := s.uid(sr, o); err != nil {
		return operations.Run{}, err
	}
	return s.out(sr.run), nil
}

// UpdateRun reads the run, calls update without the lock held (other calls go on while
// it runs), and writes the result if no other update wrote the run meanwhile, or
// starts over. With the unlockedUpdate fault it writes without that check.
func (s *simpleStore) UpdateRun(ctx context.Context, o operations.Owner, update func(*operations.Run) error) (operations.Run, error) {
	if err := s.ctxErr(ctx); err != nil {
		return operations.Run{}, err
	}
	if update == nil {
		return operations.Run{}, fmt.Errorf("update run %s: nil update: %w", o, operations.ErrInvalid)
	}
	for {
		s.mu.Lock()
		sr := s.runs[keyOf(o)]
		if sr == nil {
			s.mu.Unlock()
			if s.fault == updateMissingOK {
				var r operations.Run
				_ = update(&r)
			}
			return operations.Run{}, fmt.Errorf("update run %s: %w", o, operations.ErrNotFound)
		}
		if err := s.uid(sr, o); err != nil {
			s.mu.Unlock()
			return operations.Run{}, err
		}
		before, version := sr.run.Clone(), sr.version
		s.mu.Unlock()
		if s.fault == unlockedUpdate {
			runtime.Gosched() // let another writer read the same run
		}
		after := before.Clone()
		if err := update(&after); err != nil {
			return operations.Run{}, err
		}
		if s.fault != noRunValidation {
			if err := operations.ValidateRunUpdate(before, after); err != nil {
				return operations.Run{}, err
			}
		}
		s.mu.Lock()
		if s.runs[keyOf(o)] != sr || (sr.version != version && s.fault != unlockedUpdate) {
			s.mu.Unlock()
			continue
		}
		sr.run, sr.version = after.Clone(), sr.version+1
		out := s.out(sr.run)
		s.mu.Unlock()
		return out, nil
	}
}

func (s *simpleStore) ListRuns(ctx context.Context, f operations.RunFilter) ([]operations.Run, error) {
	if err := s.ctxErr(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []operations.Run
	for _, k := range s.created {
		if sr := s.runs[k]; sr != nil && f.Match(sr.run) && !slices.ContainsFunc(out, func(r operations.Run) bool { return keyOf(r.Owner) == k }) {
			out = append(out, s.out(sr.run))
		}
	}
	if s.fault != creationOrder {
		slices.SortFunc(out, func(a, b operations.Run) int {
			return cmp.Or(cmp.Compare(kindRank(a.Owner.Kind), kindRank(b.Owner.Kind)), cmp.Compare(a.Owner.Kind, b.Owner.Kind), cmp.Compare(a.Owner.Name, b.Owner.Name))
		})
	}
	return out, nil
}

// kindRank orders kinds as the contract lists them: Backup, Restore, then kinds of
// one's own.
func kindRank(k phase.Kind) int {
	switch k {
	case phase.Backup:
		return 0
	case phase.Restore:
		return 1
	}
	return 2
}

func (s *simpleStore) DeleteRun(ctx context.Context, o operations.Owner) error {
	if err := s.ctxErr(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := keyOf(o)
	sr := s.runs[k]
	if sr == nil {
		return fmt.Errorf("delete run %s: %w", o, operations.ErrNotFound)
	}
	if err := s.uid(sr, o); err != nil {
		return err
	}
	if s.fault == keepOpsOnDelete {
		s.graveyard[k] = sr.ops
	}
	delete(s.runs, k)
	return nil
}

func (s *simpleStore) PutOperations(ctx context.Context, o operations.Owner, ops []operations.Operation) error {
	if err := s.ctxErr(ctx); err != nil {
		return err
	}
	if s.fault == partialBatch {
		return s.putPartially(o, ops)
	}
	if err := operations.ValidateBatch(o, ops); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock() // splitBatch unlocks in the loop, but locks again before returning
	sr := s.runs[keyOf(o)]
	if sr == nil {
		if s.fault != missingRunOK {
			return fmt.Errorf("put operations of %s: %w", o, operations.ErrNotFound)
		}
		sr = &simpleRun{run: operations.Run{Owner: o, Phase: phase.New}, index: map[string]int{}}
		s.runs[keyOf(o)] = sr
		s.created = append(s.created, keyOf(o))
	}
	if err := s.uid(sr, o); err != nil {
		return err
	}
	for i := range ops {
		if j, ok := sr.index[ops[i].ID]; ok {
			if err := operations.ValidateOperationUpdate(sr.ops[j], ops[i]); err != nil {
				return err
			}
		}
	}
	for i := range ops {
		if s.fault == splitBatch && i > 0 {
			s.mu.Unlock()
			runtime.Gosched() // let readers and other writers in
			s.mu.Lock()
		}
		op := s.inOp(ops[i])
		if s.fault == dropState {
			op.Monitor = operations.MonitorState{}
		}
		sr.put(op, s.fault == moveOnUpsert)
	}
	return nil
}

// putPartially writes each operation as soon as it has been checked.
func (s *simpleStore) putPartially(o operations.Owner, ops []operations.Operation) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	sr := s.runs[keyOf(o)]
	if sr == nil {
		return fmt.Errorf("put operations of %s: %w", o, operations.ErrNotFound)
	}
	if err := s.uid(sr, o); err != nil {
		return err
	}
	for i := range ops {
		if err := operations.ValidateBatch(o, ops[i:i+1]); err != nil {
			return err
		}
		if j, ok := sr.index[ops[i].ID]; ok {
			if err := operations.ValidateOperationUpdate(sr.ops[j], ops[i]); err != nil {
				return err
			}
		}
		sr.put(s.inOp(ops[i]), false)
	}
	return nil
}

func (sr *simpleRun) put(op operations.Operation, moveToEnd bool) {
	j, ok := sr.index[op.ID]
	switch {
	case ok && !moveToEnd:
		sr.ops[j] = op
		return
	case ok:
		sr.ops = slices.Delete(sr.ops, j, j+1)
		for i := j; i < len(sr.ops); i++ {
			sr.index[sr.ops[i].ID] = i
		}
	}
	sr.index[op.ID] = len(sr.ops)
	sr.ops = append(sr.ops, op)
}

func (s *simpleStore) GetOperation(ctx context.Context, o operations.Owner, id string) (operations.Operation, error) {
	if err := s.ctxErr(ctx); err != nil {
		return operations.Operation{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sr := s.runs[keyOf(o)]
	if sr == nil {
		return operations.Operation{}, fmt.Errorf("get operation %q of %s: %w", id, o, operations.ErrNotFound)
	}
	if err := s.uid(sr, o); err != nil {
		return operations.Operation{}, err
	}
	j, ok := sr.index[id]
	if !ok {
		return operations.Operation{}, fmt.Errorf("get operation %q of %s: %w", id, o, operations.ErrNotFound)
	}
	return s.outOp(sr.ops[j]), nil
}

func (s *simpleStore) ListOperations(ctx context.Context, o operations.Owner, f operations.OperationFilter) ([]operations.Operation, error) {
	if err := s.ctxErr(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sr := s.runs[keyOf(o)]
	if sr == nil {
		return nil, fmt.Errorf("list operations of %s: %w", o, operations.ErrNotFound)
	}
	if err := s.uid(sr, o); err != nil {
		return nil, err
	}
	var out []operations.Operation
	for _, op := range sr.ops {
		if s.fault == ignoreOpFilter || f.Match(op) {
			out = append(out, s.outOp(op))
		}
	}
	return out, nil
}
