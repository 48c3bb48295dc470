package otel

import (
	"context"
	"strings"
	"time"

	otelapi "go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/operations/monitor/monitormetrics"
)

// An Option configures what [Options] sets up.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	provider trace.TracerProvider
	meters   metric.MeterProvider // nil: no metrics
}

// WithTracerProvider sets where the spans go. The default is OpenTelemetry's global
// provider (go.opentelemetry.io/otel.GetTracerProvider), as it is when the Monitor is
// made: a program that sets the global provider later passes it here. nil keeps the
// default.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(c *config) {
		if tp != nil {
			c.provider = tp
		}
	})
}

// WithMeterProvider makes [Options] record the Monitor's metrics through mp as well, as
// the package documentation says ("Metrics"). By default, and with a nil mp, there are
// no metrics.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) { c.meters = mp })
}

// Options returns the options of monitor.New that trace what the Monitor does, as the
// package documentation says: a [monitor.WithTracer], and with [WithMeterProvider] a
// [monitor.WithObserver] that records its metrics. Give them to every Monitor to
// trace; a Monitor given them twice makes every span twice, and counts everything
// twice. Options cannot fail; the providers' own errors, and an instrument a meter
// refuses, go to OpenTelemetry's error handler (otel.Handle) or where the providers
// send them.
func Options(opts ...Option) []monitor.Option {
	c := config{}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	if c.provider == nil {
		c.provider = otelapi.GetTracerProvider()
	}
	t := &tracer{t: c.provider.Tracer(scopeName)}
	mopts := []monitor.Option{monitor.WithTracer(monitor.Tracer{
		Pass:     t.pass,
		Run:      t.run,
		Call:     t.call,
		Finalize: t.finalize,
	})}
	if c.meters != nil {
		mopts = append(mopts, monitor.WithObserver(monitormetrics.Observer(newMeterSink(c.meters))))
	}
	return mopts
}

// tracer makes the spans. It keeps nothing between calls, so it is safe for
// concurrent use as its trace.Tracer is.
type tracer struct {
	t trace.Tracer
}

func (t *tracer) pass(ctx context.Context, _ time.Time) (context.Context, func(monitor.PassStats)) {
	ctx, span := t.t.Start(ctx, spanPass, trace.WithSpanKind(trace.SpanKindInternal))
	return ctx, func(s monitor.PassStats) {
		span.SetAttributes(
			keyPassRuns.Int(s.Runs),
			keyPassOperations.Int(s.Operations),
			keyPassCompleted.Int(s.Completed),
			keyPassFailed.Int(s.Failed),
			keyPassFinalized.Int(s.Finalized),
			keyPassSkipped.Int(s.Skipped),
		)
		fail(span, s.Err, "")
		span.End()
	}
}

// runAttrs returns the attributes that name run o.
func runAttrs(o operations.Owner, more ...attribute.KeyValue) []attribute.KeyValue {
	return append([]attribute.KeyValue{
		keyRunKind.String(string(o.Kind)),
		keyRunName.String(o.Name),
		keyRunUID.String(o.UID),
	}, more...)
}

func (t *tracer) run(ctx context.Context, r monitor.RunStart) (context.Context, func(monitor.RunEnd)) {
	step := stepPoll
	if r.Finalize {
		step = stepFinalize
	}
	ctx, span := t.t.Start(ctx, spanRun, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(runAttrs(r.Owner, keyRunStep.String(step), keyRunPhase.String(string(r.Phase)))...))
	return ctx, func(e monitor.RunEnd) {
		if e.Cancel != (operations.CancelRequest{}) {
			span.AddEvent(eventCancelRequested, trace.WithAttributes(keyCancelReason.String(e.Cancel.Reason)))
		}
		if e.Phase != "" && e.Phase != r.Phase {
			span.AddEvent(eventPhaseChange, trace.WithAttributes(
				keyPhaseFrom.String(string(r.Phase)), keyPhaseTo.String(string(e.Phase))))
		}
		switch {
		case e.Skipped:
			span.SetAttributes(keyRunSkipped.Bool(true))
		case e.Gone:
			span.SetAttributes(keyRunGone.Bool(true))
		case !r.Finalize && e.Err == nil:
			p := e.Poll
			span.SetAttributes(keyRunRunning.Int(p.Running), keyRunCompleted.Int(p.Completed),
				keyRunFailed.Int(p.Failed), keyRunDeferred.Int(p.Deferred))
		}
		fail(span, e.Err, "")
		span.End()
	}
}

// call starts the span of a plugin call. A pass makes one per operation, so the span
// gets its attributes once, at its end, in one slice: given at the start too, they
// would be copied into the span twice (the SDK grows the span's slice for the outcome).
// A sampler thus sees no attributes of a call's span, only its name and parent.
func (t *tracer) call(ctx context.Context, c monitor.CallStart) (context.Context, func(monitor.CallStats)) {
	name := spanProgress
	if c.Cancel {
		name = spanCancel
	}
	ctx, span := t.t.Start(ctx, name) // of kind Internal, the default
	return ctx, func(s monitor.CallStats) {
		outcome := string(s.Outcome)
		if outcome == "" {
			outcome = "abandoned" // the poll's context ended first
		}
		attrs := make([]attribute.KeyValue, 0, 7)
		attrs = append(attrs,
			keyPlugin.String(c.Action),
			keyOperationID.String(c.OperationID),
			keyCallWait.Float64(c.Started.Sub(c.Queued).Seconds()),
		)
		if c.Cancel {
			attrs = append(attrs, keyCallCause.String(cause(c.Reason)), keyCancelReason.String(c.Reason))
		} else {
			attrs = append(attrs, keyCallAttempt.Int(c.Attempts))
		}
		attrs = append(attrs, keyCallOutcome.String(outcome))
		span.SetAttributes(attrs...)
		if s.Outcome != monitor.CallSucceeded {
			fail(span, s.Err, outcome)
		}
		span.End()
	}
}

// cause says why a Cancel call with reason is made.
func cause(reason string) string {
	switch {
	case strings.HasPrefix(reason, monitor.TimeoutMessage):
		return causeTimeout
	case strings.HasPrefix(reason, monitor.StallPrefix):
		return causeStall
	}
	return causeCancelled
}

func (t *tracer) finalize(ctx context.Context, r operations.Run) (context.Context, func(monitor.FinalizeStats)) {
	ctx, span := t.t.Start(ctx, spanFinalize, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(runAttrs(r.Owner)...))
	return ctx, func(s monitor.FinalizeStats) {
		errType := ""
		if s.TimedOut {
			span.SetAttributes(keyFinalizeTimedOut.Bool(true))
			errType = "timed_out"
		}
		fail(span, s.Err, errType)
		span.End()
	}
}

// fail marks span failed with err, when it is not nil, its error.type errType (the
// error's type name when empty).
func fail(span trace.Span, err error, errType string) {
	if err == nil {
		return
	}
	if errType == "" {
		errType = "error"
	}
	span.SetAttributes(keyErrorType.String(errType))
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
}
