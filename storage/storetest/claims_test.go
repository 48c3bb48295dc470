package storetest_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/decorate"
	"github.com/itemops/itemops/storage/memstore"
	"github.com/itemops/itemops/storage/storetest"
)

// keepingStore is a memstore that is an operations.ClaimKeeper in the simplest way: a
// run's claim has one holder (a session, or a caller outside the sessions), a session
// keeps the claims it released until End, and End gives them up. When leaky is set, End
// gives up nothing.
type keepingStore struct {
	*memstore.Store
	leaky bool

	mu      sync.Mutex                       // guards holders
	holders map[operations.Owner]*keptClaims // by owner without its UID; nil for a caller outside
}

// keptClaims is a session of a keepingStore: the runs it keeps, and whether it ended.
type keptClaims struct {
	s     *keepingStore
	inUse map[operations.Owner]bool // the runs it keeps, by whether a Monitor uses them
	ended bool
}

func newKeepingStore() *keepingStore {
	return &keepingStore{Store: memstore.New(), holders: make(map[operations.Owner]*keptClaims)}
}

func (s *keepingStore) KeepClaims(context.Context, time.Duration, func()) operations.ClaimSession {
	return &keptClaims{s: s, inUse: make(map[operations.Owner]bool)}
}

func (s *keepingStore) ClaimRun(ctx context.Context, o operations.Owner) (func(), bool, error) {
	return s.claim(ctx, o, nil)
}

// claim claims the run of o for k (nil outside the sessions); k.s.mu guards k.
func (s *keepingStore) claim(ctx context.Context, o operations.Owner, k *keptClaims) (func(), bool, error) {
	if err := o.Validate(); err != nil {
		return nil, false, err
	}
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	o.UID = ""
	s.mu.Lock()
	defer s.mu.Unlock()
	if h, held := s.holders[o]; held && (h != k || k == nil || k.inUse[o]) {
		return nil, false, nil
	}
	s.holders[o] = k
	if k != nil {
		k.inUse[o] = true
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if k != nil && !k.ended {
				k.inUse[o] = false
				return
			}
			if k != nil {
				delete(k.inUse, o)
			}
			delete(s.holders, o)
		})
	}, true, nil
}

func (k *keptClaims) ClaimRun(ctx context.Context, o operations.Owner) (func(), bool, error) {
	return k.s.claim(ctx, o, k)
}

func (k *keptClaims) EndPass(int) error  { return nil }
func (k *keptClaims) EndIncompletePass() {}

func (k *keptClaims) End() {
	k.s.mu.Lock()
	defer k.s.mu.Unlock()
	k.ended = true
	if k.s.leaky {
		return
	}
	for o, inUse := range k.inUse {
		if !inUse {
			delete(k.inUse, o)
			delete(k.s.holders, o)
		}
	}
}

// RunClaims passes a store that keeps its claims, and the store decorate.Store makes of
// it; it fails a decorator that hides the ability, and a session whose End gives up
// nothing, in the checks named for what they broke.
func TestRunClaims(t *testing.T) {
	passthrough := func(ctx context.Context, _ decorate.Call, call func(context.Context) error) error { return call(ctx) }
	tests := []struct {
		name     string
		newStore func() operations.Store
		wantFail []string // the checks that must fail; the others must pass
		wantSaid string   // what the first of them must say
	}{
		{"a store that keeps its claims", func() operations.Store { return newKeepingStore() }, nil, ""},
		{"decorate.Store", func() operations.Store { return decorate.Store(newKeepingStore(), passthrough) }, nil, ""},
		{
			name:     "an embedding decorator hides the ability",
			newStore: func() operations.Store { return embedding{newKeepingStore()} },
			wantFail: []string{"EndGivesUp", "EndLeavesClaimInUseToRelease", "FailedClaimLeavesNoClaim", "KeptFromPassToPass"},
			wantSaid: "is not an operations.ClaimKeeper",
		},
		{
			name:     "a session whose End gives up nothing",
			newStore: func() operations.Store { s := newKeepingStore(); s.leaky = true; return s },
			wantFail: []string{"EndGivesUp"},
			wantSaid: "ClaimRun(Backup/claimed) by the store, after the session ended reported ok false, want true",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := newRecorder(t)
			storetest.RunClaims(rec, func(*recorder) operations.Store { return tc.newStore() })
			failed := rec.failures()
			slices.Sort(failed)
			if !slices.Equal(failed, tc.wantFail) {
				t.Errorf("the checks that failed: %q, want %q", failed, tc.wantFail)
				for _, name := range failed {
					t.Logf("%s said: %s", name, rec.said(name))
				}
			}
			if len(tc.wantFail) > 0 {
				if said := rec.said(tc.wantFail[0]); !strings.Contains(said, tc.wantSaid) {
					t.Errorf("%s said %q, want it to say %q", tc.wantFail[0], said, tc.wantSaid)
				}
			}
		})
	}
}
