package faulttest

import (
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"
)

// A Kind is what a [Faults] schedule does to one request.
type Kind int

// The kinds of fault, in the order [Faults.Counts] reports them.
const (
	// None passes the request and its answer untouched.
	None Kind = iota
	// Delay holds the request back for a few milliseconds, then passes it.
	Delay
	// LoseAnswer lets the request reach the server, which applies it, and then loses
	// the answer: the caller gets a transport error, or a 500 or 504, instead.
	LoseAnswer
	// Refuse answers the request without sending it: a 409, 429, 500, 503 or 504 on
	// Kubernetes, Unavailable or ResourceExhausted on etcd.
	Refuse
	// Reset fails the request as a connection reset before it is sent.
	Reset
	numKinds
)

var kindNames = [numKinds]string{"none", "delay", "lose-answer", "refuse", "reset"}

func (k Kind) String() string {
	if k < 0 || k >= numKinds {
		return fmt.Sprintf("Kind(%d)", int(k))
	}
	return kindNames[k]
}

// A Fault is one decision of a [Faults] schedule.
type Fault struct {
	Kind Kind
	// Wait is how long a Delay holds the request.
	Wait time.Duration
	// Status is the HTTP status of a Refuse, or of a LoseAnswer; 0 in a LoseAnswer
	// means a transport error instead of a status.
	Status int
}

// Faults is a seeded random schedule of faults that the channels between the stores and
// their server share: each asks it, with [Faults.Next], what to do to each request. It
// is off until [Faults.Start] and after [Faults.Stop], when Next answers None and counts
// nothing. Its methods are safe for concurrent use.
//
// The sequence of decisions follows from the seed; which request gets which decision
// depends on the order in which concurrent requests ask, which the seed does not fix.
type Faults struct {
	mu       sync.Mutex
	rng      *rand.Rand
	on       bool
	requests int
	counts   [numKinds]int
	// percent is the chance, in percent, of each kind other than None.
	percent [numKinds]int
}

// NewFaults returns a schedule, off, seeded with seed, that faults about 15% of the
// requests it is asked about: 4% delayed, 4% answers lost, 4% refused, 3% reset.
func NewFaults(seed int64) *Faults {
	return &Faults{
		rng:     rand.New(rand.NewSource(seed)),
		percent: [numKinds]int{Delay: 4, LoseAnswer: 4, Refuse: 4, Reset: 3},
	}
}

// Start turns the schedule on.
func (f *Faults) Start() { f.set(true) }

// Stop turns the schedule off: from then on every request passes untouched.
func (f *Faults) Stop() { f.set(false) }

func (f *Faults) set(on bool) {
	f.mu.Lock()
	f.on = on
	f.mu.Unlock()
}

// Next returns what to do to the next request, and counts it.
func (f *Faults) Next() Fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.on {
		return Fault{}
	}
	f.requests++
	n := f.rng.Intn(100)
	var k Kind
	for k = Delay; k < numKinds; k++ {
		if n < f.percent[k] {
			break
		}
		n -= f.percent[k]
	}
	if k == numKinds {
		k = None
	}
	f.counts[k]++
	switch k {
	case Delay:
		return Fault{Kind: k, Wait: time.Duration(1+f.rng.Intn(20)) * time.Millisecond}
	case LoseAnswer:
		return Fault{Kind: k, Status: []int{0, 0, http.StatusInternalServerError, http.StatusGatewayTimeout}[f.rng.Intn(4)]}
	case Refuse:
		return Fault{Kind: k, Status: []int{http.StatusConflict, http.StatusTooManyRequests, http.StatusInternalServerError,
			http.StatusServiceUnavailable, http.StatusGatewayTimeout}[f.rng.Intn(5)]}
	}
	return Fault{Kind: k}
}

// Counts returns how many requests the schedule was asked about while on, and how many
// of them got each kind of fault, indexed by Kind (None included).
func (f *Faults) Counts() (requests int, byKind [numKinds]int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests, f.counts
}

// Faulted returns how many requests got a fault other than None.
func (f *Faults) Faulted() int {
	_, c := f.Counts()
	n := 0
	for k := Delay; k < numKinds; k++ {
		n += c[k]
	}
	return n
}

// RoundTripper returns an http.RoundTripper, for rest.Config.WrapTransport, that
// passes each request to rt as f decides:
//
//   - Delay waits, then sends the request (or returns the request context's error).
//   - LoseAnswer sends the request, reads and closes the answer, and returns a
//     transport error or a Status of 500 or 504 instead.
//   - Refuse returns a Status without sending the request. A 409 (Conflict, which a
//     server sends only for a write whose precondition failed) is given to PUT
//     requests only; other methods get a 503 instead.
//   - Reset returns a connection reset without sending the request.
//
// Watches are passed untouched: a lost answer of a watch would be a stream cut, which
// the callers' watches already survive, and the history records no watch.
func (f *Faults) RoundTripper(rt http.RoundTripper) http.RoundTripper {
	return faultyTransport{rt: rt, next: f.Next}
}

type faultyTransport struct {
	rt   http.RoundTripper
	next func() Fault
}

func (t faultyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Query().Get("watch") == "true" {
		return t.rt.RoundTrip(req)
	}
	fault := t.next()
	switch fault.Kind {
	case Delay:
		select {
		case <-time.After(fault.Wait):
		case <-req.Context().Done():
			closeBody(req)
			return nil, req.Context().Err()
		}
	case LoseAnswer:
		resp, err := t.rt.RoundTrip(req)
		if err != nil {
			return nil, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if fault.Status == 0 {
			return nil, fmt.Errorf("fault injected: answer lost after the server took the request: %w", syscall.ECONNRESET)
		}
		return statusResponse(req, fault.Status), nil
	case Refuse:
		closeBody(req)
		status := fault.Status
		if status == http.StatusConflict && req.Method != http.MethodPut {
			status = http.StatusServiceUnavailable
		}
		return statusResponse(req, status), nil
	case Reset:
		closeBody(req)
		return nil, fmt.Errorf("fault injected: connection reset before the request was sent: %w", syscall.ECONNRESET)
	}
	return t.rt.RoundTrip(req)
}

// closeBody closes the body of a request that is not sent, as a RoundTripper must.
func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// statusReasons are the reasons of the Kubernetes Status objects the transport sends.
var statusReasons = map[int]string{
	http.StatusConflict:            "Conflict",
	http.StatusTooManyRequests:     "TooManyRequests",
	http.StatusInternalServerError: "InternalError",
	http.StatusServiceUnavailable:  "ServiceUnavailable",
	http.StatusGatewayTimeout:      "Timeout",
}

// statusResponse returns a response of code whose body is a Kubernetes Status, as the
// API server (or a proxy before it) sends.
func statusResponse(req *http.Request, code int) *http.Response {
	body := fmt.Sprintf(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",`+
		`"message":"fault injected: %d","reason":%q,"code":%d}`, code, statusReasons[code], code)
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", code, http.StatusText(code)),
		StatusCode:    code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{"Content-Type": []string{"application/json"}},
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}
