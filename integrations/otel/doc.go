// Package otel traces what an itemops monitor.Monitor does with OpenTelemetry: a span
// for each pass, a child for each run the pass polls or finalizes, and below a run's
// span one for each plugin call and finalizer call, so that the question "this backup
// took 40 minutes: where did the time go?" has an answer in a trace. It is a module of
// its own, so that OpenTelemetry stays out of the root module's graph, and it uses the
// Monitor's public hook only ([monitor.Tracer]).
//
//	monitor.New(store, resolver, itemotel.Options()...) // import itemotel "github.com/itemops/itemops/integrations/otel"
//
// The package is named otel, as OpenTelemetry's own API package is: import one of the
// two under another name.
//
// # Spans
//
// Every span is of kind Internal, from the instrumentation scope
// "github.com/itemops/itemops/integrations/otel". The tree of one pass:
//
//	itemops.pass                    one per pass of Run, or RunOnce
//	├── itemops.run                 itemops.run.step=poll: a waiting run polled
//	│   ├── itemops.progress        a Progress call to a plugin, one per operation
//	│   └── itemops.cancel          a Cancel call: the operation timed out or stalled
//	│                               (after its itemops.progress), or its run is cancelled
//	└── itemops.run                 itemops.run.step=finalize: a finalizing run
//	    └── itemops.finalize        the call of the Finalizer
//
// A run that a poll moves to a finalizing phase has two run spans in the same pass, a
// poll and a finalize. The context a plugin's Progress and Cancel receive carries the
// span of its call: a tracker that calls an HTTP or gRPC service with that context,
// through the service client's OpenTelemetry instrumentation (otelhttp, otelgrpc) or a
// propagator's Inject, carries the trace to the service. The plugin calls of
// monitor.Monitor.Poll and of Recover, called by a program itself, have their spans
// under whatever span the program's context holds; only a pass makes run spans.
//
// Attributes. A run's span and a finalizer's span name the run: itemops.run.kind,
// itemops.run.name and itemops.run.uid (a call's span does not: its parent, the run's
// span, does). A run's span also has
// itemops.run.step (poll or finalize) and itemops.run.phase, the phase the pass listed
// it in; at its end, for a poll, itemops.run.operations.running, .completed, .failed
// (those that ended in the poll) and .deferred (those left for a later poll after a
// retried error), itemops.run.skipped when another replica holds the run's claim, and
// itemops.run.gone when the store no longer holds it.
//
// A call's span has itemops.plugin (the plugin's registered name),
// itemops.operation.id and itemops.call.wait: how long the operation's check waited
// for one of the Monitor's workers, in seconds, by the Monitor's clock (the time from
// the poll's queueing of its checks to the call's start; for a Cancel after a Progress
// call, the Progress call's time is included). The span itself starts when the call
// starts, in real time: its duration is the call's. A Progress span has
// itemops.call.attempt, the Progress errors in a row a retry policy retried before it
// (0 for a first try: a span with 1 or more is a retry). A Cancel span has
// itemops.call.cause, why the operation is cancelled (timeout, stall or cancelled, the
// last for a run being cancelled or failed on a restart), and itemops.cancel.reason,
// the error the operation fails with. At its end, itemops.call.outcome: succeeded,
// errored, panicked, timed_out (given up after the call timeout; the plugin may go on,
// and its answer is dropped), hung (not made, as the operation's previous call was
// given up and has not returned) or abandoned (the pass's context ended first). A
// call's span gets all its attributes at its end, which costs less (docs/BENCHMARKS.md,
// "Traces"): a sampler sees its name and parent only.
//
// A pass's span has, at its end, itemops.pass.runs, .operations, .completed, .failed,
// .finalized and .skipped, as monitor.PassStats counts them. A finalizer's span has
// itemops.finalize.timed_out when the finalizer was given up after the finalize
// timeout.
//
// Errors. A span whose work failed has the status Error, with the error's text, the
// error recorded as an exception event, and error.type: the call's outcome for a
// plugin call (errored, panicked, timed_out, hung, abandoned), timed_out for a
// finalizer given up, and error for the rest (a store's error in a run or a pass, a
// finalizer's). A plugin's error is an error of its call's span, whether or not a retry
// policy retries it; the operation's end shows on the run's span in its counts.
//
// Events of a run's span: itemops.phase_change, with itemops.phase.from and
// itemops.phase.to, when the pass moved the run's phase; itemops.cancel_requested,
// with itemops.cancel.reason, when the pass found the run's cancel requested and acted
// upon it (cancelled its operations, or failed it). Both are added at the end of the
// run's work.
//
// Operation IDs, run names and UIDs are attributes of spans only, never of metrics.
//
// # Metrics
//
// With [WithMeterProvider], the options also record the Monitor's metrics through the
// provider's meter of the same scope name. They are the metrics of prommetrics
// (integrations/controllerruntime/prommetrics), with the same meaning: both export the
// one definition of package monitormetrics
// (github.com/itemops/itemops/operations/monitor/monitormetrics), which says what each
// metric counts, and the one function of it that updates them from what the Monitor
// tells its observers. Each instrument has the definition's name (OpenTelemetry's
// spelling: itemops.plugin.calls, itemops.plugin.call.duration), its help as
// description, its unit ("s", or a count such as "{call}") and, for a histogram, its
// bucket bounds; the attributes of a series are the definition's labels (action, call,
// kind, outcome, phase) and nothing else. Exported to Prometheus by OpenTelemetry's
// Prometheus exporter, the names become prommetrics' own (itemops_plugin_calls_total,
// itemops_plugin_call_duration_seconds).
//
// The counters and histograms are synchronous instruments of float64 values. The
// gauges (itemops.runs, itemops.operations, itemops.operations.in_backoff) are
// observable gauges whose callback reports the last pass of the Monitor: a series the
// last pass did not find is not reported. Unlike prommetrics, which adds the label
// monitor and sums the gauges of Monitors that report under one name, this package adds
// no attribute of its own: a process whose several Monitors record through one meter
// provider gets each gauge series from one of them, the last to report it. Give such
// Monitors providers of their own (with a resource attribute that tells them apart), or
// use prommetrics. The gauges of a Monitor that stops show its last pass until the
// provider shuts down.
//
// # Supported versions
//
// Go 1.23.0 and go.opentelemetry.io/otel v1.34.0 (with its trace and metric packages)
// are the floor, which go.mod requires; CI builds the module there, and tests it with the
// newest Go and OpenTelemetry too. OpenTelemetry v1.39.0 and later need Go 1.24 or
// later.
package otel
