// Package monitormetrics defines the metrics of a monitor.Monitor once, for every
// exporter: what each metric counts, its name, help, instrument, unit, labels and
// histogram buckets ([All]), and the function that turns what a Monitor tells its
// observers into updates of those metrics ([Observer]). An exporter implements a small
// [Sink] and decides nothing of what a metric counts: prommetrics
// (integrations/controllerruntime/prommetrics) exports the metrics to Prometheus, and
// integrations/otel through an OpenTelemetry meter. The package imports only the
// standard library and the Monitor's own packages.
//
// # Names
//
// Each metric has one name, written once, in OpenTelemetry's spelling: the namespace
// itemops, then lowercase words separated by dots, snake_case within a word, with no
// unit and no _total in it ("itemops.plugin.call.duration", "itemops.plugin.calls").
// Its Prometheus name is derived from it mechanically by [Metric.PrometheusName], as
// OpenTelemetry's Prometheus exporter derives it: dots become underscores, a metric in
// seconds (unit "s") ends in _seconds, a unit in braces ("{call}", a count of calls)
// adds nothing, and a counter ends in _total ("itemops_plugin_call_duration_seconds",
// "itemops_plugin_calls_total"). A program that exports the OpenTelemetry metrics to
// Prometheus thus sees prommetrics' names. Labels have one spelling in both (action,
// call, kind, outcome, phase): they are the keys of the OpenTelemetry attributes too,
// so that a query selects the same series in either backend. prommetrics adds one label
// of its own, monitor, the name of the Reporter that tells Monitors apart.
//
// # The metrics
//
// By their OpenTelemetry name (Prometheus name in parentheses), with their labels:
//
//   - itemops.runs{kind,phase} (itemops_runs), a gauge: the runs the last pass found
//     waiting or finalizing.
//   - itemops.operations{phase} (itemops_operations), a gauge: the unfinished
//     operations of the runs the last pass polled, New or InProgress.
//   - itemops.operations.ended{phase} (itemops_operations_ended_total), a counter:
//     operations that ended, Completed or Failed.
//   - itemops.operations.timed_out{action} (itemops_operations_timed_out_total), a
//     counter: operations failed for running past their timeout.
//   - itemops.operations.stalled{action} (itemops_operations_stalled_total), a counter:
//     operations failed for making no progress within their stall timeout (see
//     monitor.WithStallTimeout).
//   - itemops.operation.retries{action,outcome} (itemops_operation_retries_total), a
//     counter: what a retry policy (see monitor.RetryPolicy) made of each Progress
//     error, or of the answer after a row of them: scheduled, exhausted, refused or
//     recovered (monitor.RetryOutcome).
//   - itemops.operations.in_backoff (itemops_operations_in_backoff), a gauge: the
//     operations the last pass left alone because they wait for their next poll after
//     a Progress error.
//   - itemops.monitor.pass.duration (itemops_monitor_pass_duration_seconds), a
//     histogram in seconds: passes, by the Monitor's clock.
//   - itemops.plugin.call.duration{action,call} (itemops_plugin_call_duration_seconds),
//     a histogram in seconds: Progress and Cancel calls (call is "progress" or
//     "cancel"), in real time.
//   - itemops.plugin.calls{action,call,outcome} (itemops_plugin_calls_total), a
//     counter: the same calls by outcome: succeeded, errored, panicked or timed_out;
//     and, as hung, the calls not made because the operation's previous call hangs
//     (see monitor.CallHung), which the histogram leaves out.
//   - itemops.finalizer.failures{kind} (itemops_finalizer_failures_total), a counter:
//     Finalizer calls that failed or timed out.
//
// A gauge holds what the last pass found: each pass replaces all its series (see
// [Sink]). A counter counts from zero, and a pass adds zero to the series of
// itemops.operations.ended that nothing ended in, so that both phases are shown. The
// label action is a plugin's registered name, and kind a run's kind: operation IDs,
// run names and UIDs are never labels, whose number would grow without bound.
package monitormetrics

import (
	"strconv"
	"strings"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
)

// An Instrument is the kind of a metric: how its values are updated and read.
type Instrument int

// The instruments of the metrics.
const (
	// Counter is a sum that only grows: [Sink.Record] adds to it.
	Counter Instrument = iota + 1
	// Gauge is what the last pass found: [Sink.Set] replaces all its series at once.
	Gauge
	// Histogram is a distribution: [Sink.Record] observes a value, in the metric's
	// unit, counted in the metric's buckets.
	Histogram
)

// String returns "counter", "gauge" or "histogram".
func (i Instrument) String() string {
	switch i {
	case Counter:
		return "counter"
	case Gauge:
		return "gauge"
	case Histogram:
		return "histogram"
	}
	return "instrument(" + strconv.Itoa(int(i)) + ")"
}

// A Metric is the definition of one metric. [All] returns them.
type Metric struct {
	// Name is the metric's one name, in OpenTelemetry's spelling (see the package
	// comment, "Names"); [Metric.PrometheusName] derives the other.
	Name string
	// Help says what the metric counts, in one sentence: a Prometheus help text, and
	// an OpenTelemetry instrument's description.
	Help       string
	Instrument Instrument
	// Unit is the metric's unit in UCUM, as OpenTelemetry writes it: "s" for seconds,
	// or an annotation in braces for a count of things ("{operation}").
	Unit string
	// Labels are the names of the metric's labels (OpenTelemetry attributes), in the
	// order of the label values [Sink.Record] and [Point] give; none for a metric
	// without labels.
	Labels []string
	// Buckets are the upper bounds of a histogram's buckets, ascending, in its unit;
	// nil for the other instruments.
	Buckets []float64
}

// PrometheusName returns the metric's name as Prometheus spells it, derived from Name:
// dots become underscores, then a metric in seconds gets the suffix _seconds, and a
// counter _total. A unit in braces adds nothing.
func (m Metric) PrometheusName() string {
	name := strings.ReplaceAll(m.Name, ".", "_")
	if m.Unit == "s" {
		name += "_seconds"
	}
	if m.Instrument == Counter {
		name += "_total"
	}
	return name
}

// The label values of the label call.
const (
	callProgress = "progress"
	callCancel   = "cancel"
)

// The metrics, in the order All returns them. All copies them, slices included, so
// that no caller changes what another reads; the Observer passes them to its sink
// as they are, which costs no copy per update.
var (
	runs = Metric{
		Name: "itemops.runs", Instrument: Gauge, Unit: "{run}", Labels: []string{"kind", "phase"},
		Help: "Runs the last pass of each Monitor found waiting or finalizing, by kind and phase.",
	}
	unfinished = Metric{
		Name: "itemops.operations", Instrument: Gauge, Unit: "{operation}", Labels: []string{"phase"},
		Help: "Unfinished operations of the runs the last pass of each Monitor polled, by phase.",
	}
	ended = Metric{
		Name: "itemops.operations.ended", Instrument: Counter, Unit: "{operation}", Labels: []string{"phase"},
		Help: "Operations that ended, by the phase they ended in.",
	}
	timedOut = Metric{
		Name: "itemops.operations.timed_out", Instrument: Counter, Unit: "{operation}", Labels: []string{"action"},
		Help: "Operations failed for running past their timeout, by plugin.",
	}
	stalled = Metric{
		Name: "itemops.operations.stalled", Instrument: Counter, Unit: "{operation}", Labels: []string{"action"},
		Help: "Operations failed for making no progress within their stall timeout, by plugin.",
	}
	retries = Metric{
		Name: "itemops.operation.retries", Instrument: Counter, Unit: "{retry}", Labels: []string{"action", "outcome"},
		Help: "Progress errors under a retry policy, and answers after them, by plugin and outcome (scheduled, exhausted, refused, recovered).",
	}
	inBackoff = Metric{
		Name: "itemops.operations.in_backoff", Instrument: Gauge, Unit: "{operation}",
		Help: "Operations the last pass of each Monitor left alone because they wait for their next poll after a Progress error.",
	}
	passDuration = Metric{
		Name: "itemops.monitor.pass.duration", Instrument: Histogram, Unit: "s",
		Help:    "Duration of Monitor passes.",
		Buckets: exponentialBuckets(0.01, 4, 10),
	}
	callDuration = Metric{
		Name: "itemops.plugin.call.duration", Instrument: Histogram, Unit: "s", Labels: []string{"action", "call"},
		Help:    "Duration of plugin Progress and Cancel calls, by plugin and call.",
		Buckets: exponentialBuckets(0.001, 4, 10),
	}
	calls = Metric{
		Name: "itemops.plugin.calls", Instrument: Counter, Unit: "{call}", Labels: []string{"action", "call", "outcome"},
		Help: "Plugin Progress and Cancel calls, by plugin, call and outcome (succeeded, errored, panicked, timed_out, hung).",
	}
	finalizerFailures = Metric{
		Name: "itemops.finalizer.failures", Instrument: Counter, Unit: "{call}", Labels: []string{"kind"},
		Help: "Finalizer calls that failed or timed out, by run kind.",
	}
)

// All returns the definitions of the Monitor's metrics, in the order of the package
// comment, each a copy of its own: a caller may change what it is given.
func All() []Metric {
	all := []Metric{runs, unfinished, ended, timedOut, stalled, retries, inBackoff,
		passDuration, callDuration, calls, finalizerFailures}
	for i := range all {
		all[i].Labels = append([]string(nil), all[i].Labels...)
		all[i].Buckets = append([]float64(nil), all[i].Buckets...)
	}
	return all
}

// exponentialBuckets returns count bounds, the first start, each the one before times
// factor, computed as Prometheus' client computes them, so that the bounds are the same
// floating-point numbers.
func exponentialBuckets(start, factor float64, count int) []float64 {
	b := make([]float64, count)
	for i := range b {
		b[i] = start
		start *= factor
	}
	return b
}

// A Point is the value of one series of a gauge: its label values, in the order of the
// metric's Labels, and its value.
type Point struct {
	Labels []string
	Value  float64
}

// A Sink takes the updates of the metrics that an [Observer] makes, and is the whole of
// what an exporter implements. Its methods are called from the Monitor's goroutines,
// several at once, so they must be safe for concurrent use, and must not block (see
// monitor.Observer). The [Metric] they are given is one of [All]'s, which a sink tells
// apart by its Name; its slices are the package's own, so a sink must neither change
// nor keep them (a sink that needs them keeps what All returned).
type Sink interface {
	// Record adds value to the series of counter m with the label values labels, or
	// observes value in that series of histogram m. labels are in the order of
	// m.Labels; the sink must not keep the slice.
	Record(m Metric, value float64, labels ...string)
	// Set replaces every series of gauge m with points: after it, the gauge has the
	// series of points only (none, when points is empty). Set is called once per gauge
	// after each pass; the sink must not keep the slice.
	Set(m Metric, points []Point)
}

// Observer returns the monitor.Observer that updates the metrics through sink: give it
// to a Monitor with monitor.WithObserver. It adds nothing to what the Monitor does,
// holds no state of its own, and is safe for concurrent use as sink is.
func Observer(sink Sink) monitor.Observer {
	return monitor.Observer{
		Pass: func(s monitor.PassStats) { observePass(sink, s) },
		Call: func(s monitor.CallStats) { observeCall(sink, s) },
		TimedOut: func(op operations.Operation) {
			sink.Record(timedOut, 1, op.Action)
		},
		Stalled: func(op operations.Operation) {
			sink.Record(stalled, 1, op.Action)
		},
		Retry: func(s monitor.RetryStats) {
			sink.Record(retries, 1, s.Action, string(s.Outcome))
		},
		Finalized: func(s monitor.FinalizeStats) {
			if s.Err != nil {
				sink.Record(finalizerFailures, 1, string(s.Owner.Kind))
			}
		},
	}
}

func observePass(sink Sink, s monitor.PassStats) {
	sink.Record(passDuration, s.Duration.Seconds())
	points := make([]Point, 0, len(s.RunPhases))
	for _, c := range s.RunPhases {
		points = append(points, Point{Labels: []string{string(c.Kind), string(c.Phase)}, Value: float64(c.Runs)})
	}
	sink.Set(runs, points)
	sink.Set(unfinished, []Point{
		{Labels: []string{string(operations.OperationNew)}, Value: float64(s.OperationsNew)},
		{Labels: []string{string(operations.OperationInProgress)}, Value: float64(s.OperationsInProgress)},
	})
	sink.Set(inBackoff, []Point{{Value: float64(s.OperationsDeferred)}})
	sink.Record(ended, float64(s.Completed), string(operations.OperationCompleted))
	sink.Record(ended, float64(s.Failed), string(operations.OperationFailed))
}

func observeCall(sink Sink, s monitor.CallStats) {
	call := callProgress
	if s.Cancel {
		call = callCancel
	}
	if s.Outcome != monitor.CallHung { // no call was made: Duration is the hung call's
		sink.Record(callDuration, s.Duration.Seconds(), s.Action, call)
	}
	sink.Record(calls, 1, s.Action, call, string(s.Outcome))
}
