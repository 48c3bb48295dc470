package monitormetrics_test

import (
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/internal/testutil/metricpass"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/operations/monitor/monitormetrics"
)

// table is a Sink that keeps every series by metricpass.Key: a counter's sum, a
// histogram's number of observations, a gauge's last points.
type table struct {
	mu     sync.Mutex
	series map[string]float64
	gauges map[string][]string // gauge name → the keys of its series
}

func newTable() *table {
	return &table{series: map[string]float64{}, gauges: map[string][]string{}}
}

func key(m monitormetrics.Metric, values []string) string {
	var kv []string
	for i, l := range m.Labels {
		kv = append(kv, l, values[i])
	}
	return metricpass.Key(m.Name, kv...)
}

func (t *table) Record(m monitormetrics.Metric, v float64, labels ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(labels) != len(m.Labels) {
		panic("label values do not match the labels of " + m.Name)
	}
	switch m.Instrument {
	case monitormetrics.Counter:
		t.series[key(m, labels)] += v
	case monitormetrics.Histogram:
		t.series[key(m, labels)]++
	default:
		panic("Record of " + m.Instrument.String() + " " + m.Name)
	}
}

func (t *table) Set(m monitormetrics.Metric, points []monitormetrics.Point) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if m.Instrument != monitormetrics.Gauge {
		panic("Set of " + m.Instrument.String() + " " + m.Name)
	}
	for _, k := range t.gauges[m.Name] {
		delete(t.series, k)
	}
	t.gauges[m.Name] = nil
	for _, p := range points {
		if len(p.Labels) != len(m.Labels) {
			panic("label values do not match the labels of " + m.Name)
		}
		k := key(m, p.Labels)
		t.series[k] = p.Value
		t.gauges[m.Name] = append(t.gauges[m.Name], k)
	}
}

// TestObserver drives metricpass's pass through Observer into a sink that keeps what
// it is told, and compares it with the table that every exporter is held to: each
// update names a metric of All, with as many label values as the metric has labels,
// by the instrument's method.
func TestObserver(t *testing.T) {
	sink := newTable()
	metricpass.Run(t, monitor.WithObserver(monitormetrics.Observer(sink)))
	if diff := cmp.Diff(metricpass.Want(), sink.series); diff != "" {
		t.Errorf("series after the pass (-want +got):\n%s", diff)
	}
	var names []string
	for _, m := range monitormetrics.All() {
		names = append(names, m.Name)
	}
	for k := range sink.series {
		name, _, _ := strings.Cut(k, "{")
		require.Contains(t, names, name, "a series of a metric All does not define")
	}
}

// TestPrometheusName holds the derivation of the Prometheus names: they are the names
// prommetrics has always exported, and must not move.
func TestPrometheusName(t *testing.T) {
	got := map[string]string{}
	for _, m := range monitormetrics.All() {
		got[m.Name] = m.PrometheusName()
	}
	want := map[string]string{
		"itemops.runs":                  "itemops_runs",
		"itemops.operations":            "itemops_operations",
		"itemops.operations.ended":      "itemops_operations_ended_total",
		"itemops.operations.timed_out":  "itemops_operations_timed_out_total",
		"itemops.operations.stalled":    "itemops_operations_stalled_total",
		"itemops.operation.retries":     "itemops_operation_retries_total",
		"itemops.operations.in_backoff": "itemops_operations_in_backoff",
		"itemops.monitor.pass.duration": "itemops_monitor_pass_duration_seconds",
		"itemops.plugin.call.duration":  "itemops_plugin_call_duration_seconds",
		"itemops.plugin.calls":          "itemops_plugin_calls_total",
		"itemops.finalizer.failures":    "itemops_finalizer_failures_total",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Prometheus names (-want +got):\n%s", diff)
	}
}

// TestAll holds what every definition must be for both exporters: a name of
// OpenTelemetry's spelling under itemops, a help text, a unit, buckets for a histogram
// only, ascending; and that All gives copies a caller may change.
func TestAll(t *testing.T) {
	all := monitormetrics.All()
	require.Len(t, all, 11)
	seen := map[string]bool{}
	for _, m := range all {
		require.False(t, seen[m.Name], "%s defined twice", m.Name)
		seen[m.Name] = true
		require.Regexp(t, `^itemops(\.[a-z][a-z_]*)+$`, m.Name)
		require.NotEmpty(t, m.Help, m.Name)
		require.Regexp(t, `^(s|\{[a-z]+\})$`, m.Unit, m.Name)
		require.Equal(t, m.Instrument == monitormetrics.Histogram, len(m.Buckets) > 0, "%s: buckets for histograms only", m.Name)
		require.True(t, slices.IsSorted(m.Buckets), m.Name)
		for _, l := range m.Labels {
			require.Regexp(t, `^[a-z_]+$`, l, m.Name)
		}
	}
	all[0].Labels[0] = "changed"
	all[8].Buckets[0] = -1
	again := monitormetrics.All()
	require.NotEqual(t, "changed", again[0].Labels[0])
	require.NotEqual(t, -1.0, again[8].Buckets[0])
}

func TestInstrumentString(t *testing.T) {
	require.Equal(t, "counter", monitormetrics.Counter.String())
	require.Equal(t, "gauge", monitormetrics.Gauge.String())
	require.Equal(t, "histogram", monitormetrics.Histogram.String())
	require.Equal(t, "instrument(0)", monitormetrics.Instrument(0).String())
}
