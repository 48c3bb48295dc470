package progress_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/clock"
	"github.com/itemops/itemops/clock/clocktest"
	"github.com/itemops/itemops/progress"
)

func newFakeClock() *clocktest.Clock {
	return clocktest.NewClock(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC))
}

// delivery is one call of a recordingSink.
type delivery struct {
	At       time.Time
	Snapshot progress.Snapshot
}

// recordingSink records its calls on a channel and returns what respond says.
type recordingSink struct {
	clock   clock.Clock
	calls   chan delivery
	respond func(ctx context.Context, call int) error // nil: succeed
	n       int
}

func newRecordingSink(clk clock.Clock) *recordingSink {
	return &recordingSink{clock: clk, calls: make(chan delivery, 100)}
}

func (r *recordingSink) sink(ctx context.Context, s progress.Snapshot) error {
	r.n++ // the Reporter never calls its sink concurrently; -race checks that
	r.calls <- delivery{At: r.clock.Now(), Snapshot: s}
	if r.respond != nil {
		return r.respond(ctx, r.n)
	}
	return nil
}

// next returns the next delivery; the test's own timeout guards against none coming.
func (r *recordingSink) next() delivery { return <-r.calls }

func (r *recordingSink) requireNone(t *testing.T) {
	t.Helper()
	select {
	case d := <-r.calls:
		t.Fatalf("unexpected delivery %+v", d)
	default:
	}
}

func closeReporter(t *testing.T, r *progress.Reporter) {
	t.Helper()
	t.Cleanup(func() { _ = r.Close() })
}

func TestReporterDeliversAtMostOncePerInterval(t *testing.T) {
	clk := newFakeClock()
	t0 := clk.Now()
	rec := newRecordingSink(clk)
	var c progress.Counter
	c.Collected(10)
	r := progress.NewReporter(&c, rec.sink, progress.WithInterval(time.Second), progress.WithClock(clk))
	closeReporter(t, r)

	clk.BlockUntilAfterCalls(1) // asleep until t0+1s
	for range 3 {
		c.Done()
	}
	clk.Advance(500 * time.Millisecond)
	rec.requireNone(t)
	clk.Advance(500 * time.Millisecond)
	want := delivery{At: t0.Add(time.Second), Snapshot: progress.Snapshot{Collected: 10, Done: 3}}
	if diff := cmp.Diff(want, rec.next()); diff != "" {
		t.Fatalf("first delivery (-want +got):\n%s", diff)
	}

	// Nothing changed: the next wake-up delivers nothing.
	clk.BlockUntilAfterCalls(2)
	clk.Advance(time.Second)
	clk.BlockUntilAfterCalls(3)
	rec.requireNone(t)

	// A change is delivered at the next wake-up, not before.
	c.SetPass(progress.PassProcessing)
	c.Done()
	clk.Advance(999 * time.Millisecond)
	rec.requireNone(t)
	clk.Advance(time.Millisecond)
	want = delivery{At: t0.Add(3 * time.Second), Snapshot: progress.Snapshot{Pass: progress.PassProcessing, Collected: 10, Done: 4}}
	if diff := cmp.Diff(want, rec.next()); diff != "" {
		t.Fatalf("second delivery (-want +got):\n%s", diff)
	}
	clk.BlockUntilAfterCalls(4)

	// Close has nothing new to deliver; a second Close changes nothing either.
	require.NoError(t, r.Close())
	rec.requireNone(t)
	c.Done()
	require.NoError(t, r.Close())
	rec.requireNone(t)
}

// TestReporterSlowSink blocks the sink and shows that counting goes on, that the sink is
// handed the newest snapshot afterwards rather than a backlog, and that deliveries stay
// an interval apart.
func TestReporterSlowSink(t *testing.T) {
	clk := newFakeClock()
	t0 := clk.Now()
	rec := newRecordingSink(clk)
	release := make(chan struct{})
	rec.respond = func(_ context.Context, call int) error {
		if call == 1 {
			<-release
		}
		return nil
	}
	var c progress.Counter
	c.Collected(100_000)
	r := progress.NewReporter(&c, rec.sink, progress.WithInterval(time.Second), progress.WithClock(clk))
	closeReporter(t, r)

	clk.BlockUntilAfterCalls(1)
	clk.Advance(time.Second)
	first := rec.next() // the sink is now blocked

	// The counting loop runs to the end while the sink is stuck.
	c.SetPass(progress.PassProcessing)
	for range 100_000 {
		c.Done()
	}
	c.SetPass(progress.PassDone)
	clk.Advance(5 * time.Second) // the sink takes five seconds
	rec.requireNone(t)
	close(release)

	second := rec.next()
	clk.BlockUntilAfterCalls(3) // the catch-up wake-up was the second; asleep again
	want := []delivery{
		{At: t0.Add(time.Second), Snapshot: progress.Snapshot{Collected: 100_000}},
		{At: t0.Add(6 * time.Second), Snapshot: progress.Snapshot{Pass: progress.PassDone, Collected: 100_000, Done: 100_000}},
	}
	if diff := cmp.Diff(want, []delivery{first, second}); diff != "" {
		t.Fatalf("deliveries (-want +got):\n%s", diff)
	}
	require.GreaterOrEqual(t, second.At.Sub(first.At), time.Second, "deliveries closer than the interval")

	clk.Advance(time.Second)
	clk.BlockUntilAfterCalls(4)
	rec.requireNone(t)
	require.NoError(t, r.Close())
	rec.requireNone(t)
}

func TestReporterRetriesFailedDelivery(t *testing.T) {
	clk := newFakeClock()
	rec := newRecordingSink(clk)
	boom := errors.New("patch failed")
	rec.respond = func(_ context.Context, call int) error {
		if call == 1 {
			return boom
		}
		return nil
	}
	var handled []error // written on the Reporter's goroutine, read after waitAfters
	var c progress.Counter
	c.Collected(1)
	r := progress.NewReporter(&c, rec.sink, progress.WithClock(clk),
		progress.WithErrorHandler(func(err error) { handled = append(handled, err) }))
	closeReporter(t, r)

	clk.BlockUntilAfterCalls(1)
	clk.Advance(progress.DefaultInterval)
	require.Equal(t, progress.Snapshot{Collected: 1}, rec.next().Snapshot)
	clk.BlockUntilAfterCalls(2)
	require.Equal(t, []error{boom}, handled)

	// Unchanged, but the last delivery failed: it is made again.
	clk.Advance(progress.DefaultInterval)
	require.Equal(t, progress.Snapshot{Collected: 1}, rec.next().Snapshot)
	clk.BlockUntilAfterCalls(3)

	// Accepted now: nothing more until something changes.
	clk.Advance(progress.DefaultInterval)
	clk.BlockUntilAfterCalls(4)
	rec.requireNone(t)
	require.NoError(t, r.Close())
	rec.requireNone(t)
	require.Equal(t, []error{boom}, handled)
}

func TestReporterCloseCancelsDeliveryInFlight(t *testing.T) {
	clk := newFakeClock()
	rec := newRecordingSink(clk)
	var finalCtx struct {
		err         error
		hasDeadline bool
	}
	var handled []error
	rec.respond = func(ctx context.Context, call int) error {
		if call == 1 {
			<-ctx.Done() // a sink that honours its context and is stuck until told
			return ctx.Err()
		}
		_, finalCtx.hasDeadline = ctx.Deadline()
		finalCtx.err = ctx.Err()
		return nil
	}
	var c progress.Counter
	c.Collected(2)
	r := progress.NewReporter(&c, rec.sink, progress.WithClock(clk),
		progress.WithFinalTimeout(time.Hour),
		progress.WithErrorHandler(func(err error) { handled = append(handled, err) }))

	clk.BlockUntilAfterCalls(1)
	clk.Advance(progress.DefaultInterval)
	require.Equal(t, progress.Snapshot{Collected: 2}, rec.next().Snapshot)
	c.Done()
	c.Done()
	c.SetPass(progress.PassDone)

	require.NoError(t, r.Close())
	require.Equal(t, progress.Snapshot{Pass: progress.PassDone, Collected: 2, Done: 2}, rec.next().Snapshot)
	require.NoError(t, finalCtx.err, "the final delivery's context")
	require.True(t, finalCtx.hasDeadline, "the final delivery's context has the final timeout")
	require.Empty(t, handled, "a delivery cancelled by Close is not an error to report")
	rec.requireNone(t)
}

func TestReporterCloseReturnsFinalError(t *testing.T) {
	clk := newFakeClock()
	rec := newRecordingSink(clk)
	boom := errors.New("status patch refused")
	rec.respond = func(context.Context, int) error { return boom }
	var c progress.Counter
	c.Collected(3)
	c.Done()
	r := progress.NewReporter(&c, rec.sink, progress.WithClock(clk))

	err := r.Close()
	require.ErrorIs(t, err, boom)
	require.Equal(t, progress.Snapshot{Collected: 3, Done: 1}, rec.next().Snapshot)
	require.ErrorIs(t, r.Close(), boom, "second Close")
	rec.requireNone(t)
}

func TestReporterCloseConcurrently(t *testing.T) {
	clk := newFakeClock()
	rec := newRecordingSink(clk)
	var c progress.Counter
	c.Collected(1)
	r := progress.NewReporter(&c, rec.sink, progress.WithClock(clk))
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			require.NoError(t, r.Close())
		}()
	}
	wg.Wait()
	require.Equal(t, progress.Snapshot{Collected: 1}, rec.next().Snapshot)
	rec.requireNone(t)
}

func TestReporterNilArguments(t *testing.T) {
	r := progress.NewReporter(nil, nil, progress.WithClock(nil), progress.WithInterval(-1), progress.WithFinalTimeout(0))
	require.NoError(t, r.Close())
}
