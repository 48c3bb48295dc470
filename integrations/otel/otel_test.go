package otel_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/itemops/itemops/clock/clocktest"
	itemotel "github.com/itemops/itemops/integrations/otel"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/operations/operationstest"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/memstore"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var t0 = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

// env is a Monitor's world: a real memstore, a fake clock, trackers by plugin name, and
// a span recorder behind the SDK's tracer provider.
type env struct {
	t        *testing.T
	store    *memstore.Store
	clock    *clocktest.Clock
	trackers map[string]operations.Tracker
	spans    *tracetest.SpanRecorder
	provider *sdktrace.TracerProvider
}

func newEnv(t *testing.T) *env {
	spans := tracetest.NewSpanRecorder()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { require.NoError(t, provider.Shutdown(context.Background())) })
	return &env{t: t, store: memstore.New(), clock: clocktest.NewClock(t0),
		trackers: map[string]operations.Tracker{}, spans: spans, provider: provider}
}

func (e *env) monitor(opts ...monitor.Option) *monitor.Monitor {
	opts = append([]monitor.Option{monitor.WithClock(e.clock)}, opts...)
	opts = append(opts, itemotel.Options(itemotel.WithTracerProvider(e.provider))...)
	return monitor.New(e.store, operationstest.Resolver(e.trackers), opts...)
}

// run stores a backup run waiting for its operations, one per plugin named, each
// operation's ID that of its plugin with "op-" before it.
func (e *env) run(name string, plugins ...string) operations.Owner {
	e.t.Helper()
	ctx := context.Background()
	o := operations.Owner{Kind: phase.Backup, Name: name, UID: "uid-" + name}
	r := operations.Run{Owner: o, Phase: phase.New, Created: t0}
	require.NoError(e.t, r.SetPhase(phase.InProgress, "started", t0))
	require.NoError(e.t, e.store.CreateRun(ctx, r))
	var ops []operations.Operation
	for _, p := range plugins {
		ops = append(ops, operations.Operation{Owner: o, Action: p, ID: "op-" + p,
			Status: operations.Status{Phase: operations.OperationInProgress, Created: t0}})
	}
	require.NoError(e.t, e.store.PutOperations(ctx, o, ops))
	_, err := e.store.UpdateRun(ctx, o, func(r *operations.Run) error {
		return r.SetPhase(phase.WaitingForPluginOperations, "main run ended", t0)
	})
	require.NoError(e.t, err)
	return o
}

// tree draws the spans recorded, a line each, children under their parent, indented,
// siblings sorted; each line has the span's name, its attributes (but the run's kind
// and UID, and, below a run's span, its name), its status and its events (but the
// exceptions, whose error the status gives).
func tree(spans []sdktrace.ReadOnlySpan) string {
	children := map[trace.SpanID][]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		children[s.Parent().SpanID()] = append(children[s.Parent().SpanID()], s)
	}
	var b strings.Builder
	var draw func(parent trace.SpanID, depth int)
	draw = func(parent trace.SpanID, depth int) {
		type line struct {
			text string
			id   trace.SpanID
		}
		var lines []line
		for _, s := range children[parent] {
			parts := []string{s.Name()}
			for _, kv := range s.Attributes() {
				switch k := string(kv.Key); {
				case k == "itemops.run.kind", k == "itemops.run.uid",
					k == "itemops.run.name" && s.Name() != "itemops.run":
					continue
				}
				parts = append(parts, fmt.Sprintf("%s=%s", kv.Key, kv.Value.Emit()))
			}
			if st := s.Status(); st.Code != 0 {
				parts = append(parts, fmt.Sprintf("status=%s(%q)", st.Code, st.Description))
			}
			for _, ev := range s.Events() {
				if ev.Name == "exception" {
					continue
				}
				var attrs []string
				for _, kv := range ev.Attributes {
					attrs = append(attrs, fmt.Sprintf("%s=%s", kv.Key, kv.Value.Emit()))
				}
				parts = append(parts, "event "+ev.Name+"{"+strings.Join(attrs, " ")+"}")
			}
			lines = append(lines, line{strings.Join(parts, " "), s.SpanContext().SpanID()})
		}
		slices.SortFunc(lines, func(a, b line) int { return strings.Compare(a.text, b.text) })
		for _, l := range lines {
			b.WriteString(strings.Repeat("  ", depth) + l.text + "\n")
			draw(l.id, depth+1)
		}
	}
	draw(trace.SpanID{}, 0)
	return b.String()
}

// edges returns the pairs "parent > child" of the spans' names, each once, sorted; a
// span without a parent recorded has the parent "".
func edges(spans []sdktrace.ReadOnlySpan) []string {
	names := map[trace.SpanID]string{}
	for _, s := range spans {
		names[s.SpanContext().SpanID()] = s.Name()
	}
	var out []string
	for _, s := range spans {
		if e := names[s.Parent().SpanID()] + " > " + s.Name(); !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	slices.Sort(out)
	return out
}

// documentedEdges returns the pairs "parent > child" of the tree that doc.go draws
// under "The tree of one pass:", in the form edges gives: each line's depth is where
// its span's name starts, four columns a level.
func documentedEdges(t *testing.T) []string {
	t.Helper()
	doc, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	_, drawing, ok := strings.Cut(string(doc), "The tree of one pass:\n//\n")
	require.True(t, ok, "doc.go draws no tree of one pass")
	var stack, out []string
	for _, line := range strings.Split(drawing, "\n") {
		line, ok := strings.CutPrefix(line, "//\t")
		if !ok {
			break
		}
		rest := strings.TrimLeft(line, "│├└─ ")
		if !strings.HasPrefix(rest, "itemops.") {
			continue // a line that goes on explaining the one above
		}
		at := len(line) - len(rest)
		depth := len([]rune(line[:at])) / 4
		name, _, _ := strings.Cut(line[at:], " ")
		require.LessOrEqual(t, depth, len(stack), "doc.go's tree skips a level at %q", line)
		stack = append(stack[:depth], name)
		parent := ""
		if depth > 0 {
			parent = stack[depth-1]
		}
		if e := parent + " > " + name; !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	slices.Sort(out)
	return out
}

// hang returns a function that blocks until the test ends, whatever its context says.
func hang(t *testing.T) func() {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	return func() { <-release }
}

// TestSpanTree makes two passes over runs whose plugins complete, fail, time out (a
// plugin that answers its context's end), hang (one that ignores it, retried), and
// whose cancel was requested, and checks the tree of spans of each, attributes and
// events included; the first pass's spans nest as the package documentation's drawing
// says (the test reads doc.go).
func TestSpanTree(t *testing.T) {
	e := newEnv(t)
	hangs := hang(t)
	e.trackers["ok"] = &operationstest.Tracker{ProgressFunc: func(ctx context.Context, op operations.Operation) (operations.Progress, error) {
		return operations.Progress{Completed: true, NCompleted: 1, NTotal: 1}, nil
	}}
	e.trackers["err"] = &operationstest.Tracker{ProgressFunc: func(ctx context.Context, op operations.Operation) (operations.Progress, error) {
		return operations.Progress{}, errors.New("mover unreachable")
	}}
	e.trackers["slow"] = &operationstest.Tracker{ProgressFunc: func(ctx context.Context, op operations.Operation) (operations.Progress, error) {
		<-ctx.Done()
		return operations.Progress{}, ctx.Err()
	}}
	e.trackers["hang"] = &operationstest.Tracker{ProgressFunc: func(ctx context.Context, op operations.Operation) (operations.Progress, error) {
		hangs()
		return operations.Progress{}, nil
	}}
	e.run("b-ok", "ok")
	e.run("b-fail", "err")
	e.run("b-timeout", "slow")
	e.run("b-hang", "hang")
	cancelled := e.run("b-cancel", "ok")
	m := e.monitor(monitor.WithCallTimeout(50*time.Millisecond),
		monitor.WithActionRetryPolicy("hang", monitor.RetryPolicy{MaxAttempts: 5, Retryable: func(error) bool { return true }}),
		monitor.WithFinalizer(monitor.FinalizerFunc(func(context.Context, operations.Run, []operations.ResourceIdentifier) error { return nil })))
	_, err := m.RequestCancel(context.Background(), cancelled, "user asked")
	require.NoError(t, err)

	_, err = m.RunOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, `itemops.pass itemops.pass.runs=5 itemops.pass.operations=5 itemops.pass.completed=1 itemops.pass.failed=3 itemops.pass.finalized=3 itemops.pass.skipped=0
  itemops.run itemops.run.name=b-cancel itemops.run.step=poll itemops.run.phase=WaitingForPluginOperations itemops.run.operations.running=0 itemops.run.operations.completed=0 itemops.run.operations.failed=1 itemops.run.operations.deferred=0 event itemops.cancel_requested{itemops.cancel.reason=user asked} event itemops.phase_change{itemops.phase.from=WaitingForPluginOperations itemops.phase.to=Failed}
    itemops.cancel itemops.plugin=ok itemops.operation.id=op-ok itemops.call.wait=0 itemops.call.cause=cancelled itemops.cancel.reason=Canceled: user asked itemops.call.outcome=succeeded
  itemops.run itemops.run.name=b-fail itemops.run.step=finalize itemops.run.phase=FinalizingPartiallyFailed event itemops.phase_change{itemops.phase.from=FinalizingPartiallyFailed itemops.phase.to=PartiallyFailed}
    itemops.finalize
  itemops.run itemops.run.name=b-fail itemops.run.step=poll itemops.run.phase=WaitingForPluginOperations itemops.run.operations.running=0 itemops.run.operations.completed=0 itemops.run.operations.failed=1 itemops.run.operations.deferred=0 event itemops.phase_change{itemops.phase.from=WaitingForPluginOperations itemops.phase.to=FinalizingPartiallyFailed}
    itemops.progress itemops.plugin=err itemops.operation.id=op-err itemops.call.wait=0 itemops.call.attempt=0 itemops.call.outcome=errored error.type=errored status=Error("mover unreachable")
  itemops.run itemops.run.name=b-hang itemops.run.step=poll itemops.run.phase=WaitingForPluginOperations itemops.run.operations.running=1 itemops.run.operations.completed=0 itemops.run.operations.failed=0 itemops.run.operations.deferred=0
    itemops.progress itemops.plugin=hang itemops.operation.id=op-hang itemops.call.wait=0 itemops.call.attempt=0 itemops.call.outcome=timed_out error.type=timed_out status=Error("no answer within 50ms")
  itemops.run itemops.run.name=b-ok itemops.run.step=finalize itemops.run.phase=Finalizing event itemops.phase_change{itemops.phase.from=Finalizing itemops.phase.to=Completed}
    itemops.finalize
  itemops.run itemops.run.name=b-ok itemops.run.step=poll itemops.run.phase=WaitingForPluginOperations itemops.run.operations.running=0 itemops.run.operations.completed=1 itemops.run.operations.failed=0 itemops.run.operations.deferred=0 event itemops.phase_change{itemops.phase.from=WaitingForPluginOperations itemops.phase.to=Finalizing}
    itemops.progress itemops.plugin=ok itemops.operation.id=op-ok itemops.call.wait=0 itemops.call.attempt=0 itemops.call.outcome=succeeded
  itemops.run itemops.run.name=b-timeout itemops.run.step=finalize itemops.run.phase=FinalizingPartiallyFailed event itemops.phase_change{itemops.phase.from=FinalizingPartiallyFailed itemops.phase.to=PartiallyFailed}
    itemops.finalize
  itemops.run itemops.run.name=b-timeout itemops.run.step=poll itemops.run.phase=WaitingForPluginOperations itemops.run.operations.running=0 itemops.run.operations.completed=0 itemops.run.operations.failed=1 itemops.run.operations.deferred=0 event itemops.phase_change{itemops.phase.from=WaitingForPluginOperations itemops.phase.to=FinalizingPartiallyFailed}
    itemops.progress itemops.plugin=slow itemops.operation.id=op-slow itemops.call.wait=0 itemops.call.attempt=0 itemops.call.outcome=timed_out error.type=timed_out status=Error("no answer within 50ms")
`, tree(e.spans.Ended()))
	require.Equal(t, documentedEdges(t), edges(e.spans.Ended()),
		"the spans' parents, by name, against the tree the package documentation draws")

	// The next pass: the hanging plugin has not returned, so its operation's next call
	// is not made, and its span says so. It is the retry of a retried error.
	e.spans.Reset()
	_, err = m.RunOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, `itemops.pass itemops.pass.runs=1 itemops.pass.operations=1 itemops.pass.completed=0 itemops.pass.failed=0 itemops.pass.finalized=0 itemops.pass.skipped=0
  itemops.run itemops.run.name=b-hang itemops.run.step=poll itemops.run.phase=WaitingForPluginOperations itemops.run.operations.running=1 itemops.run.operations.completed=0 itemops.run.operations.failed=0 itemops.run.operations.deferred=0
    itemops.progress itemops.plugin=hang itemops.operation.id=op-hang itemops.call.wait=0 itemops.call.attempt=1 itemops.call.outcome=hung error.type=hung status=Error("no answer within 50ms")
`, tree(e.spans.Ended()))
}

// TestTrackerPropagatesTrace has a tracker call an HTTP service with the context its
// Progress receives, injecting it with the W3C trace-context propagator, as a
// service client's instrumentation does: the request's traceparent header names the
// trace and the span of the call.
func TestTrackerPropagatesTrace(t *testing.T) {
	e := newEnv(t)
	headers := make(chan string, 1)
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		headers <- r.Header.Get("traceparent")
	}))
	defer server.Close()
	propagator := propagation.TraceContext{}
	e.trackers["http"] = &operationstest.Tracker{ProgressFunc: func(ctx context.Context, op operations.Operation) (operations.Progress, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, server.URL, nil)
		if err != nil {
			return operations.Progress{}, err
		}
		propagator.Inject(ctx, propagation.HeaderCarrier(req.Header))
		resp, err := server.Client().Do(req)
		if err != nil {
			return operations.Progress{}, err
		}
		resp.Body.Close()
		return operations.Progress{Completed: true}, nil
	}}
	e.run("b1", "http")
	_, err := e.monitor().RunOnce(context.Background())
	require.NoError(t, err)

	var call sdktrace.ReadOnlySpan
	for _, s := range e.spans.Ended() {
		if s.Name() == "itemops.progress" {
			call = s
		}
	}
	require.NotNil(t, call, "no span of the Progress call")
	sc := call.SpanContext()
	require.Equal(t, fmt.Sprintf("00-%s-%s-01", sc.TraceID(), sc.SpanID()), <-headers)
}
