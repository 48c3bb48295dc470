// Package prommetrics exports what an itemops monitor.Monitor does as Prometheus
// metrics. It works with any Prometheus registry: controller-runtime's (the
// controllerruntime package registers it there) or a program's own.
//
// The metrics, all prefixed itemops_, each with the label monitor, the name of the
// Monitor that reports them (see [Metrics.Reporter]):
//
//   - runs{kind,phase} (gauge): the runs the last pass found waiting or finalizing.
//   - operations{phase} (gauge): the unfinished operations of the runs the last pass
//     polled, New or InProgress.
//   - operations_ended_total{phase} (counter): operations that ended, Completed or
//     Failed.
//   - operations_timed_out_total{action} (counter): operations failed for running past
//     their timeout.
//   - operations_stalled_total{action} (counter): operations failed for making no
//     progress within their stall timeout (see monitor.WithStallTimeout).
//   - operation_retries_total{action,outcome} (counter): what a retry policy (see
//     monitor.RetryPolicy) made of each Progress error, or of the answer after a row of
//     them: scheduled, exhausted, refused or recovered (monitor.RetryOutcome).
//   - operations_in_backoff (gauge): the operations the last pass left alone because
//     they wait for their next poll after a Progress error.
//   - monitor_pass_duration_seconds (histogram): passes, by the Monitor's clock.
//   - plugin_call_duration_seconds{action,call} (histogram): Progress and Cancel calls
//     (call is "progress" or "cancel"), in real time.
//   - plugin_calls_total{action,call,outcome} (counter): the same calls by outcome:
//     succeeded, errored, panicked or timed_out; and, as hung, the calls not made
//     because the operation's previous call hangs (see monitor.CallHung), which the
//     histogram leaves out.
//   - finalizer_failures_total{kind} (counter): Finalizer calls that failed or timed out.
//
// # Several Monitors
//
// Each Monitor reports through a [Reporter] of its own, whose name is the value of the
// label monitor on every series it reports, so that Monitors that report to one
// registry have series of their own. A program with one Monitor sees the same metric
// names, the same other labels and the same values as without the label; a query that
// selects by the other labels, or sums over them, gives the same answer.
//
// The gauges show a Monitor's last pass until [Reporter.Close] removes its part: call
// it when the Monitor stops, so that a stopped Monitor's runs are not shown as waiting.
// The counters and histograms keep what the Monitor did. Reporters of one name share
// their series: the gauges add up their last passes (two Monitors over stores of their
// own, with 3 and 1 waiting runs, show 4), and the counters count what each does.
// Monitors over one store, reporting under one name, would count its runs once each:
// give each its own name.
package prommetrics

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
)

// Metrics holds the metrics of one or more Monitors. Create it with [New], register it
// with [Metrics.Register], and pass the options of a [Metrics.Reporter] to monitor.New.
// It is safe for concurrent use.
type Metrics struct {
	runs            *sumGauge
	operations      *sumGauge
	operationsEnded *prometheus.CounterVec
	timedOut        *prometheus.CounterVec
	stalled         *prometheus.CounterVec
	retries         *prometheus.CounterVec
	inBackoff       *sumGauge
	passDuration    *prometheus.HistogramVec
	callDuration    *prometheus.HistogramVec
	calls           *prometheus.CounterVec
	finalizerFailed *prometheus.CounterVec
}

// New returns the metrics, unregistered, all zero.
func New() *Metrics {
	return &Metrics{
		runs: newSumGauge("itemops_runs", "Runs the last pass of each Monitor found waiting or finalizing, by kind and phase.",
			"kind", "phase"),
		operations: newSumGauge("itemops_operations", "Unfinished operations of the runs the last pass of each Monitor polled, by phase.",
			"phase"),
		operationsEnded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "itemops_operations_ended_total", Help: "Operations that ended, by the phase they ended in.",
		}, []string{"monitor", "phase"}),
		timedOut: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "itemops_operations_timed_out_total", Help: "Operations failed for running past their timeout, by plugin.",
		}, []string{"monitor", "action"}),
		stalled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "itemops_operations_stalled_total", Help: "Operations failed for making no progress within their stall timeout, by plugin.",
		}, []string{"monitor", "action"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "itemops_operation_retries_total",
			Help: "Progress errors under a retry policy, and answers after them, by plugin and outcome (scheduled, exhausted, refused, recovered).",
		}, []string{"monitor", "action", "outcome"}),
		inBackoff: newSumGauge("itemops_operations_in_backoff",
			"Operations the last pass of each Monitor left alone because they wait for their next poll after a Progress error."),
		passDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "itemops_monitor_pass_duration_seconds", Help: "Duration of Monitor passes.",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 10),
		}, []string{"monitor"}),
		callDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "itemops_plugin_call_duration_seconds", Help: "Duration of plugin Progress and Cancel calls, by plugin and call.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}, []string{"monitor", "action", "call"}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "itemops_plugin_calls_total", Help: "Plugin Progress and Cancel calls, by plugin, call and outcome (succeeded, errored, panicked, timed_out, hung).",
		}, []string{"monitor", "action", "call", "outcome"}),
		finalizerFailed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "itemops_finalizer_failures_total", Help: "Finalizer calls that failed or timed out, by run kind.",
		}, []string{"monitor", "kind"}),
	}
}

// Register registers the metrics with r. A metric that r already holds from another
// Metrics is shared: both then update the registered one. Register fails with r's other
// errors.
func (m *Metrics) Register(r prometheus.Registerer) error {
	var errs []error
	m.runs = register(r, m.runs, &errs)
	m.operations = register(r, m.operations, &errs)
	m.operationsEnded = register(r, m.operationsEnded, &errs)
	m.timedOut = register(r, m.timedOut, &errs)
	m.stalled = register(r, m.stalled, &errs)
	m.retries = register(r, m.retries, &errs)
	m.inBackoff = register(r, m.inBackoff, &errs)
	m.passDuration = register(r, m.passDuration, &errs)
	m.callDuration = register(r, m.callDuration, &errs)
	m.calls = register(r, m.calls, &errs)
	m.finalizerFailed = register(r, m.finalizerFailed, &errs)
	return errors.Join(errs...)
}

// register registers c with r and returns it, or the collector of the same type that r
// already holds under its name.
func register[T prometheus.Collector](r prometheus.Registerer, c T, errs *[]error) T {
	err := r.Register(c)
	var dup prometheus.AlreadyRegisteredError
	if errors.As(err, &dup) {
		if existing, ok := dup.ExistingCollector.(T); ok {
			return existing
		}
	}
	if err != nil {
		*errs = append(*errs, err)
	}
	return c
}

// A Reporter reports what one Monitor does to its [Metrics], under the Monitor's name.
// Create it with [Metrics.Reporter]. It is safe for concurrent use.
type Reporter struct {
	m      *Metrics
	name   string
	closed atomic.Bool // set by Close: the gauges take no more passes
}

// Reporter returns the reporter of one more Monitor, named name: every series it
// reports carries the label monitor=name. A name may be empty, and need not be unique
// (see the package comment, "Several Monitors").
func (m *Metrics) Reporter(name string) *Reporter {
	return &Reporter{m: m, name: name}
}

// MonitorOptions returns the options that make a Monitor report to r: an observer of its
// passes, plugin calls, timeouts, stalls, retries and finalizers. It adds to the Monitor's other
// observers. Give the options to one Monitor only.
func (r *Reporter) MonitorOptions() []monitor.Option {
	m := r.m
	return []monitor.Option{
		monitor.WithObserver(monitor.Observer{
			Pass: r.observePass,
			Call: r.observeCall,
			TimedOut: func(op operations.Operation) {
				m.timedOut.WithLabelValues(r.name, op.Action).Inc()
			},
			Stalled: func(op operations.Operation) {
				m.stalled.WithLabelValues(r.name, op.Action).Inc()
			},
			Retry: func(s monitor.RetryStats) {
				m.retries.WithLabelValues(r.name, s.Action, string(s.Outcome)).Inc()
			},
			Finalized: func(s monitor.FinalizeStats) {
				if s.Err != nil {
					m.finalizerFailed.WithLabelValues(r.name, string(s.Owner.Kind)).Inc()
				}
			},
		}),
	}
}

// Close removes r's part of the gauges itemops_runs, itemops_operations and
// itemops_operations_in_backoff, and keeps later passes of its Monitor out of them; the
// series of a name no other Reporter reports go. Call it when the Monitor stops. The
// counters and histograms keep what the Monitor did. Close is idempotent and never
// fails.
func (r *Reporter) Close() {
	r.closed.Store(true)
	r.m.runs.remove(r)
	r.m.operations.remove(r)
	r.m.inBackoff.remove(r)
}

func (r *Reporter) observePass(s monitor.PassStats) {
	m := r.m
	m.passDuration.WithLabelValues(r.name).Observe(s.Duration.Seconds())
	runs := make(map[[2]string]float64, len(s.RunPhases))
	for _, c := range s.RunPhases {
		runs[[2]string{string(c.Kind), string(c.Phase)}] = float64(c.Runs)
	}
	m.runs.set(r, runs)
	m.operations.set(r, map[[2]string]float64{
		{string(operations.OperationNew)}:        float64(s.OperationsNew),
		{string(operations.OperationInProgress)}: float64(s.OperationsInProgress),
	})
	m.inBackoff.set(r, map[[2]string]float64{{}: float64(s.OperationsDeferred)})
	m.operationsEnded.WithLabelValues(r.name, string(operations.OperationCompleted)).Add(float64(s.Completed))
	m.operationsEnded.WithLabelValues(r.name, string(operations.OperationFailed)).Add(float64(s.Failed))
}

func (r *Reporter) observeCall(s monitor.CallStats) {
	call := "progress"
	if s.Cancel {
		call = "cancel"
	}
	if s.Outcome != monitor.CallHung { // no call was made: Duration is the hung call's
		r.m.callDuration.WithLabelValues(r.name, s.Action, call).Observe(s.Duration.Seconds())
	}
	r.m.calls.WithLabelValues(r.name, s.Action, call, string(s.Outcome)).Inc()
}

// A sumGauge is a gauge with the label monitor and up to two more, whose value, for
// each label set, is the sum of the values its reporters of that name set last: a
// Monitor's pass replaces its own part only.
type sumGauge struct {
	desc   *prometheus.Desc
	labels int // besides monitor

	mu    sync.Mutex
	parts map[*Reporter]map[[2]string]float64 // by reporter, by label values
}

func newSumGauge(name, help string, labels ...string) *sumGauge {
	return &sumGauge{
		desc:   prometheus.NewDesc(name, help, append([]string{"monitor"}, labels...), nil),
		labels: len(labels),
		parts:  make(map[*Reporter]map[[2]string]float64),
	}
}

// set replaces the values of r, unless r is closed.
func (g *sumGauge) set(r *Reporter, values map[[2]string]float64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if r.closed.Load() { // read under mu, so that a set never follows its remove
		return
	}
	g.parts[r] = values
}

// remove drops the values of r.
func (g *sumGauge) remove(r *Reporter) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.parts, r)
}

// Describe sends the gauge's one description.
func (g *sumGauge) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

// Collect sends, by name and label values, the sum of the values of the reporters of
// that name.
func (g *sumGauge) Collect(ch chan<- prometheus.Metric) {
	g.mu.Lock()
	sums := make(map[[3]string]float64)
	for r, part := range g.parts {
		for k, v := range part {
			sums[[3]string{r.name, k[0], k[1]}] += v
		}
	}
	g.mu.Unlock()
	for k, v := range sums {
		if m, err := prometheus.NewConstMetric(g.desc, prometheus.GaugeValue, v, k[:1+g.labels]...); err == nil {
			ch <- m // a label value that is not UTF-8 is left out
		}
	}
}
