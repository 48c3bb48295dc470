package storetest_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/storage/memstore"
	"github.com/itemops/itemops/storage/storetest"
)

// sharedClaims is the claim table of replicas that share one memstore: a run's claim
// has one holder, a replica or a claim session of one, and the claims of a replica end
// a moment after it dies, or at once when they expire or another takes them over. When
// grantAll is set, it is broken: every claim is granted, held or not; when takeNothing
// is set, a takeover ends nothing.
type sharedClaims struct {
	store       *memstore.Store
	grantAll    bool
	takeNothing bool

	mu      sync.Mutex
	holders map[operations.Owner]*holder // by owner without its UID
}

// A holder holds a claim: a replica, under one of its claim sessions (or none).
type holder struct {
	replica string
	session *sharedSession // nil outside the sessions
	inUse   bool           // false for a claim the session keeps and no Monitor uses
}

// drop ends the claims of replica.
func (c *sharedClaims) drop(replica string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for o, h := range c.holders {
		if h.replica == replica {
			delete(c.holders, o)
		}
	}
}

// sharingStore is the store of one replica of a sharedClaims, a ClaimKeeper whose
// sessions keep their claims until End. Once it is dead it fails every claim and gives
// none up.
type sharingStore struct {
	*memstore.Store
	c    *sharedClaims
	name string
	dead atomic.Bool
}

// A sharedSession is a claim session of a sharingStore.
type sharedSession struct {
	s     *sharingStore
	ended bool // guarded by s.c.mu
}

func (s *sharingStore) ClaimRun(ctx context.Context, o operations.Owner) (func(), bool, error) {
	return s.claim(ctx, o, nil)
}

// TakeOverClaims ends the claims of every other replica.
func (s *sharingStore) TakeOverClaims(ctx context.Context) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.takeNothing {
		return 0, nil
	}
	others := make(map[string]bool)
	for o, h := range c.holders {
		if h.replica != s.name {
			others[h.replica] = true
			delete(c.holders, o)
		}
	}
	return len(others), nil
}

func (s *sharingStore) KeepClaims(context.Context, time.Duration, func()) operations.ClaimSession {
	return &sharedSession{s: s}
}

func (k *sharedSession) ClaimRun(ctx context.Context, o operations.Owner) (func(), bool, error) {
	return k.s.claim(ctx, o, k)
}

func (k *sharedSession) EndPass(int) error  { return nil }
func (k *sharedSession) EndIncompletePass() {}

// End gives up the claims the session keeps, unless its replica is dead: then they end
// with the replica's.
func (k *sharedSession) End() {
	c := k.s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	k.ended = true
	if k.s.dead.Load() {
		return
	}
	for o, h := range c.holders {
		if h.session == k && !h.inUse {
			delete(c.holders, o)
		}
	}
}

// claim claims the run of o for the replica, under the session k when it is not nil.
func (s *sharingStore) claim(ctx context.Context, o operations.Owner, k *sharedSession) (func(), bool, error) {
	if err := o.Validate(); err != nil {
		return nil, false, err
	}
	if s.dead.Load() {
		return nil, false, errors.New("the replica is dead")
	}
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	o.UID = ""
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.holders[o]
	switch {
	case h == nil || c.grantAll:
		h = &holder{replica: s.name, session: k, inUse: true}
		c.holders[o] = h
	case k != nil && h.session == k && !h.inUse:
		h.inUse = true // the session takes back a claim it keeps
	default:
		return nil, false, nil
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			switch {
			case c.holders[o] != h, s.dead.Load():
			case k != nil && !k.ended:
				h.inUse = false
			default:
				delete(c.holders, o)
			}
		})
	}, true, nil
}

// replicasOf returns the Replicas of a sharedClaims on a new memstore.
func replicasOf(grantAll, takeNothing bool) storetest.Replicas {
	c := &sharedClaims{store: memstore.New(), grantAll: grantAll, takeNothing: takeNothing, holders: make(map[operations.Owner]*holder)}
	var (
		mu     sync.Mutex
		stores = make(map[string]*sharingStore)
	)
	return storetest.Replicas{
		Open: func(name string) operations.Store {
			s := &sharingStore{Store: c.store, c: c, name: name}
			mu.Lock()
			defer mu.Unlock()
			stores[name] = s
			return s
		},
		Kill: func(name string) {
			mu.Lock()
			defer mu.Unlock()
			stores[name].dead.Store(true)
			time.AfterFunc(200*time.Millisecond, func() { c.drop(name) })
		},
		Expire: c.drop,
		Holdings: func() []storetest.Holding {
			c.mu.Lock()
			defer c.mu.Unlock()
			var out []storetest.Holding
			for _, h := range c.holders {
				out = append(out, storetest.Holding{Replica: h.replica})
			}
			return out
		},
		Members: func() []string { return nil },
	}
}

// RunReplicas passes replicas whose claims exclude one another, and fails those whose
// every claim is granted, in the checks named for what that breaks. (The replicas here
// do not balance the runs among them, so the checks of shares are left out.)
func TestRunReplicas(t *testing.T) {
	only := []string{"DeadReplicaLosesRuns", "StoppedPassLeavesNoClaim", "ClaimAfterSessionLost", "TakeOverClaims"}
	tests := []struct {
		name        string
		grantAll    bool
		takeNothing bool
		wantFail    []string
		wantFailed  string // one of them
		wantSaid    string // what it must say
	}{
		{"claims that exclude one another", false, false, nil, "", ""},
		{"every claim granted", true, false, []string{"ClaimAfterSessionLost", "DeadReplicaLosesRuns", "TakeOverClaims"},
			"DeadReplicaLosesRuns", "no pass skipped a run that the other Monitor held"},
		{"a takeover that ends nothing", false, true, []string{"TakeOverClaims"},
			"TakeOverClaims", "TakeOverClaims by b ended 0 sessions, want 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := newRecorder(t, only...)
			storetest.RunReplicas(rec, func(*recorder) storetest.Replicas { return replicasOf(tc.grantAll, tc.takeNothing) })
			failed := rec.failures()
			slices.Sort(failed)
			if !slices.Equal(failed, tc.wantFail) {
				t.Errorf("the checks that failed: %q, want %q", failed, tc.wantFail)
				for _, name := range failed {
					t.Logf("%s said: %s", name, rec.said(name))
				}
			}
			if tc.wantFailed != "" {
				if said := rec.said(tc.wantFailed); !strings.Contains(said, tc.wantSaid) {
					t.Errorf("%s said %q, want it to say %q", tc.wantFailed, said, tc.wantSaid)
				}
			}
		})
	}
}
