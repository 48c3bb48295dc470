// Package prommetrics exports what an itemops monitor.Monitor does as Prometheus
// metrics. It works with any Prometheus registry: controller-runtime's (the
// controllerruntime package registers it there) or a program's own.
//
// The metrics are defined in package monitormetrics
// (github.com/itemops/itemops/operations/monitor/monitormetrics), once for every
// exporter: what each counts, its help, labels and buckets, and how a Monitor's events
// update it. This package exports them under their Prometheus names
// (monitormetrics.Metric.PrometheusName), each with one label more, monitor, the name of
// the Monitor that reports them (see [Metrics.Reporter]):
//
//   - itemops_runs{kind,phase} and itemops_operations{phase}, gauges;
//   - itemops_operations_ended_total{phase}, itemops_operations_timed_out_total{action},
//     itemops_operations_stalled_total{action},
//     itemops_operation_retries_total{action,outcome}, counters;
//   - itemops_operations_in_backoff, a gauge;
//   - itemops_monitor_pass_duration_seconds and
//     itemops_plugin_call_duration_seconds{action,call}, histograms;
//   - itemops_plugin_calls_total{action,call,outcome} and
//     itemops_finalizer_failures_total{kind}, counters.
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

	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/operations/monitor/monitormetrics"
)

// Metrics holds the metrics of one or more Monitors. Create it with [New], register it
// with [Metrics.Register], and pass the options of a [Metrics.Reporter] to monitor.New.
// It is safe for concurrent use.
type Metrics struct {
	// collectors holds the collector of each metric, by its monitormetrics name: a
	// *prometheus.CounterVec, *prometheus.HistogramVec or *sumGauge. Register may
	// replace one with the collector a registry already holds; mu guards that.
	mu         sync.RWMutex
	collectors map[string]prometheus.Collector
	order      []string // the names, in monitormetrics.All's order
}

// New returns the metrics, unregistered, all zero.
func New() *Metrics {
	m := &Metrics{collectors: map[string]prometheus.Collector{}}
	for _, d := range monitormetrics.All() {
		labels := append([]string{"monitor"}, d.Labels...)
		var c prometheus.Collector
		switch d.Instrument {
		case monitormetrics.Counter:
			c = prometheus.NewCounterVec(prometheus.CounterOpts{Name: d.PrometheusName(), Help: d.Help}, labels)
		case monitormetrics.Histogram:
			c = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: d.PrometheusName(), Help: d.Help, Buckets: d.Buckets}, labels)
		case monitormetrics.Gauge:
			if len(d.Labels) > len([2]string{}) {
				panic("prommetrics: the gauge " + d.Name + " has more labels than a sumGauge keeps")
			}
			c = newSumGauge(d.PrometheusName(), d.Help, d.Labels...)
		}
		m.collectors[d.Name] = c
		m.order = append(m.order, d.Name)
	}
	return m
}

// Register registers the metrics with r. A metric that r already holds from another
// Metrics is shared: both then update the registered one. Register fails with r's other
// errors.
func (m *Metrics) Register(r prometheus.Registerer) error {
	var errs []error
	for _, name := range m.order {
		m.mu.RLock()
		c := m.collectors[name]
		m.mu.RUnlock()
		var got prometheus.Collector
		switch c := c.(type) {
		case *prometheus.CounterVec:
			got = register(r, c, &errs)
		case *prometheus.HistogramVec:
			got = register(r, c, &errs)
		case *sumGauge:
			got = register(r, c, &errs)
		}
		m.mu.Lock()
		m.collectors[name] = got
		m.mu.Unlock()
	}
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

// collector returns the collector of the metric named name.
func (m *Metrics) collector(name string) prometheus.Collector {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.collectors[name]
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
	return []monitor.Option{monitor.WithObserver(monitormetrics.Observer(sink{r}))}
}

// Close removes r's part of the gauges itemops_runs, itemops_operations and
// itemops_operations_in_backoff, and keeps later passes of its Monitor out of them; the
// series of a name no other Reporter reports go. Call it when the Monitor stops. The
// counters and histograms keep what the Monitor did. Close is idempotent and never
// fails.
func (r *Reporter) Close() {
	r.closed.Store(true)
	for _, name := range r.m.order {
		if g, ok := r.m.collector(name).(*sumGauge); ok {
			g.remove(r)
		}
	}
}

// sink is the monitormetrics.Sink of a Reporter: it adds the label monitor, the
// Reporter's name, before the others.
type sink struct{ r *Reporter }

var _ monitormetrics.Sink = sink{}

func (s sink) Record(d monitormetrics.Metric, value float64, labels ...string) {
	values := append([]string{s.r.name}, labels...)
	switch c := s.r.m.collector(d.Name).(type) {
	case *prometheus.CounterVec:
		c.WithLabelValues(values...).Add(value)
	case *prometheus.HistogramVec:
		c.WithLabelValues(values...).Observe(value)
	}
}

func (s sink) Set(d monitormetrics.Metric, points []monitormetrics.Point) {
	g, ok := s.r.m.collector(d.Name).(*sumGauge)
	if !ok {
		return
	}
	values := make(map[[2]string]float64, len(points))
	for _, p := range points {
		var k [2]string
		copy(k[:], p.Labels)
		values[k] = p.Value
	}
	g.set(s.r, values)
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
