// Package kvtest checks a [kv.Backend] against the rules written on that interface. It
// is public so that the author of any driver (storage/memstore, storage/boltstore,
// storage/etcdstore, or one of their own) runs the same checks. It also gives, in
// [NewPartitionedBackend], a [kv.PartitionedBackend] that refuses every commit spanning
// two runs, for the engine's own tests.
//
//	func TestBackend(t *testing.T) {
//		kvtest.Run(t, func(t *testing.T) kv.Backend {
//			b := mydriver.Open(t.TempDir())
//			t.Cleanup(func() { b.Close() })
//			return b
//		})
//	}
//
// Run it under the race detector (go test -race): some checks commit from many
// goroutines at once. Every check is a named subtest, run on a fresh backend. The checks
// use only the Backend's methods; the few that need a commit larger than the driver's
// [kv.Limits] skip that part when the driver has no limit, and say so in the log. The
// checks need a driver that takes commits of 4 operations (kv.Limits.MaxOps of 4 or more)
// and 512 bytes.
package kvtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/itemops/itemops/storage/kv"
)

// Run checks backends against the rules of [kv.Backend]. newBackend is called once per
// subtest, must return an empty backend, and registers its own cleanup (t.Cleanup). Run
// returns when every subtest has, and leaves no goroutine behind.
func Run(t *testing.T, newBackend func(t *testing.T) kv.Backend) {
	t.Helper()
	for _, c := range []struct {
		name string
		run  func(t *testing.T, b kv.Backend)
	}{
		{"Versions", testVersions},
		{"GetAbsent", testGetAbsent},
		{"ScanOrderAndBounds", testScan},
		{"ScanStops", testScanStops},
		{"Snapshot", testSnapshot},
		{"AllOrNothing", testAllOrNothing},
		{"ConditionAbsent", testConditionAbsent},
		{"ConditionPresent", testConditionPresent},
		{"Delete", testDelete},
		{"DeleteRange", testDeleteRange},
		{"TooLarge", testTooLarge},
		{"SlicesNotKept", testSlicesNotKept},
		{"ConcurrentCommits", testConcurrentCommits},
		{"ContextDone", testContextDone},
		{"CommitGroup", testCommitGroup},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := newBackend(t)
			if b == nil {
				t.Fatal("newBackend returned nil")
			}
			c.run(t, b)
		})
	}
}

var bg = context.Background()

// A kvPair is what a read found for one key.
type kvPair struct {
	Key, Value string
	Version    kv.Version
}

func put(t *testing.T, b kv.Backend, kvs ...string) {
	t.Helper()
	for i := 0; i < len(kvs); i += 2 { // one commit each, to fit every driver's limits
		if err := b.Commit(bg, nil, []kv.Write{{Key: []byte(kvs[i]), Value: []byte(kvs[i+1])}}); err != nil {
			t.Fatalf("Commit(%q) = %v", kvs[i], err)
		}
	}
}

func get(t *testing.T, b kv.Backend, key string) kvPair {
	t.Helper()
	var p kvPair
	err := b.Read(bg, func(r kv.Reader) error {
		v, ver, err := r.Get(bg, []byte(key))
		p = kvPair{key, string(v), ver}
		if v == nil && ver != 0 {
			return fmt.Errorf("Get(%q) = nil value at version %d", key, ver)
		}
		return err
	})
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	return p
}

func scan(t *testing.T, b kv.Backend, start, end string) []kvPair {
	t.Helper()
	var out []kvPair
	err := b.Read(bg, func(r kv.Reader) error {
		return r.Scan(bg, []byte(start), []byte(end), func(k, v []byte, ver kv.Version) error {
			out = append(out, kvPair{string(k), string(v), ver})
			return nil
		})
	})
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	return out
}

// values returns the keys and values of ps, without versions.
func values(ps []kvPair) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Key+"="+p.Value)
	}
	return out
}

func testVersions(t *testing.T, b kv.Backend) {
	put(t, b, "a", "1")
	v1 := get(t, b, "a")
	if v1.Version == 0 || v1.Value != "1" {
		t.Fatalf("after a write, Get = %+v, want value 1 at a version other than 0", v1)
	}
	put(t, b, "a", "1") // the same value: still a new write
	v2 := get(t, b, "a")
	if v2.Version == 0 || v2.Version == v1.Version {
		t.Fatalf("after a rewrite, version = %d, want neither 0 nor %d", v2.Version, v1.Version)
	}
	put(t, b, "b", "x") // another key's write leaves a's version alone
	if got := get(t, b, "a"); got.Version != v2.Version {
		t.Fatalf("a write of b changed a's version from %d to %d", v2.Version, got.Version)
	}
	if got := scan(t, b, "a", "b"); len(got) != 1 || got[0].Version != v2.Version {
		t.Fatalf("Scan reports %+v, want a at version %d as Get does", got, v2.Version)
	}
	// A key deleted and written again never gets back a version it had: a condition
	// taken before the delete must fail after the new write.
	if err := b.Commit(bg, nil, []kv.Write{{Key: []byte("a"), Delete: true}}); err != nil {
		t.Fatal(err)
	}
	put(t, b, "a", "1")
	if v3 := get(t, b, "a"); v3.Version == v1.Version || v3.Version == v2.Version || v3.Version == 0 {
		t.Fatalf("a deleted and written again is at version %d, which it had before (%d, %d)", v3.Version, v1.Version, v2.Version)
	}
	err := b.Commit(bg, []kv.Condition{{Key: []byte("a"), Version: v2.Version}}, []kv.Write{{Key: []byte("a"), Value: []byte("stale")}})
	if !errors.Is(err, kv.ErrConditionFailed) {
		t.Fatalf("Commit conditioned on a version from before a delete = %v, want kv.ErrConditionFailed", err)
	}
}

func testGetAbsent(t *testing.T, b kv.Backend) {
	if got := get(t, b, "missing"); got.Value != "" || got.Version != 0 {
		t.Fatalf("Get of an absent key = %+v, want no value at version 0", got)
	}
	put(t, b, "k", "")
	if got := get(t, b, "k"); got.Version == 0 {
		t.Fatalf("a key set to an empty value reads as absent (version 0)")
	}
}

func testScan(t *testing.T, b kv.Backend) {
	put(t, b, "b", "2", "a", "1", "c\x00", "4", "c", "3", "d", "5", "\xff", "6")
	for _, tc := range []struct {
		name, start, end string
		want             []string
	}{
		{"all", "", "", []string{"a=1", "b=2", "c=3", "c\x00=4", "d=5", "\xff=6"}},
		{"end excluded", "a", "c", []string{"a=1", "b=2"}},
		{"start included, between keys", "bb", "d", []string{"c=3", "c\x00=4"}},
		{"prefix", "c", "c\x01", []string{"c=3", "c\x00=4"}},
		{"no upper bound", "d", "", []string{"d=5", "\xff=6"}},
		{"empty range", "x", "y", nil},
		{"start past end", "d", "a", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, values(scan(t, b, tc.start, tc.end))); d != "" {
				t.Errorf("Scan(%q, %q) (-want +got):\n%s", tc.start, tc.end, d)
			}
		})
	}
}

func testScanStops(t *testing.T, b kv.Backend) {
	var kvs []string
	for i := range 50 {
		kvs = append(kvs, fmt.Sprintf("k%03d", i), "v")
	}
	put(t, b, kvs...)
	stop := errors.New("stop")
	n := 0
	err := b.Read(bg, func(r kv.Reader) error {
		return r.Scan(bg, nil, nil, func(k, v []byte, ver kv.Version) error {
			n++
			if n == 7 {
				return stop
			}
			return nil
		})
	})
	if !errors.Is(err, stop) || n != 7 {
		t.Fatalf("Scan whose callback fails at the 7th key: %d calls, error %v; want 7 calls and the callback's error", n, err)
	}
	mine := errors.New("mine")
	if err := b.Read(bg, func(kv.Reader) error { return mine }); err != mine {
		t.Fatalf("Read returned %v, want fn's own error as it is", err)
	}
}

func testSnapshot(t *testing.T, b kv.Backend) {
	put(t, b, "a", "old", "b", "old")
	want := []string{"a=old", "b=old"}
	done := make(chan error, 1)
	err := b.Read(bg, func(r kv.Reader) error {
		first := readAll(r)
		// Commit from another goroutine. A driver that locks may make it wait for this
		// Read; one with versions lets it end now. Either way this Read must not see it.
		go func() {
			done <- b.Commit(bg, nil, []kv.Write{{Key: []byte("a"), Value: []byte("new")}, {Key: []byte("b"), Delete: true}, {Key: []byte("c"), Value: []byte("new")}})
		}()
		for i := 0; i < 1000; i++ {
			select {
			case err := <-done:
				done <- err
				i = 1000
			default:
				runtime.Gosched()
			}
		}
		second := readAll(r)
		if d := cmp.Diff(want, first); d != "" {
			return fmt.Errorf("first read (-want +got):\n%s", d)
		}
		if d := cmp.Diff(want, second); d != "" {
			return fmt.Errorf("a commit made during the Read is visible to it (-want +got):\n%s", d)
		}
		return nil
	})
	if cerr := <-done; cerr != nil {
		t.Fatalf("Commit: %v", cerr)
	}
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"a=new", "c=new"}, values(scan(t, b, "", ""))); d != "" {
		t.Fatalf("after the Read, the commit is not visible whole (-want +got):\n%s", d)
	}
}

// readAll reads every key with Get and Scan and returns what Scan saw, or the disagreement.
func readAll(r kv.Reader) []string {
	var out []string
	err := r.Scan(bg, nil, nil, func(k, v []byte, ver kv.Version) error {
		got, gv, err := r.Get(bg, k)
		if err != nil {
			return err
		}
		if !bytes.Equal(got, v) || gv != ver {
			return fmt.Errorf("Get(%q) = %q at %d, Scan saw %q at %d", k, got, gv, v, ver)
		}
		out = append(out, string(k)+"="+string(v))
		return nil
	})
	if err != nil {
		return []string{"error: " + err.Error()}
	}
	return out
}

func testAllOrNothing(t *testing.T, b kv.Backend) {
	put(t, b, "a", "1", "guard", "g")
	guard := get(t, b, "guard")
	put(t, b, "guard", "moved")
	// A failing condition stops every write.
	err := b.Commit(bg, []kv.Condition{{Key: []byte("guard"), Version: guard.Version}},
		[]kv.Write{{Key: []byte("a"), Value: []byte("2")}, {Key: []byte("new"), Value: []byte("x")}, {Key: []byte("guard"), Delete: true}})
	if !errors.Is(err, kv.ErrConditionFailed) {
		t.Fatalf("Commit with a stale condition = %v, want an error wrapping kv.ErrConditionFailed", err)
	}
	if d := cmp.Diff([]string{"a=1", "guard=moved"}, values(scan(t, b, "", ""))); d != "" {
		t.Fatalf("a failed Commit wrote something (-want +got):\n%s", d)
	}
	// And one that holds applies every write at once, under one new version each.
	err = b.Commit(bg, []kv.Condition{{Key: []byte("guard"), Version: get(t, b, "guard").Version}},
		[]kv.Write{{Key: []byte("a"), Value: []byte("2")}, {Key: []byte("new"), Value: []byte("x")}, {Key: []byte("guard"), Delete: true}})
	if err != nil {
		t.Fatalf("Commit whose conditions hold = %v", err)
	}
	if d := cmp.Diff([]string{"a=2", "new=x"}, values(scan(t, b, "", ""))); d != "" {
		t.Fatalf("after a Commit (-want +got):\n%s", d)
	}
}

func testConditionAbsent(t *testing.T, b kv.Backend) {
	create := func() error {
		return b.Commit(bg, []kv.Condition{{Key: []byte("k"), Version: 0}}, []kv.Write{{Key: []byte("k"), Value: []byte("v")}})
	}
	if err := create(); err != nil {
		t.Fatalf("Commit conditioned on an absent key = %v", err)
	}
	if err := create(); !errors.Is(err, kv.ErrConditionFailed) {
		t.Fatalf("second Commit conditioned on k absent = %v, want kv.ErrConditionFailed", err)
	}
	if err := b.Commit(bg, nil, []kv.Write{{Key: []byte("k"), Delete: true}}); err != nil {
		t.Fatal(err)
	}
	if err := create(); err != nil {
		t.Fatalf("Commit conditioned on a deleted key being absent = %v", err)
	}
	// A condition may name a key the commit does not write.
	err := b.Commit(bg, []kv.Condition{{Key: []byte("other"), Version: 0}}, []kv.Write{{Key: []byte("x"), Value: []byte("1")}})
	if err != nil {
		t.Fatalf("Commit conditioned on another absent key = %v", err)
	}
}

func testConditionPresent(t *testing.T, b kv.Backend) {
	put(t, b, "k", "1")
	v := get(t, b, "k").Version
	for _, tc := range []struct {
		name string
		ver  kv.Version
	}{{"absent", 0}, {"other version", v + 1000}} {
		err := b.Commit(bg, []kv.Condition{{Key: []byte("k"), Version: tc.ver}}, []kv.Write{{Key: []byte("k"), Value: []byte("2")}})
		if !errors.Is(err, kv.ErrConditionFailed) {
			t.Fatalf("%s: Commit = %v, want kv.ErrConditionFailed", tc.name, err)
		}
	}
	if err := b.Commit(bg, []kv.Condition{{Key: []byte("k"), Version: v}}, []kv.Write{{Key: []byte("k"), Value: []byte("2")}}); err != nil {
		t.Fatalf("Commit with the current version = %v", err)
	}
	err := b.Commit(bg, []kv.Condition{{Key: []byte("k"), Version: v}}, []kv.Write{{Key: []byte("k"), Value: []byte("3")}})
	if !errors.Is(err, kv.ErrConditionFailed) {
		t.Fatalf("Commit with the version before the last write = %v, want kv.ErrConditionFailed", err)
	}
	if got := get(t, b, "k").Value; got != "2" {
		t.Fatalf("k = %q, want 2", got)
	}
	// Conditions alone, without writes, are checked too.
	if err := b.Commit(bg, []kv.Condition{{Key: []byte("k"), Version: v}}, nil); !errors.Is(err, kv.ErrConditionFailed) {
		t.Fatalf("Commit of a stale condition and no writes = %v, want kv.ErrConditionFailed", err)
	}
}

func testDelete(t *testing.T, b kv.Backend) {
	put(t, b, "a", "1", "b", "2")
	if err := b.Commit(bg, nil, []kv.Write{{Key: []byte("a"), Delete: true}, {Key: []byte("never"), Delete: true}}); err != nil {
		t.Fatalf("Commit deleting a present and an absent key = %v", err)
	}
	if got := get(t, b, "a"); got.Version != 0 {
		t.Fatalf("deleted key reads %+v, want version 0", got)
	}
	if d := cmp.Diff([]string{"b=2"}, values(scan(t, b, "", ""))); d != "" {
		t.Fatalf("after a delete (-want +got):\n%s", d)
	}
}

func testDeleteRange(t *testing.T, b kv.Backend) {
	put(t, b, "a", "1", "b", "2", "b/1", "3", "b/2", "4", "c", "5")
	// A range delete counts as one write, beside writes outside its range.
	err := b.Commit(bg, nil, []kv.Write{
		{Key: []byte("b"), End: []byte("c"), Delete: true},
		{Key: []byte("d"), Value: []byte("6")},
	})
	if err != nil {
		t.Fatalf("Commit with a range delete = %v", err)
	}
	if d := cmp.Diff([]string{"a=1", "c=5", "d=6"}, values(scan(t, b, "", ""))); d != "" {
		t.Fatalf("after deleting [b, c) and writing d (-want +got):\n%s", d)
	}
	if err := b.Commit(bg, nil, []kv.Write{{Key: []byte("x"), End: []byte("z"), Delete: true}}); err != nil {
		t.Fatalf("Commit deleting an empty range = %v", err)
	}
}

func testTooLarge(t *testing.T, b kv.Backend) {
	l := b.Limits()
	if l.MaxOps < 0 || l.MaxBytes < 0 {
		t.Fatalf("Limits() = %+v, want no negative field", l)
	}
	try := func(name string, conds []kv.Condition, ws []kv.Write) {
		t.Helper()
		err := b.Commit(bg, conds, ws)
		if !errors.Is(err, kv.ErrTooLarge) {
			t.Fatalf("%s beyond %+v: Commit = %v, want kv.ErrTooLarge", name, l, err)
		}
		if got := scan(t, b, "", ""); len(got) != 0 {
			t.Fatalf("%s: a Commit refused as too large wrote %d keys", name, len(got))
		}
	}
	if l.MaxOps == 0 {
		t.Log("no MaxOps: a commit of many writes is not refused")
	} else {
		ws := make([]kv.Write, l.MaxOps+1)
		for i := range ws {
			ws[i] = kv.Write{Key: []byte(fmt.Sprintf("k%06d", i)), Value: []byte("v")}
		}
		try("writes", nil, ws)
		try("conditions and writes", []kv.Condition{{Key: []byte("c")}}, ws[1:])
		if err := b.Commit(bg, nil, ws[1:]); err != nil {
			t.Fatalf("Commit of MaxOps writes = %v", err)
		}
		if err := b.Commit(bg, nil, []kv.Write{{Key: ws[0].Key, Delete: true}}); err != nil {
			t.Fatal(err)
		}
		for _, w := range ws[1:] { // empty again for the next check
			if err := b.Commit(bg, nil, []kv.Write{{Key: w.Key, Delete: true}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if l.MaxBytes == 0 {
		t.Log("no MaxBytes: a commit of many bytes is not refused")
	} else {
		try("bytes", nil, []kv.Write{{Key: []byte("big"), Value: make([]byte, l.MaxBytes+1)}})
	}
}

func testSlicesNotKept(t *testing.T, b kv.Backend) {
	key, val := []byte("key"), []byte("value")
	ckey := []byte("cond")
	if err := b.Commit(bg, []kv.Condition{{Key: ckey}}, []kv.Write{{Key: key, Value: val}}); err != nil {
		t.Fatal(err)
	}
	if string(key) != "key" || string(val) != "value" || string(ckey) != "cond" {
		t.Fatalf("Commit changed its arguments: %q %q %q", key, val, ckey)
	}
	copy(key, "KEY")
	copy(val, "VALUE")
	if d := cmp.Diff([]string{"key=value"}, values(scan(t, b, "", ""))); d != "" {
		t.Fatalf("changing the slices given to Commit changed the backend (-want +got):\n%s", d)
	}
}

func testConcurrentCommits(t *testing.T, b kv.Backend) {
	const rounds, writers = 20, 8
	put(t, b, "k", "start")
	for round := range rounds {
		v := get(t, b, "k").Version
		wins := make([]bool, writers)
		var wg sync.WaitGroup
		errs := make([]error, writers)
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := b.Commit(bg, []kv.Condition{{Key: []byte("k"), Version: v}},
					[]kv.Write{{Key: []byte("k"), Value: []byte(fmt.Sprintf("r%d-w%d", round, w))}, {Key: []byte(fmt.Sprintf("w%d", w)), Value: []byte("x")}})
				switch {
				case err == nil:
					wins[w] = true
				case !errors.Is(err, kv.ErrConditionFailed):
					errs[w] = err
				}
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		winner := -1
		for w, won := range wins {
			if won {
				if winner >= 0 {
					t.Fatalf("round %d: writers %d and %d both committed on version %d", round, winner, w, v)
				}
				winner = w
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no writer committed", round)
		}
		if got, want := get(t, b, "k").Value, fmt.Sprintf("r%d-w%d", round, winner); got != want {
			t.Fatalf("round %d: k = %q, want the winner's %q", round, got, want)
		}
		for w := range writers {
			if got := get(t, b, fmt.Sprintf("w%d", w)); (got.Version != 0) != (w == winner) {
				t.Fatalf("round %d: writer %d lost, but its other write is there (or won and it is not): %+v", round, w, got)
			}
		}
		if err := b.Commit(bg, nil, []kv.Write{{Key: []byte(fmt.Sprintf("w%d", winner)), Delete: true}}); err != nil {
			t.Fatal(err)
		}
	}
}

func testContextDone(t *testing.T, b kv.Backend) {
	ctx, cancel := context.WithCancel(bg)
	cancel()
	err := b.Commit(ctx, nil, []kv.Write{{Key: []byte("k"), Value: []byte("v")}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Commit with a cancelled context = %v, want context.Canceled", err)
	}
	if got := get(t, b, "k"); got.Version != 0 {
		t.Fatalf("a Commit with a cancelled context wrote k: %+v", got)
	}
	called := false
	err = b.Read(ctx, func(kv.Reader) error { called = true; return nil })
	if !called && !errors.Is(err, context.Canceled) {
		t.Fatalf("Read with a cancelled context = %v, without calling fn; want context.Canceled", err)
	}
	if called && err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("Read with a cancelled context = %v", err)
	}
	// A context done while Read runs ends the reader's calls.
	put(t, b, "k", "v")
	ctx, cancel = context.WithCancel(bg)
	err = b.Read(bg, func(r kv.Reader) error {
		cancel()
		if _, _, err := r.Get(ctx, []byte("k")); !errors.Is(err, context.Canceled) {
			return fmt.Errorf("reader: Get with a cancelled context = %v, want context.Canceled", err)
		}
		return r.Scan(ctx, nil, nil, func(k, v []byte, ver kv.Version) error {
			return fmt.Errorf("reader: Scan with a cancelled context called its function on %q", k)
		})
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Read whose reader's context is done: %v, want context.Canceled", err)
	}
}

// testCommitGroup checks a driver that is a kv.GroupCommitter: the commits of a group
// apply in order, each seeing the ones before it; one whose conditions fail writes
// nothing and fails alone; each applied commit gets a version of its own. A driver that
// is not one has nothing to check: its commits go one at a time.
func testCommitGroup(t *testing.T, b kv.Backend) {
	g, ok := b.(kv.GroupCommitter)
	if !ok {
		t.Logf("%T is not a kv.GroupCommitter: the engine sends it one commit at a time", b)
		return
	}
	put(t, b, "a", "1")
	a := get(t, b, "a")
	w := func(k, v string) kv.Write { return kv.Write{Key: []byte(k), Value: []byte(v)} }
	group := []kv.Commit{
		{Conds: []kv.Condition{{Key: []byte("a"), Version: a.Version}}, Writes: []kv.Write{w("a", "2")}},
		// a has moved on: this one's condition fails.
		{Conds: []kv.Condition{{Key: []byte("a"), Version: a.Version}}, Writes: []kv.Write{w("b", "lost")}},
		// b is still absent: this one's holds.
		{Conds: []kv.Condition{{Key: []byte("b")}}, Writes: []kv.Write{w("b", "1"), w("c", "1")}},
		{Writes: []kv.Write{{Key: []byte("c"), Delete: true}}},
	}
	errs, err := g.CommitGroup(bg, group)
	if err != nil {
		t.Fatalf("CommitGroup = %v", err)
	}
	if len(errs) != len(group) {
		t.Fatalf("CommitGroup returned %d errors for %d commits", len(errs), len(group))
	}
	for i, want := range []bool{false, true, false, false} {
		if got := errors.Is(errs[i], kv.ErrConditionFailed); got != want || (!want && errs[i] != nil) {
			t.Errorf("commit %d of the group: error %v, want a failed condition: %v", i, errs[i], want)
		}
	}
	got := scan(t, b, "", "")
	if diff := cmp.Diff([]string{"a=2", "b=1"}, values(got)); diff != "" {
		t.Errorf("keys after the group (-want +got):\n%s", diff)
	}
	if len(got) == 2 && (got[0].Version == a.Version || got[0].Version == 0 || got[1].Version == 0) {
		t.Errorf("versions after the group: a %d (was %d), b %d", got[0].Version, a.Version, got[1].Version)
	}
}
