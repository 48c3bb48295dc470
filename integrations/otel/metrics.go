package otel

import (
	"context"
	"sync"

	otelapi "go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/itemops/itemops/operations/monitor/monitormetrics"
)

// meterSink records the Monitor's metrics, as monitormetrics defines them, through the
// instruments of one meter: a counter and a histogram as synchronous instruments, a
// gauge as an observable gauge whose callback reports the points of the last pass.
// Its maps are written only by newMeterSink, so it is safe for concurrent use.
type meterSink struct {
	counters   map[string]metric.Float64Counter   // by monitormetrics name
	histograms map[string]metric.Float64Histogram // by monitormetrics name
	gauges     map[string]*lastPass               // by monitormetrics name
}

var _ monitormetrics.Sink = (*meterSink)(nil)

// lastPass holds the points a gauge's last Set gave, for its callback.
type lastPass struct {
	gauge metric.Float64ObservableGauge

	mu     sync.Mutex // guards points
	points []observed
}

// An observed is one point of a gauge, its labels an attribute set.
type observed struct {
	attrs metric.MeasurementOption
	value float64
}

// newMeterSink makes the instruments of every metric of monitormetrics.All with the
// meter of mp named for this package, and registers the callback of the gauges. An
// instrument the meter refuses goes to OpenTelemetry's error handler (otel.Handle), and
// what the meter gave in its place, if anything, records nothing.
func newMeterSink(mp metric.MeterProvider) *meterSink {
	meter := mp.Meter(scopeName)
	s := &meterSink{
		counters:   map[string]metric.Float64Counter{},
		histograms: map[string]metric.Float64Histogram{},
		gauges:     map[string]*lastPass{},
	}
	var observables []metric.Observable
	for _, d := range monitormetrics.All() {
		var err error
		switch d.Instrument {
		case monitormetrics.Counter:
			var c metric.Float64Counter
			c, err = meter.Float64Counter(d.Name, metric.WithDescription(d.Help), metric.WithUnit(d.Unit))
			if c != nil {
				s.counters[d.Name] = c
			}
		case monitormetrics.Histogram:
			var h metric.Float64Histogram
			h, err = meter.Float64Histogram(d.Name, metric.WithDescription(d.Help), metric.WithUnit(d.Unit),
				metric.WithExplicitBucketBoundaries(d.Buckets...))
			if h != nil {
				s.histograms[d.Name] = h
			}
		case monitormetrics.Gauge:
			var g metric.Float64ObservableGauge
			g, err = meter.Float64ObservableGauge(d.Name, metric.WithDescription(d.Help), metric.WithUnit(d.Unit))
			if g != nil {
				s.gauges[d.Name] = &lastPass{gauge: g}
				observables = append(observables, g)
			}
		}
		if err != nil {
			otelapi.Handle(err)
		}
	}
	if len(observables) > 0 {
		if _, err := meter.RegisterCallback(s.observe, observables...); err != nil {
			otelapi.Handle(err)
		}
	}
	return s
}

// attributes returns the attributes of a series of d: each of d's labels with its value.
func attributes(d monitormetrics.Metric, values []string) metric.MeasurementOption {
	kv := make([]attribute.KeyValue, 0, len(d.Labels))
	for i, l := range d.Labels {
		if i < len(values) {
			kv = append(kv, attribute.String(l, values[i]))
		}
	}
	return metric.WithAttributeSet(attribute.NewSet(kv...))
}

// Record adds value to counter d, or records it in histogram d.
func (s *meterSink) Record(d monitormetrics.Metric, value float64, labels ...string) {
	ctx := context.Background() // the metrics take no span as exemplar
	if c, ok := s.counters[d.Name]; ok {
		c.Add(ctx, value, attributes(d, labels))
	} else if h, ok := s.histograms[d.Name]; ok {
		h.Record(ctx, value, attributes(d, labels))
	}
}

// Set replaces the points gauge d reports.
func (s *meterSink) Set(d monitormetrics.Metric, points []monitormetrics.Point) {
	g, ok := s.gauges[d.Name]
	if !ok {
		return
	}
	obs := make([]observed, len(points))
	for i, p := range points {
		obs[i] = observed{attrs: attributes(d, p.Labels), value: p.Value}
	}
	g.mu.Lock()
	g.points = obs
	g.mu.Unlock()
}

// observe is the gauges' callback: it reports each gauge's points of the last pass.
func (s *meterSink) observe(_ context.Context, o metric.Observer) error {
	for _, g := range s.gauges {
		g.mu.Lock()
		points := g.points
		g.mu.Unlock()
		for _, p := range points {
			o.ObserveFloat64(g.gauge, p.value, p.attrs)
		}
	}
	return nil
}
