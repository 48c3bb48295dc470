// Package prommetrics exports what an itemops monitor.Monitor does as Prometheus
// metrics. It works with any Prometheus registry: controller-runtime's (the
// controllerruntime package registers it there) or a program's own.
//
// The metrics, all prefixed itemops_:
//
//   - runs{kind,phase} (gauge): the runs the last pass found waiting or finalizing.
//   - operations{phase} (gauge): the unfinished operations of the runs the last pass
//     polled, New or InProgress.
//   - operations_ended_total{phase} (counter): operations that ended, Completed or
//     Failed.
//   - operations_timed_out_total{action} (counter): operations failed for running past
//     their timeout.
//   - monitor_pass_duration_seconds (histogram): passes, by the Monitor's clock.
//   - plugin_call_duration_seconds{action,call} (histogram): Progress and Cancel calls
//     (call is "progress" or "cancel"), in real time.
//   - plugin_calls_total{action,call,outcome} (counter): the same calls by outcome:
//     succeeded, errored, panicked or timed_out.
//   - finalizer_failures_total{kind} (counter): Finalizer calls that failed or timed out.
package prommetrics

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
)

// Metrics holds the metrics of one or more Monitors. Create it with [New], register it
// with [Metrics.Register], and pass [Metrics.MonitorOptions] to monitor.New. It
// is safe for concurrent use.
type Metrics struct {
	runs            *prometheus.GaugeVec
	operations      *prometheus.GaugeVec
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
		runs: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "itemops_runs", Help: "Runs the last Monitor pass found waiting or finalizing, by kind and phase.",
		}, []string{"kind", "phase"}),
		operations: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "itemops_operations", Help: "Unfinished operations of the runs the last Monitor pass polled, by phase.",
		}, []string{"phase"}),
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
			Name: "itemops_plugin_calls_total", Help: "Plugin Progress and Cancel calls, by plugin, call and outcome (succeeded, errored, panicked, timed_out).",
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
// observers.
func (m *Metrics) MonitorOptions() []monitor.Option {
	return []monitor.Option{
		monitor.WithObserver(monitor.Observer{
			Pass:     m.observePass,
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

func (m *Metrics) observePass(s monitor.PassStats) {
	m.passDuration.Observe(s.Duration.Seconds())
	m.runs.Reset()
	for _, c := range s.RunPhases {
		m.runs.WithLabelValues(string(c.Kind), string(c.Phase)).Set(float64(c.Runs))
	}
	m.operations.WithLabelValues(string(operations.OperationNew)).Set(float64(s.OperationsNew))
	m.operations.WithLabelValues(string(operations.OperationInProgress)).Set(float64(s.OperationsInProgress))
	m.operationsEnded.WithLabelValues(string(operations.OperationCompleted)).Add(float64(s.Completed))
	m.operationsEnded.WithLabelValues(string(operations.OperationFailed)).Add(float64(s.Failed))
}

func (m *Metrics) observeCall(s monitor.CallStats) {
	call := "progress"
	if s.Cancel {
		call = "cancel"
	}
	m.callDuration.WithLabelValues(s.Action, call).Observe(s.Duration.Seconds())
	m.calls.WithLabelValues(s.Action, call, string(s.Outcome)).Inc()
}
