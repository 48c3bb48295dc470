package claims

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// TestTakeAppliedThoughRefused takes a run handed over by another session, free for an
// hour, outside and in a claim session: the backend applies the claim, but answers that
// the claim was not at the version any more, with the claim it holds now, this
// session's own (as a backend does for a write sent again after its first answer was
// lost). The claim is made, at the version the backend holds, and giving it up releases
// that claim.
func TestTakeAppliedThoughRefused(t *testing.T) {
	b := &retriedTakeBackend{}
	c := New(b)
	session := c.KeepClaims(context.Background(), time.Minute, nil)
	for _, tc := range []struct {
		name  string
		claim func(context.Context, operations.Owner) (func(), bool, error)
		end   func() // gives up the claim released
	}{
		{"outside a claim session", c.ClaimRun, func() {}},
		{"in a claim session", session.ClaimRun, session.End},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := operations.Owner{Kind: phase.Backup, Name: "x", UID: "u"}
			release, ok, err := tc.claim(context.Background(), o)
			if err != nil || !ok {
				t.Fatalf("ClaimRun of a run taken by a write whose answer said otherwise = ok %v, error %v; want the claim made", ok, err)
			}
			release()
			tc.end()
			var got []Change
			for _, ch := range b.released() {
				if ch.Key == b.Key(o) {
					got = append(got, ch)
				}
			}
			if len(got) != 1 || got[0].Version != "taken" || got[0].HandOver {
				t.Errorf("changes of the claim %+v, want one: its release at the version taken", got)
			}
			b.reset()
		})
	}
}

// retriedTakeBackend is a Backend of one session whose every claim is handed over by
// another session, free since an hour, and whose claim of a run at its version answers
// with the claim found, this session's own. It records the changes that Apply makes.
type retriedTakeBackend struct {
	failingBackend
	mu      sync.Mutex
	changes []Change
}

func (b *retriedTakeBackend) Claim(_ context.Context, key string, ss Session, ifVersion string) (string, *Claim, error) {
	if ifVersion == "" {
		return "", &Claim{Key: key, Holder: "other", Version: "handed", HandedOver: true, Free: time.Now().Add(-time.Hour)}, nil
	}
	return "", &Claim{Key: key, Holder: ss.ID(), Version: "taken"}, nil
}

func (b *retriedTakeBackend) Apply(_ context.Context, changes []Change) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.changes = append(b.changes, changes...)
	return make([]string, len(changes))
}

func (b *retriedTakeBackend) released() []Change {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.changes
}

func (b *retriedTakeBackend) reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.changes = nil
}
