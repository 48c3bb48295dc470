package kubestore_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"path"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/kubestore"
)

// errAnswerLost is what loseAnswers returns for a request whose answer it drops.
var errAnswerLost = errors.New("the answer was lost")

// loseAnswers is an http.RoundTripper that, for the next requests that match once armed,
// sends the request, reads the server's answer and returns errAnswerLost in its place,
// as a connection that breaks after the server applied the request; or, with retry set,
// a 500 with Retry-After, as a proxy that timed out would, on which client-go sends the
// request again. It counts the answers it drops (lost) and the answers of matching
// requests it lets through with a status of 2xx (passed).
type loseAnswers struct {
	next   http.RoundTripper
	match  func(req *http.Request, body []byte) bool
	retry  bool
	armed  atomic.Int64 // how many more answers to drop
	lost   atomic.Int64
	passed atomic.Int64
}

func (f *loseAnswers) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil && req.GetBody != nil {
		rc, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		body, err = io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return nil, err
		}
	}
	if !f.match(req, body) {
		return f.next.RoundTrip(req)
	}
	resp, err := f.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	if f.armed.Load() > 0 && f.armed.Add(-1) >= 0 {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		f.lost.Add(1)
		if f.retry {
			status := `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"the answer was lost","reason":"InternalError","code":500}`
			return &http.Response{StatusCode: http.StatusInternalServerError, Status: "500 Internal Server Error",
				Header: http.Header{"Content-Type": {"application/json"}, "Retry-After": {"1"}},
				Body:   io.NopCloser(strings.NewReader(status)), ContentLength: int64(len(status)),
				Request: req, Proto: resp.Proto, ProtoMajor: resp.ProtoMajor, ProtoMinor: resp.ProtoMinor}, nil
		}
		return nil, errAnswerLost
	}
	if resp.StatusCode/100 == 2 {
		f.passed.Add(1)
	}
	return resp, nil
}

// openLosing opens a store of the replica called name in namespace ns, as openReplica
// does, whose requests go through f.
func openLosing(t *testing.T, cfg *rest.Config, ns, name string, f *loseAnswers) *kubestore.Store {
	t.Helper()
	c := rest.CopyConfig(cfg)
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper { f.next = rt; return f })
	s, err := kubestore.Open(bg, c, ns, &kubestore.Options{Identity: name, ClaimTTL: replicaTTL, RequestTimeout: 2 * time.Second})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// leaseName returns the name of the Lease that req writes, "" for a create.
func leaseName(req *http.Request) string {
	dir, name := path.Split(req.URL.Path)
	if path.Base(dir) != "leases" {
		return ""
	}
	return name
}

// isSessionRenewal reports whether req renews a session's Lease: a PUT of a Lease whose
// name is the API server's ("itemops-" and a suffix with no dash), neither a claim's
// (which holds a dot) nor a member's (a session's name, "-m" and a number).
func isSessionRenewal(req *http.Request, _ []byte) bool {
	name := leaseName(req)
	return req.Method == http.MethodPut && strings.HasPrefix(name, "itemops-") &&
		strings.Count(name, "-") == 1 && !strings.Contains(name, ".")
}

// isClaimReplace reports whether req replaces the Lease of a claim, whose name holds a
// dot.
func isClaimReplace(req *http.Request, _ []byte) bool {
	return req.Method == http.MethodPut && strings.Contains(leaseName(req), ".")
}

// isMemberCreate reports whether req creates the member Lease of a claim session.
func isMemberCreate(req *http.Request, body []byte) bool {
	return req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/leases") && bytes.Contains(body, []byte("member"))
}

// claimHolder returns the session that holds the claim on the run of o, read from its
// Lease.
func claimHolder(t *testing.T, cfg *rest.Config, ns string, o operations.Owner) string {
	t.Helper()
	for _, l := range leases(t, leaseClient(t, cfg, ns)) {
		if l.Labels["itemops.io/role"] == "claim" && strings.HasSuffix(l.Name, "."+o.Name) {
			return l.Labels["itemops.io/holder"]
		}
	}
	t.Fatalf("no claim Lease of %s", o)
	return ""
}

// TestSessionRenewalWithLostAnswer loses the answer to a renewal of a store's session
// Lease that the API server applied: the store's next renewal, made at the version it
// knew, meets a Conflict, and the store reads the Lease back, finds its own renewal, and
// goes on renewing the same session. Its claims stay with it, and its next claim is
// bound to the same session.
func TestSessionRenewalWithLostAnswer(t *testing.T) {
	cfg := config(t)
	ns := newNamespace(t, cfg)
	f := &loseAnswers{match: isSessionRenewal}
	a, b := openLosing(t, cfg, ns, "a", f), openReplica(t, cfg, ns, "b", nil)
	o := operations.Owner{Kind: phase.Backup, Name: "x", UID: "u"}
	release := claim(t, a, o, true, "a")
	defer release()
	session := claimHolder(t, cfg, ns, o)

	f.armed.Store(1)
	for began := time.Now(); f.lost.Load() == 0; time.Sleep(20 * time.Millisecond) {
		if time.Since(began) > time.Minute {
			t.Fatal("no renewal of the session Lease in a minute")
		}
	}
	// Two renewals applied after the one whose answer was lost: the first meets the
	// Conflict and reads the Lease back. A session lost makes no more renewals.
	for before, began := f.passed.Load(), time.Now(); f.passed.Load() < before+2; time.Sleep(50 * time.Millisecond) {
		if time.Since(began) > 3*replicaTTL {
			t.Fatalf("the session Lease was renewed %d times in %s after a renewal whose answer was lost: the store gave its session up",
				f.passed.Load()-before, 3*replicaTTL)
		}
	}
	claim(t, b, o, false, "b, while a holds the run")
	o2 := operations.Owner{Kind: phase.Backup, Name: "y", UID: "u"}
	claim(t, a, o2, true, "a, a second run")()
	if got := claimHolder(t, cfg, ns, o); got != session {
		t.Errorf("the claim of %s is held by session %s, want %s", o, got, session)
	}
}

// TestJoinWithLostAnswer loses the answer to the create of a claim session's member
// Lease that the API server applied: the session's next pass finds the Lease of its own
// name and takes it as its member, so that its passes report no error from then on,
// the census counts one member, and End deletes it.
func TestJoinWithLostAnswer(t *testing.T) {
	cfg := config(t)
	ns := newNamespace(t, cfg)
	f := &loseAnswers{match: isMemberCreate}
	f.armed.Store(1)
	a := openLosing(t, cfg, ns, "a", f)
	members := func() (n int) {
		for _, l := range leases(t, leaseClient(t, cfg, ns)) {
			if l.Labels["itemops.io/role"] == "member" {
				n++
			}
		}
		return n
	}
	sess := a.KeepClaims(bg, time.Second, nil)
	if f.lost.Load() != 1 {
		t.Fatalf("KeepClaims lost %d answers to the create of its member Lease, want 1", f.lost.Load())
	}
	if n := members(); n != 1 {
		t.Fatalf("%d member Leases after a create whose answer was lost, want 1", n)
	}
	err := sess.EndPass(0)
	t.Logf("the first EndPass reports KeepClaims's failure: %v", err)
	if err := sess.EndPass(0); err != nil {
		t.Errorf("EndPass after the member Lease was found: %v", err)
	}
	if n := members(); n != 1 {
		t.Errorf("%d member Leases, want 1", n)
	}
	sess.End()
	if n := members(); n != 0 {
		t.Errorf("%d member Leases after End, want 0", n)
	}
}

// TestTakeOverWithRetriedReplace has store b take the run of a dead replica a, whose
// claim Lease it replaces at its version: the API server applies the replace, but its
// answer is a 500 with Retry-After, on which client-go sends it again and meets a
// Conflict. b reads the Lease back, finds its own claim there and holds the run: the
// claim that reports ok false is never b's own.
func TestTakeOverWithRetriedReplace(t *testing.T) {
	cfg := config(t)
	ns := newNamespace(t, cfg)
	cut := new(atomic.Bool)
	f := &loseAnswers{match: isClaimReplace, retry: true}
	a, b := openReplica(t, cfg, ns, "a", cut), openLosing(t, cfg, ns, "b", f)
	o := operations.Owner{Kind: phase.Backup, Name: "x", UID: "u"}
	claim(t, a, o, true, "a")
	cut.Store(true)
	f.armed.Store(1)
	for began := time.Now(); ; time.Sleep(100 * time.Millisecond) {
		release, ok, err := b.ClaimRun(bg, o)
		if err != nil {
			t.Fatalf("ClaimRun by b: %v", err)
		}
		if ok {
			release()
			break
		}
		if f.lost.Load() > 0 {
			t.Fatalf("ClaimRun by b reported ok false after its replace of the claim Lease was applied: session %s holds the run", claimHolder(t, cfg, ns, o))
		}
		if time.Since(began) > time.Minute {
			t.Fatal("b could not claim the run of a, dead, for a minute")
		}
	}
	if f.lost.Load() != 1 {
		t.Fatalf("%d answers lost, want 1", f.lost.Load())
	}
}
