package claims

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// The shares of the claim sessions add up to the runs and differ by at most one, however
// many runs and sessions there are.
func TestSharesAddUp(t *testing.T) {
	for runs := int64(0); runs <= 50; runs++ {
		for n := int64(1); n <= 7; n++ {
			var total, least, most int
			least = int(runs) + 1
			for rank := range n {
				s := shareOf(runs, n, rank)
				total += s
				least, most = min(least, s), max(most, s)
			}
			if total != int(runs) || most-least > 1 {
				t.Errorf("%d runs over %d sessions: shares add up to %d (want %d), from %d to %d", runs, n, total, runs, least, most)
			}
		}
	}
}

// TestEndPassReports holds a claim session to report, at the end of each pass, what kept
// it from joining, counting or watching the other sessions: the first error of each,
// joined, and nothing once the backend answers again, or ends a watch as backends do.
func TestEndPassReports(t *testing.T) {
	forbidden := errors.New("forbidden")
	b := &failingBackend{err: forbidden, watchErr: forbidden}
	session := New(b).KeepClaims(context.Background(), time.Minute, nil)
	defer session.End()

	err := session.EndPass(0)
	if !errors.Is(err, forbidden) {
		t.Fatalf("EndPass with a backend that refuses everything = %v, want it to wrap %v", err, forbidden)
	}
	// KeepClaims and EndPass both joined and counted, and failed: each is reported once.
	for _, what := range []string{"join the claim sessions", "count the claims and members"} {
		if n := strings.Count(err.Error(), what); n != 1 {
			t.Errorf("EndPass = %q, want it to say once that the session could not %s, not %d times", err, what, n)
		}
	}

	b.set(nil, forbidden) // the session may count now, and starts a watch, which fails
	require.Eventually(t, func() bool { err = session.EndPass(0); return err != nil }, time.Minute, time.Millisecond,
		"no EndPass reported the refused watch")
	if !errors.Is(err, forbidden) || !strings.Contains(err.Error(), "watch the members") || strings.Contains(err.Error(), "count") {
		t.Fatalf("EndPass after a refused watch = %v, want only the watch's error", err)
	}

	// The backend ends each watch now as a server closing it does. The watches run one
	// at a time, so once one has ended so, the refused ones have been reported: the
	// next EndPass may still return them, and the ones after it nothing.
	b.set(nil, nil)
	require.Eventually(t, func() bool { session.EndPass(0); return b.endedWatches() > 0 }, time.Minute, time.Millisecond,
		"no watch ended")
	session.EndPass(0)
	for i := range 3 {
		if err := session.EndPass(0); err != nil {
			t.Fatalf("EndPass %d with a backend that answers = %v, want nil", i, err)
		}
	}
}

// TestFailedReadOncePerPass holds a claim session whose backend refuses to list the
// claims to one read a pass: the pass's claims are then each asked of the backend, and
// made, and the next pass reads again.
func TestFailedReadOncePerPass(t *testing.T) {
	forbidden := errors.New("forbidden")
	b := &failingBackend{listErr: forbidden}
	session := New(b).KeepClaims(context.Background(), time.Minute, nil)
	defer session.End()
	for pass, names := range [][]string{{"a", "b", "c"}, {"d", "e"}} {
		for _, name := range names {
			o := operations.Owner{Kind: phase.Backup, Name: name, UID: "uid-" + name}
			release, ok, err := session.ClaimRun(context.Background(), o)
			if err != nil || !ok {
				t.Fatalf("pass %d: ClaimRun(%s) = ok %v, error %v; want the claim made", pass, o, ok, err)
			}
			release()
		}
		if got := b.listed(); got != pass+1 {
			t.Errorf("after pass %d: the claims were read %d times, want %d", pass, got, pass+1)
		}
		if err := session.EndPass(len(names)); !errors.Is(err, forbidden) || !strings.Contains(err.Error(), "read the claims") {
			t.Errorf("EndPass of pass %d = %v, want the refused read", pass, err)
		}
	}
}

// failingBackend is a Backend of one session whose claims are all made, whose
// ListClaims fails with listErr, whose Join and Census fail with err, and whose
// WatchMembers returns watchErr at once (counting the watches it ends with nil). Its
// other methods are not called by the tests that use it.
type failingBackend struct {
	Backend
	mu            sync.Mutex
	err, watchErr error
	ended         int // the watches that returned nil
	listErr       error
	lists         int // the calls of ListClaims
}

func (b *failingBackend) Key(o operations.Owner) string { return o.String() }

func (b *failingBackend) Claim(_ context.Context, key string, _ Session, _ string) (string, *Claim, error) {
	return "v-" + key, nil, nil
}

func (b *failingBackend) ListClaims(context.Context) ([]Claim, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lists++
	return nil, b.listErr
}

func (b *failingBackend) listed() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lists
}

func (b *failingBackend) set(err, watchErr error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.err, b.watchErr = err, watchErr
}

func (b *failingBackend) failure() (err, watchErr error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err, b.watchErr
}

func (b *failingBackend) Ready(ctx context.Context) error          { return ctx.Err() }
func (b *failingBackend) Timeout() time.Duration                   { return time.Second }
func (b *failingBackend) Session(context.Context) (Session, error) { return oneSession{}, nil }
func (b *failingBackend) Apply(context.Context, []Change) []string { return nil }

func (b *failingBackend) Join(context.Context, Session, int64) (string, string, error) {
	if err, _ := b.failure(); err != nil {
		return "", "", err
	}
	return "member", "1", nil
}

func (b *failingBackend) Census(context.Context) (Census, error) {
	if err, _ := b.failure(); err != nil {
		return Census{}, err
	}
	return Census{Members: []string{"member"}, From: "1"}, nil
}

func (b *failingBackend) WatchMembers(context.Context, string, func()) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.watchErr == nil {
		b.ended++
	}
	return b.watchErr
}

func (b *failingBackend) endedWatches() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ended
}

type oneSession struct{}

func (oneSession) ID() string { return "session" }
func (oneSession) Lost() bool { return false }

// TestMayTakeWithTheLongestInterval: a session that holds its share does not take a run
// that another session handed over less than two intervals ago, with an interval of the
// longest Duration too, whose double wraps around to a negative Duration; it takes one
// handed over longer ago.
func TestMayTakeWithTheLongestInterval(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	free := now.Add(-time.Hour)
	for _, tc := range []struct {
		interval time.Duration
		want     bool
	}{
		{interval: math.MaxInt64, want: false},
		{interval: 40 * time.Minute, want: false},
		{interval: 20 * time.Minute, want: true}, // free for three intervals
	} {
		k := &keeper{interval: tc.interval, share: 1, claims: map[string]*kept{"held": {}}}
		k.took = sync.NewCond(&k.mu)
		if got := k.mayTake("other", free, oneSession{}, now); got != tc.want {
			t.Errorf("interval %v: a full session may take a run free for an hour: %t, want %t", tc.interval, got, tc.want)
		}
	}
}

// watchingBackend is a failingBackend whose watches of the members last until they are
// stopped, and which counts its Apply calls and the watches under way.
type watchingBackend struct {
	failingBackend
	watches atomic.Int64  // under way
	started chan struct{} // a send for each watch that starts
	applied atomic.Int64  // Apply calls
	closed  atomic.Bool
}

func (b *watchingBackend) WatchMembers(ctx context.Context, _ string, _ func()) error {
	b.watches.Add(1)
	defer b.watches.Add(-1)
	b.started <- struct{}{}
	<-ctx.Done()
	return nil
}

func (b *watchingBackend) Apply(context.Context, []Change) []string {
	b.applied.Add(1)
	return nil
}

func (b *watchingBackend) Ready(ctx context.Context) error {
	if b.closed.Load() {
		return errors.New("closed")
	}
	return ctx.Err()
}

// TestCloseEndsSessions closes a Claimer (as its store closes) under two claim sessions
// that their Monitors never ended, one holding a claim: Close stops their watches of the
// members before it returns and makes no request, the store giving up what they keep.
// Ending a session afterwards does nothing, and a session started after Close keeps
// nothing and watches nothing.
func TestCloseEndsSessions(t *testing.T) {
	b := &watchingBackend{started: make(chan struct{}, 8)}
	c := New(b)
	ctx := context.Background()
	s1 := c.KeepClaims(ctx, time.Second, nil)
	s2 := c.KeepClaims(ctx, time.Second, nil)
	release, ok, err := s1.ClaimRun(ctx, operations.Owner{Kind: phase.Backup, Name: "a", UID: "1"})
	if err != nil || !ok {
		t.Fatalf("ClaimRun = %v, %v; want a claim", ok, err)
	}
	release()
	<-b.started
	<-b.started
	if n := b.watches.Load(); n != 2 {
		t.Fatalf("watches under way before Close: %d, want 2", n)
	}
	b.closed.Store(true)
	c.Close()
	if n := b.watches.Load(); n != 0 {
		t.Errorf("watches under way after Close: %d, want 0", n)
	}
	s1.End()
	s2.End()
	s3 := c.KeepClaims(ctx, time.Second, nil)
	s3.End()
	if n := b.applied.Load(); n != 0 {
		t.Errorf("Apply calls: %d, want 0", n)
	}
	if n := b.watches.Load(); n != 0 {
		t.Errorf("watches under way at the end: %d, want 0", n)
	}
}
