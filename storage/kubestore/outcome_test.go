package kubestore_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/client-go/rest"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/operations/operationstest"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/kubestore"
)

// How lostAnswer treats a request it matches.
const (
	answerReset    = iota // sent; the answer is read and dropped, the client sees a transport error
	answerCut             // sent; the answer's body fails halfway
	answerTimeout         // sent; the client sees 504 Gateway Timeout instead of the answer
	answerConflict        // sent; the client sees 409 Conflict, as client-go's second sending of an applied write would
	neverSent             // not sent; the client sees a transport error
	refused               // not sent; the client sees 403 Forbidden, a definite refusal
)

var errLost = errors.New("connection reset by peer (injected)")

// lostAnswer is an http.RoundTripper that, while armed, loses the outcome of the writes
// of runs' objects (PUT of itemopsruns: the commit points of the commits that spill)
// as mode says.
type lostAnswer struct {
	next  http.RoundTripper
	mode  int
	armed atomic.Bool
}

func (l *lostAnswer) RoundTrip(req *http.Request) (*http.Response, error) {
	if !l.armed.Load() || !isWrite(req, http.MethodPut, "itemopsruns") {
		return l.next.RoundTrip(req)
	}
	switch l.mode {
	case neverSent:
		return nil, errLost
	case refused:
		return statusResponse(req, http.StatusForbidden, "Forbidden"), nil
	}
	resp, err := l.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if l.mode == answerCut {
		resp.Body = &cutBody{r: resp.Body}
		return resp, nil
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	switch l.mode {
	case answerTimeout:
		return statusResponse(req, http.StatusGatewayTimeout, "Timeout"), nil
	case answerConflict:
		return statusResponse(req, http.StatusConflict, "Conflict"), nil
	}
	return nil, errLost
}

// statusResponse returns an answer to req of code with a metav1.Status of reason.
func statusResponse(req *http.Request, code int, reason string) *http.Response {
	body := `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"injected","reason":"` + reason + `","code":` + strconv.Itoa(code) + `}`
	return &http.Response{
		StatusCode: code, Status: http.StatusText(code), Request: req,
		Header: http.Header{"Content-Type": []string{"application/json"}},
		Body:   io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)),
	}
}

// cutBody reads a few bytes of a body, then fails.
type cutBody struct {
	r    io.ReadCloser
	read int
}

func (c *cutBody) Read(p []byte) (int, error) {
	if c.read >= 16 {
		return 0, errLost
	}
	n, err := c.r.Read(p[:min(len(p), 16-c.read)])
	c.read += n
	return n, err
}

func (c *cutBody) Close() error { return c.r.Close() }

// lostAnswerModes are the outcomes of the write of a run's object that
// TestLostAnswerKeepsRun and TestPassLostAnswer give a lostAnswer client, and whether
// the API server applied the write.
var lostAnswerModes = []struct {
	name    string
	mode    int
	applied bool
}{
	{"Reset", answerReset, true},
	{"BodyCut", answerCut, true},
	{"GatewayTimeout", answerTimeout, true},
	{"ConflictAfterApplied", answerConflict, true},
	{"NeverSent", neverSent, false},
	{"Refused", refused, false},
}

// spilledBehindLostAnswer opens a store (InlineBytes 1 KiB, ChunkBytes 16 KiB) in a
// namespace of its own through a lostAnswer client of the given mode, not armed yet, and
// stores through it a waiting run of 300 operations, which spills. It returns the
// namespace with an administrator's configuration, the client, the store, the run's
// owner and its operations.
func spilledBehindLostAnswer(t *testing.T, mode int) (*rest.Config, string, *lostAnswer, *kubestore.Store, operations.Owner, []operations.Operation) {
	t.Helper()
	opts := &kubestore.Options{InlineBytes: 1 << 10, ChunkBytes: 16 << 10}
	_, cfg, ns := newStoreIn(t, opts)
	l := &lostAnswer{mode: mode}
	w := openIn(t, ns, opts, func(rt http.RoundTripper) http.RoundTripper { l.next = rt; return l })
	o := operations.Owner{Kind: phase.Backup, Name: "spilled", UID: "uid-spilled"}
	ops := testOps(o, 300, operations.OperationInProgress)
	if err := w.CreateRunWithOperations(context.Background(), waitingRun(t, o), ops); err != nil {
		t.Fatalf("CreateRunWithOperations: %v", err)
	}
	return cfg, ns, l, w, o, ops
}

// TestLostAnswerKeepsRun changes a spilled run (InlineBytes 1 KiB, ChunkBytes 16 KiB,
// 300 operations) through a client that loses the outcome of the write of the run's
// object, its commit point: the API server applies the write and the answer is lost
// (a reset connection, a body cut short, a 504, or a 409 Conflict, which the store
// takes as a lost race and after which it writes again), the write never reaches the server,
// or the server refuses it. A fresh Store then reads every operation as the outcome
// left it (the change, where the write was applied), and a sweep deletes nothing the
// run's object names; where the write was not applied, the same change made again (on
// the same sequence number) is read back after a sweep, and the sweep leaves only the
// chunks the run's object names. A Monitor's pass over the store goes on.
func TestLostAnswerKeepsRun(t *testing.T) {
	for _, tc := range lostAnswerModes {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			cfg, ns, l, w, o, ops := spilledBehindLostAnswer(t, tc.mode)
			chunks := count(t, cfg, chunksGVR, ns)
			changed := testOps(o, 300, operations.OperationInProgress)
			for i := range changed {
				changed[i].Status.NCompleted += 5000
			}
			l.armed.Store(true)
			err := w.PutOperations(ctx, o, changed)
			l.armed.Store(false)
			if err == nil && tc.mode != answerConflict {
				t.Fatalf("PutOperations whose answer was lost succeeded")
			}
			t.Logf("PutOperations whose answer was lost: %v", err)

			want := ops
			if tc.applied {
				want = changed
			}
			check := func(when string) {
				t.Helper()
				r := openIn(t, ns, nil, nil)
				if diff := cmp.Diff(want, listOps(t, r, o), cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("%s: ListOperations through a fresh Store (-want +got):\n%s", when, diff)
				}
				if _, err := r.GetRun(ctx, o); err != nil {
					t.Errorf("%s: GetRun through a fresh Store: %v", when, err)
				}
			}
			check("after the lost answer")
			if tc.mode == refused {
				if n := count(t, cfg, chunksGVR, ns); n != chunks {
					t.Errorf("the refused write left %d ItemopsChunks, want the %d from before it", n, chunks)
				}
			}
			if _, err := openIn(t, ns, nil, nil).Sweep(ctx); err != nil {
				t.Fatalf("Sweep: %v", err)
			}
			check("after a sweep")
			// A Monitor's pass (which fails the operations, whose plugin it does not know)
			// reads and writes the run: a damaged store would stop its Run.
			defer func() {
				m := monitor.New(openIn(t, ns, nil, nil), operationstest.Resolver(nil))
				if _, err := m.RunOnce(ctx); errors.Is(err, operations.ErrCorrupt) {
					t.Errorf("a Monitor's pass after the lost answer: %v; want it to go on", err)
				}
			}()
			if tc.applied {
				return
			}
			if err := w.PutOperations(ctx, o, changed); err != nil {
				t.Fatalf("PutOperations again: %v", err)
			}
			want = changed
			if _, err := openIn(t, ns, nil, nil).Sweep(ctx); err != nil {
				t.Fatalf("Sweep: %v", err)
			}
			check("after the change made again and a sweep")
			if got, named := count(t, cfg, chunksGVR, ns), len(namedChunks(t, cfg, ns, "b.spilled")); got != 1+named {
				t.Errorf("after the sweep the namespace holds %d ItemopsChunks, want %d: the marker and the %d chunks the run's object names", got, 1+named, named)
			}
		})
	}
}

// TestLostAnswerOfCreation creates a spilled run through a client that loses the
// outcome of the write of the pending object that makes it the run's, its commit
// point: applied with its answer lost, or never sent. A fresh Store reads the run as
// the outcome left it, and, when the write was not applied, once it is created again;
// a sweep that takes no pending object for young deletes nothing the run names.
func TestLostAnswerOfCreation(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mode    int
		applied bool
	}{
		{"Reset", answerReset, true},
		{"NeverSent", neverSent, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			opts := &kubestore.Options{InlineBytes: 1 << 10, ChunkBytes: 16 << 10}
			_, _, ns := newStoreIn(t, opts)
			l := &lostAnswer{mode: tc.mode}
			w := openIn(t, ns, opts, func(rt http.RoundTripper) http.RoundTripper { l.next = rt; return l })
			o := operations.Owner{Kind: phase.Backup, Name: "spilled", UID: "uid-spilled"}
			ops := testOps(o, 300, operations.OperationInProgress)
			l.armed.Store(true)
			err := w.CreateRunWithOperations(ctx, waitingRun(t, o), ops)
			l.armed.Store(false)
			if err == nil {
				t.Fatalf("CreateRunWithOperations whose answer was lost succeeded")
			}
			r := openIn(t, ns, nil, nil)
			if !tc.applied {
				if _, err := r.GetRun(ctx, o); !errors.Is(err, operations.ErrNotFound) {
					t.Errorf("GetRun of the run whose creation was not applied: %v, want ErrNotFound", err)
				}
				if err := w.CreateRunWithOperations(ctx, waitingRun(t, o), ops); err != nil {
					t.Fatalf("CreateRunWithOperations again: %v", err)
				}
			}
			defer kubestore.SetPendingGrace(0)()
			for _, when := range []string{"after the lost answer", "after a sweep"} {
				if diff := cmp.Diff(ops, listOps(t, openIn(t, ns, nil, nil), o), cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("%s: ListOperations through a fresh Store (-want +got):\n%s", when, diff)
				}
				if _, err := r.Sweep(ctx); err != nil {
					t.Fatalf("Sweep: %v", err)
				}
			}
		})
	}
}
