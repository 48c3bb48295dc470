package prommetrics_test

import (
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/integrations/controllerruntime/prommetrics"
	"github.com/itemops/itemops/internal/testutil/metricpass"
	"github.com/itemops/itemops/operations/monitor/monitormetrics"
)

// TestSharedTable drives metricpass's pass through a Reporter and gathers the registry:
// every series, read back under its monitormetrics name and without the label monitor,
// has the value of the table that integrations/otel's metrics are held to too; each
// metric has its definition's Prometheus name, type and help; and the histograms have
// the buckets prommetrics has always had.
func TestSharedTable(t *testing.T) {
	reg := prometheus.NewRegistry()
	metrics := prommetrics.New()
	require.NoError(t, metrics.Register(reg))
	metricpass.Run(t, metrics.Reporter("m").MonitorOptions()...)

	defs := map[string]monitormetrics.Metric{} // by Prometheus name
	for _, d := range monitormetrics.All() {
		defs[d.PrometheusName()] = d
	}
	types := map[monitormetrics.Instrument]dto.MetricType{
		monitormetrics.Counter: dto.MetricType_COUNTER, monitormetrics.Gauge: dto.MetricType_GAUGE,
		monitormetrics.Histogram: dto.MetricType_HISTOGRAM,
	}
	buckets := map[string][]float64{
		"itemops_monitor_pass_duration_seconds": prometheus.ExponentialBuckets(0.01, 4, 10),
		"itemops_plugin_call_duration_seconds":  prometheus.ExponentialBuckets(0.001, 4, 10),
	}
	families, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, f := range families {
		d, ok := defs[f.GetName()]
		require.True(t, ok, "%s is not the Prometheus name of a metric of monitormetrics", f.GetName())
		require.Equal(t, types[d.Instrument], f.GetType(), f.GetName())
		require.Equal(t, d.Help, f.GetHelp(), f.GetName())
		for _, mt := range f.GetMetric() {
			var kv []string
			for _, l := range mt.GetLabel() {
				if l.GetName() == "monitor" {
					require.Equal(t, "m", l.GetValue())
					continue
				}
				require.Contains(t, d.Labels, l.GetName(), f.GetName())
				kv = append(kv, l.GetName(), l.GetValue())
			}
			require.Len(t, kv, 2*len(d.Labels), "%s: the labels of %v", f.GetName(), mt.GetLabel())
			v := mt.GetCounter().GetValue() + mt.GetGauge().GetValue() + float64(mt.GetHistogram().GetSampleCount())
			got[metricpass.Key(d.Name, kv...)] = v
			if h := mt.GetHistogram(); h != nil {
				var bounds []float64
				for _, b := range h.GetBucket() {
					bounds = append(bounds, b.GetUpperBound())
				}
				require.Equal(t, buckets[f.GetName()], bounds, f.GetName())
			}
		}
	}
	if diff := gocmp.Diff(metricpass.Want(), got); diff != "" {
		t.Errorf("series after the pass (-want +got):\n%s", diff)
	}
}
