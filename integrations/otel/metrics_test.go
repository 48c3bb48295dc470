package otel_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	itemotel "github.com/itemops/itemops/integrations/otel"
	"github.com/itemops/itemops/internal/testutil/metricpass"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/operations/monitor/monitormetrics"
	"github.com/itemops/itemops/operations/operationstest"
)

// meters is a meter provider of the SDK whose metrics a test reads when it wants with
// a ManualReader.
type meters struct {
	t        *testing.T
	reader   *sdkmetric.ManualReader
	provider *sdkmetric.MeterProvider
}

func newMeters(t *testing.T) *meters {
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { require.NoError(t, provider.Shutdown(context.Background())) })
	return &meters{t: t, reader: reader, provider: provider}
}

// options returns the options that record metrics through m, and trace to nowhere.
func (m *meters) options() []monitor.Option {
	return itemotel.Options(itemotel.WithTracerProvider(tracenoop.NewTracerProvider()), itemotel.WithMeterProvider(m.provider))
}

// series collects the metrics and returns each series' value by metricpass.Key: a
// counter's or a gauge's value, a histogram's number of observations. It checks, as it
// reads them, that every metric is one monitormetrics defines, of this package's scope,
// with its definition's description, unit, instrument and buckets, and that the
// attributes of each series are exactly the definition's labels: no operation ID, run
// name or UID, nor any other attribute.
func (m *meters) series() map[string]float64 {
	t := m.t
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, m.reader.Collect(context.Background(), &rm))
	defs := map[string]monitormetrics.Metric{}
	for _, d := range monitormetrics.All() {
		defs[d.Name] = d
	}
	got := map[string]float64{}
	for _, sm := range rm.ScopeMetrics {
		require.Equal(t, "github.com/itemops/itemops/integrations/otel", sm.Scope.Name)
		for _, mt := range sm.Metrics {
			d, ok := defs[mt.Name]
			require.True(t, ok, "%s is not a metric monitormetrics defines", mt.Name)
			require.Equal(t, d.Help, mt.Description, mt.Name)
			require.Equal(t, d.Unit, mt.Unit, mt.Name)
			add := func(kv []string, v float64) {
				require.Len(t, kv, 2*len(d.Labels), "%s: attributes %v, want one of each of %v", mt.Name, kv, d.Labels)
				for i := 0; i < len(kv); i += 2 {
					require.Contains(t, d.Labels, kv[i], "%s: an attribute not among its labels", mt.Name)
				}
				got[metricpass.Key(d.Name, kv...)] = v
			}
			switch data := mt.Data.(type) {
			case metricdata.Sum[float64]:
				require.Equal(t, monitormetrics.Counter, d.Instrument, mt.Name)
				require.True(t, data.IsMonotonic, mt.Name)
				for _, p := range data.DataPoints {
					add(labelValues(p.Attributes.ToSlice()), p.Value)
				}
			case metricdata.Gauge[float64]:
				require.Equal(t, monitormetrics.Gauge, d.Instrument, mt.Name)
				for _, p := range data.DataPoints {
					add(labelValues(p.Attributes.ToSlice()), p.Value)
				}
			case metricdata.Histogram[float64]:
				require.Equal(t, monitormetrics.Histogram, d.Instrument, mt.Name)
				for _, p := range data.DataPoints {
					require.Equal(t, d.Buckets, p.Bounds, mt.Name)
					add(labelValues(p.Attributes.ToSlice()), float64(p.Count))
				}
			default:
				t.Fatalf("%s: data of type %T", mt.Name, mt.Data)
			}
		}
	}
	return got
}

// labelValues returns the attributes as name and value in turn.
func labelValues(attrs []attribute.KeyValue) []string {
	var kv []string
	for _, a := range attrs {
		kv = append(kv, string(a.Key), a.Value.AsString())
	}
	return kv
}

// TestMetricsSharedTable drives metricpass's pass, over plugins that complete, fail,
// panic, hang, time out and retry, with a failing finalizer, through the Monitor options
// of WithMeterProvider, and reads the metrics with the SDK's ManualReader: every series
// has the value of the table that prommetrics' registry is held to after the same pass
// (its TestSharedTable), and only the definitions' labels as attributes.
func TestMetricsSharedTable(t *testing.T) {
	m := newMeters(t)
	metricpass.Run(t, m.options()...)
	if diff := cmp.Diff(metricpass.Want(), m.series()); diff != "" {
		t.Errorf("series after the pass (-want +got):\n%s", diff)
	}
}

// TestMetricsGaugesOfLastPass: the gauges report what the last pass found, and a series
// the last pass did not find is gone, while the counters keep counting. A run whose one
// operation completes is waiting in the first pass, which finalizes it, and in no phase
// the second pass lists.
func TestMetricsGaugesOfLastPass(t *testing.T) {
	e := newEnv(t)
	m := newMeters(t)
	e.run("b1", "ok")
	e.trackers["ok"] = &operationstest.Tracker{ProgressFunc: func(context.Context, operations.Operation) (operations.Progress, error) {
		return operations.Progress{Completed: true}, nil
	}}
	mon := monitor.New(e.store, operationstest.Resolver(e.trackers), append(m.options(), monitor.WithClock(e.clock))...)
	runs := metricpass.Key("itemops.runs", "kind", "Backup", "phase", "WaitingForPluginOperations")
	ended := metricpass.Key("itemops.operations.ended", "phase", "Completed")
	passes := metricpass.Key("itemops.monitor.pass.duration")
	newOps := metricpass.Key("itemops.operations", "phase", "New")

	_, err := mon.RunOnce(context.Background())
	require.NoError(t, err)
	got := m.series()
	require.Equal(t, 1.0, got[runs])
	require.Equal(t, 1.0, got[ended])
	require.Equal(t, 1.0, got[passes])
	require.Contains(t, got, newOps)

	_, err = mon.RunOnce(context.Background())
	require.NoError(t, err)
	got = m.series()
	require.NotContains(t, got, runs, "a run the last pass did not find")
	require.Equal(t, 1.0, got[ended], "the counter keeps its count")
	require.Equal(t, 2.0, got[passes])
	require.Equal(t, 0.0, got[newOps])
}

// TestMetricsOff: without WithMeterProvider, or with a nil one, Options gives the
// tracer's option alone, and no observer of metrics.
func TestMetricsOff(t *testing.T) {
	for _, opts := range [][]itemotel.Option{nil, {itemotel.WithMeterProvider(nil)}} {
		require.Len(t, itemotel.Options(opts...), 1, "the tracer's option only")
	}
	require.Len(t, newMeters(t).options(), 2, "the tracer's option and the metrics' observer")
}
