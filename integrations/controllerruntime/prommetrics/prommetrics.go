// Package prommetrics exports what an itemops monitor.Monitor does as Prometheus
// metrics. It works with any Prometheus registry: controller-runtime's (the
// controllerruntime package registers it there) or a program's own.
//
// The metrics, all prefixed itemops_:
//
//   - runs{kind,phase} (gauge): the runs the last pass found waiting or finalizing.
//   - operations{phase} (gauge): the unfinished operations of the runs the last pass
//     polled, New or InProgress.
//
// The two gauges add up the last pass of every Monitor that reports to the registry (two
// Monitors over stores of their own, 3 and 1 waiting runs, show 4), and a Monitor's last
// pass counts until the process ends. Monitors over one store count its runs once each:
// give such Monitors registries of their own. The other metrics count what every Monitor
// does.
//   - operations_ended_total{phase} (counter): operations that ended, Completed or
//     Failed.
//   - operations_timed_out_total{action} (counter): operations failed for running past
//     their timeout.
//   - monitor_pass_duration_seconds (histogram): passes, by the Monitor's clock.
//   - plugin_call_duration_seconds{action,call} (histogram): Progress and Cancel calls
//     (call is "progress" or "cancel"), in real time.
//   - plugin_calls_total{action,call,outcome} (counter): the same calls by outcome:
//     succeeded, errored, panicked or timed_out; and, as hung, the calls not made
//     because the operation's previous call hangs (see monitor.CallHung), which the
//     histogram leaves out.
//   - finalizer_failures_total{kind} (counter): Finalizer calls that failed or timed out.
package prommetrics

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
)

// Metrics holds the metrics of one or more Monitors. Create it with [New], register it
// with [Metrics.Register], and pass [Metrics.MonitorOptions] to monitor.New. It
// is safe for concurrent use.
type Metrics struct {
	runs            *sumGauge
	operations      *sumGauge
	operationsEnded *prometheus.CounterVec
	timedOut        *prometheus.CounterVec
	passDuration    prometheus.Histogram
	callDuration    *prometheus.HistogramVec
	calls           *prometheus.CounterVec
	finalizerFailed *prometheus.CounterVec
}

// New returns the metrics, unregistered, all zero.
func New() *Metrics {
	return &Metrics{
		runs: newSumGauge("itemops_runs", "Runs the last pass of each Monitor found waiting or finalizing, by kind and phase, summed over the Monitors.",
			"kind", "phase"),
		operations: newSumGauge("itemops_operations", "Unfinished operations of the runs the last pass of each Monitor polled, by phase, summed over the Monitors.",
			"phase"),
		operationsEnded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "itemops_operations_ended_total", Help: "Operations that ended, by the phase they ended in.",
		}, []string{"phase"}),
		timedOut: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "itemops_operations_timed_out_total", Help: "Operations failed for running past their timeout, by plugin.",
		}, []string{"action"}),
		passDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "itemops_monitor_pass_duration_seconds", Help: "Duration of Monitor passes.",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 10),
		}),
		callDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "itemops_plugin_call_duration_seconds", Help: "Duration of plugin Progress and Cancel calls, by plugin and call.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}, []string{"action", "call"}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "itemops_plugin_calls_total", Help: "Plugin Progress and Cancel calls, by plugin, call and outcome (succeeded, errored, panicked, timed_out, hung).",
		}, []string{"action", "call", "outcome"}),
		finalizerFailed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "itemops_finalizer_failures_total", Help: "Finalizer calls that failed or timed out, by run kind.",
		}, []string{"kind"}),
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

// MonitorOptions returns the options that make a Monitor report to m: an observer of its
// passes, plugin calls, timeouts and finalizers. It adds to the Monitor's other
// observers. Each call gives the options of one more Monitor, whose gauges add to the
// others'.
func (m *Metrics) MonitorOptions() []monitor.Option {
	src := new(byte) // this Monitor's part of the gauges
	return []monitor.Option{
		monitor.WithObserver(monitor.Observer{
			Pass:     func(s monitor.PassStats) { m.observePass(src, s) },
			Call:     m.observeCall,
			TimedOut: func(op operations.Operation) { m.timedOut.WithLabelValues(op.Action).Inc() },
			Finalized: func(s monitor.FinalizeStats) {
				if s.Err != nil {
					m.finalizerFailed.WithLabelValues(string(s.Owner.Kind)).Inc()
				}
			},
		}),
	}
}

func (m *Metrics) observePass(src *byte, s monitor.PassStats) {
	m.passDuration.Observe(s.Duration.Seconds())
	runs := make(map[[2]string]float64, len(s.RunPhases))
	for _, c := range s.RunPhases {
		runs[[2]string{string(c.Kind), string(c.Phase)}] = float64(c.Runs)
	}
	m.runs.set(src, runs)
	m.operations.set(src, map[[2]string]float64{
		{string(operations.OperationNew)}:        float64(s.OperationsNew),
		{string(operations.OperationInProgress)}: float64(s.OperationsInProgress),
	})
	m.operationsEnded.WithLabelValues(string(operations.OperationCompleted)).Add(float64(s.Completed))
	m.operationsEnded.WithLabelValues(string(operations.OperationFailed)).Add(float64(s.Failed))
}

func (m *Metrics) observeCall(s monitor.CallStats) {
	call := "progress"
	if s.Cancel {
		call = "cancel"
	}
	if s.Outcome != monitor.CallHung { // no call was made: Duration is the hung call's
		m.callDuration.WithLabelValues(s.Action, call).Observe(s.Duration.Seconds())
	}
	m.calls.WithLabelValues(s.Action, call, string(s.Outcome)).Inc()
}

// A sumGauge is a gauge with one or two labels whose value, for each label set, is the
// sum of the values its sources set last: a Monitor's pass replaces its own part only.
type sumGauge struct {
	desc   *prometheus.Desc
	labels int

	mu    sync.Mutex
	parts map[*byte]map[[2]string]float64 // by source, by label values
}

func newSumGauge(name, help string, labels ...string) *sumGauge {
	return &sumGauge{
		desc:   prometheus.NewDesc(name, help, labels, nil),
		labels: len(labels),
		parts:  make(map[*byte]map[[2]string]float64),
	}
}

// set replaces the values of src.
func (g *sumGauge) set(src *byte, values map[[2]string]float64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.parts[src] = values
}

// Describe sends the gauge's one description.
func (g *sumGauge) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

// Collect sends the sum of every source's values, by label values.
func (g *sumGauge) Collect(ch chan<- prometheus.Metric) {
	g.mu.Lock()
	sums := make(map[[2]string]float64)
	for _, part := range g.parts {
		for k, v := range part {
			sums[k] += v
		}
	}
	g.mu.Unlock()
	for k, v := range sums {
		if m, err := prometheus.NewConstMetric(g.desc, prometheus.GaugeValue, v, k[:g.labels]...); err == nil {
			ch <- m // a label value that is not UTF-8 is left out
		}
	}
}
