package storetest_test

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/itemops/itemops/storage/storetest"
)

// recorder is a storetest.TB that runs a suite in this process and records which of its
// subtests failed and what they said, instead of failing the test that runs it, so that
// a test can check that a broken store fails where it should. Only the subtests named in
// only (as "Runs" or "Runs/AtomicStart"), and those below them, run; all do when only is
// empty. A recorder is used by one suite at a time.
type recorder struct {
	testing.TB // the real test, for Helper, TempDir and the like
	name       string
	only       []string
	results    *results

	mu       sync.Mutex // guards failed, skipped and cleanups
	failed   bool
	skipped  bool
	cleanups []func()
}

// results is what every recorder of one suite adds to.
type results struct {
	mu     sync.Mutex
	failed []string            // names of the subtests that failed, without the root
	logs   map[string][]string // what each subtest said
}

var _ storetest.TB[*recorder] = (*recorder)(nil)

// newRecorder returns a recorder that runs the subtests in only below t.
func newRecorder(t *testing.T, only ...string) *recorder {
	return &recorder{TB: t, only: only, results: &results{logs: map[string][]string{}}}
}

func (r *recorder) Name() string { return r.name }

// Run runs f as a subtest in a goroutine of its own, so that FailNow ends only it, and
// runs the subtest's cleanups when it ends.
func (r *recorder) Run(name string, f func(t *recorder)) bool {
	name = strings.ReplaceAll(name, " ", "_")
	full := strings.TrimPrefix(r.name+"/"+name, "/")
	if !r.selected(full) {
		return true
	}
	sub := &recorder{TB: r.TB, name: full, only: r.only, results: r.results}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer sub.cleanup()
		f(sub)
	}()
	<-done
	if sub.Failed() {
		r.Fail()
		r.results.mu.Lock()
		r.results.failed = append(r.results.failed, full)
		r.results.mu.Unlock()
	}
	return !sub.Failed()
}

// selected reports whether the subtest name is one of only, or above or below one.
func (r *recorder) selected(name string) bool {
	if len(r.only) == 0 {
		return true
	}
	for _, o := range r.only {
		if name == o || strings.HasPrefix(o, name+"/") || strings.HasPrefix(name, o+"/") {
			return true
		}
	}
	return false
}

func (r *recorder) cleanup() {
	r.mu.Lock()
	fs := r.cleanups
	r.cleanups = nil
	r.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}

func (r *recorder) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}

func (r *recorder) Log(args ...any) { r.say(fmt.Sprint(args...)) }

func (r *recorder) Logf(format string, args ...any) { r.say(fmt.Sprintf(format, args...)) }

func (r *recorder) say(s string) {
	r.results.mu.Lock()
	defer r.results.mu.Unlock()
	r.results.logs[r.name] = append(r.results.logs[r.name], s)
}

func (r *recorder) Fail() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = true
}

func (r *recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

func (r *recorder) FailNow() {
	r.Fail()
	runtime.Goexit()
}

func (r *recorder) Error(args ...any) { r.Log(args...); r.Fail() }

func (r *recorder) Errorf(format string, args ...any) { r.Logf(format, args...); r.Fail() }

func (r *recorder) Fatal(args ...any) { r.Log(args...); r.FailNow() }

func (r *recorder) Fatalf(format string, args ...any) { r.Logf(format, args...); r.FailNow() }

func (r *recorder) SkipNow() {
	r.mu.Lock()
	r.skipped = true
	r.mu.Unlock()
	runtime.Goexit()
}

func (r *recorder) Skip(args ...any) { r.Log(args...); r.SkipNow() }

func (r *recorder) Skipf(format string, args ...any) { r.Logf(format, args...); r.SkipNow() }

func (r *recorder) Skipped() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.skipped
}

// failures returns the names of the failed subtests, sorted.
func (r *recorder) failures() []string {
	r.results.mu.Lock()
	defer r.results.mu.Unlock()
	out := slices.Clone(r.results.failed)
	slices.Sort(out)
	return out
}

// said returns what the subtest name (below the root) said, one line per call.
func (r *recorder) said(name string) string {
	r.results.mu.Lock()
	defer r.results.mu.Unlock()
	return strings.Join(r.results.logs[name], "\n")
}
