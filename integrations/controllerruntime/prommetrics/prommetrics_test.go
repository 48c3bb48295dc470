package prommetrics_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/itemops/itemops/clock/clocktest"
	"github.com/itemops/itemops/integrations/controllerruntime/prommetrics"
	"github.com/itemops/itemops/internal/testutil/metricpass"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/operations/operationstest"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/memstore"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// TestScrape drives metricpass's pass (every kind of plugin call outcome, a timeout, a
// retry and a failing finalizer) through a Reporter, then scrapes the registry over HTTP
// as Prometheus would: each metric has its Prometheus name and type (the names that
// dashboards and alerts use, written out here), carries the label monitor, and the
// scrape holds every series of metricpass's table with its value, as TestSharedTable
// reads them from the registry. A second Metrics registers against the same registry
// and shares the metrics already registered.
func TestScrape(t *testing.T) {
	reg := prometheus.NewRegistry()
	metrics := prommetrics.New()
	require.NoError(t, metrics.Register(reg))
	require.NoError(t, prommetrics.New().Register(reg), "a second Metrics shares the registered ones")
	metricpass.Run(t, metrics.Reporter("m").MonitorOptions()...)

	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	scraped := map[string]*dto.MetricFamily{}
	dec := expfmt.NewDecoder(resp.Body, expfmt.ResponseFormat(resp.Header))
	for {
		var f dto.MetricFamily
		if err := dec.Decode(&f); err == io.EOF {
			break
		} else {
			require.NoError(t, err)
		}
		scraped[f.GetName()] = &f
	}

	types := map[string]dto.MetricType{}
	for name, f := range scraped {
		types[name] = f.GetType()
	}
	wantTypes := map[string]dto.MetricType{
		"itemops_runs": dto.MetricType_GAUGE, "itemops_operations": dto.MetricType_GAUGE, "itemops_operations_in_backoff": dto.MetricType_GAUGE,
		"itemops_operations_ended_total": dto.MetricType_COUNTER, "itemops_operations_timed_out_total": dto.MetricType_COUNTER,
		"itemops_operation_retries_total":       dto.MetricType_COUNTER,
		"itemops_monitor_pass_duration_seconds": dto.MetricType_HISTOGRAM, "itemops_plugin_call_duration_seconds": dto.MetricType_HISTOGRAM,
		"itemops_plugin_calls_total": dto.MetricType_COUNTER, "itemops_finalizer_failures_total": dto.MetricType_COUNTER,
	}
	if diff := gocmp.Diff(wantTypes, types); diff != "" {
		t.Errorf("metric types (-want +got):\n%s", diff)
	}

	// The scrape and the registry hold the same series with the same values; the
	// registry's are held to metricpass's table by TestSharedTable.
	value := func(mt *dto.Metric) float64 {
		return mt.GetCounter().GetValue() + mt.GetGauge().GetValue() + float64(mt.GetHistogram().GetSampleCount())
	}
	gathered, err := reg.Gather()
	require.NoError(t, err)
	want, got := map[string]float64{}, map[string]float64{}
	for _, f := range gathered {
		for _, mt := range f.GetMetric() {
			want[f.GetName()+labelKey(labelsOf(mt))] = value(mt)
		}
	}
	for name, f := range scraped {
		for _, mt := range f.GetMetric() {
			require.Equal(t, "m", labelsOf(mt)["monitor"], "%s: the label monitor", name)
			got[name+labelKey(labelsOf(mt))] = value(mt)
		}
	}
	require.Len(t, got, len(metricpass.Want()), "the series scraped")
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("scraped series (-gathered +scraped):\n%s", diff)
	}
}

func labelKey(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k, v := range m {
		keys = append(keys, k+"="+v)
	}
	slices.Sort(keys)
	return fmt.Sprint(keys)
}

// TestMonitorsAddUp: Monitors that report under one name to one registry, through
// Metrics of their own or through one Metrics, each keep their part of the gauges: 3 + 1
// + 2 waiting runs show 6, not the last pass's count.
func TestMonitorsAddUp(t *testing.T) {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	first, second := prommetrics.New(), prommetrics.New()
	require.NoError(t, first.Register(reg))
	require.NoError(t, second.Register(reg))
	quiet := operationstest.Resolver(map[string]operations.Tracker{"p": &operationstest.Tracker{
		ProgressFunc: func(context.Context, operations.Operation) (operations.Progress, error) {
			return operations.Progress{}, nil
		},
	}})
	monitorWith := func(runs int, opts []monitor.Option) *monitor.Monitor {
		store := memstore.New()
		for i := range runs {
			_, err := operations.StartRun(ctx, store, operations.Run{Owner: operations.Owner{Kind: phase.Backup, Name: fmt.Sprint("b", i)}, Created: t0},
				func(context.Context) (operations.MainRun, error) {
					return operations.MainRun{Operations: []operations.Operation{{Action: "p", ID: "1"}}}, nil
				})
			require.NoError(t, err)
		}
		return monitor.New(store, quiet, append(opts, monitor.WithClock(clocktest.NewClock(t0)))...)
	}
	monitors := []*monitor.Monitor{
		monitorWith(3, first.Reporter("m").MonitorOptions()),
		monitorWith(1, second.Reporter("m").MonitorOptions()),
		monitorWith(2, first.Reporter("m").MonitorOptions()),
	}
	for range 2 { // a second round replaces each Monitor's part, adding nothing
		for _, m := range monitors {
			_, err := m.RunOnce(ctx)
			require.NoError(t, err)
		}
	}
	families, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, f := range families {
		for _, mt := range f.GetMetric() {
			if f.GetType() == dto.MetricType_GAUGE {
				got[f.GetName()+labelKey(labelsOf(mt))] = mt.GetGauge().GetValue()
			}
		}
	}
	want := map[string]float64{
		"itemops_runs[kind=Backup monitor=m phase=WaitingForPluginOperations]": 6,
		"itemops_operations[monitor=m phase=InProgress]":                       0,
		"itemops_operations[monitor=m phase=New]":                              6,
		"itemops_operations_in_backoff[monitor=m]":                             0,
	}
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("gauges (-want +got):\n%s", diff)
	}
}

// TestHungCallCountedNotTimed: a call not made because the operation's previous call
// hangs is counted with the outcome hung, and left out of the call-duration histogram,
// since no call was made.
func TestHungCallCountedNotTimed(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	release := make(chan struct{})
	defer close(release)
	stuck := &operationstest.Tracker{ProgressFunc: func(context.Context, operations.Operation) (operations.Progress, error) {
		<-release // ignores its context
		return operations.Progress{}, nil
	}}
	o := operations.Owner{Kind: phase.Backup, Name: "b1"}
	_, err := operations.StartRun(ctx, store, operations.Run{Owner: o, Created: t0}, func(context.Context) (operations.MainRun, error) {
		return operations.MainRun{Operations: []operations.Operation{{Action: "stuck", ID: "1"}}}, nil
	})
	require.NoError(t, err)

	reg := prometheus.NewRegistry()
	metrics := prommetrics.New()
	require.NoError(t, metrics.Register(reg))
	opts := append(metrics.Reporter("m").MonitorOptions(), monitor.WithClock(clocktest.NewClock(t0)),
		monitor.WithCallTimeout(20*time.Millisecond),
		monitor.WithRetryPolicy(monitor.RetryPolicy{MaxAttempts: 11, Retryable: func(error) bool { return true }}))
	m := monitor.New(store, operationstest.Resolver(map[string]operations.Tracker{"stuck": stuck}), opts...)
	for range 2 {
		_, err := m.RunOnce(ctx)
		require.NoError(t, err)
	}

	families, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, f := range families {
		for _, mt := range f.GetMetric() {
			switch f.GetName() {
			case "itemops_plugin_calls_total":
				got["calls "+labelKey(labelsOf(mt))] = mt.GetCounter().GetValue()
			case "itemops_plugin_call_duration_seconds":
				got["timed "+labelKey(labelsOf(mt))] = float64(mt.GetHistogram().GetSampleCount())
			}
		}
	}
	want := map[string]float64{
		"calls " + labelKey(map[string]string{"monitor": "m", "action": "stuck", "call": "progress", "outcome": "timed_out"}): 1,
		"calls " + labelKey(map[string]string{"monitor": "m", "action": "stuck", "call": "progress", "outcome": "hung"}):      1,
		"timed " + labelKey(map[string]string{"monitor": "m", "action": "stuck", "call": "progress"}):                         1,
	}
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("plugin call metrics after two passes (-want +got):\n%s", diff)
	}
}

// labelsOf returns the labels of mt by name.
func labelsOf(mt *dto.Metric) map[string]string {
	m := map[string]string{}
	for _, l := range mt.GetLabel() {
		m[l.GetName()] = l.GetValue()
	}
	return m
}

// TestMonitorsApart: Monitors that report to one registry under names of their own have
// series of their own, on every metric; Close removes a Monitor's gauges, whatever
// order it comes in, and keeps later passes out of them, while its counters and
// histograms and the other Monitor's series stay.
func TestMonitorsApart(t *testing.T) {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	metrics := prommetrics.New()
	require.NoError(t, metrics.Register(reg))
	tracker := func(p operations.Progress) operations.Tracker {
		return &operationstest.Tracker{ProgressFunc: func(context.Context, operations.Operation) (operations.Progress, error) { return p, nil }}
	}
	resolver := operationstest.Resolver(map[string]operations.Tracker{
		"done": tracker(operations.Progress{Completed: true}), "quiet": tracker(operations.Progress{}),
	})
	monitorWith := func(r *prommetrics.Reporter, runs int) *monitor.Monitor {
		store := memstore.New()
		for i := range runs {
			_, err := operations.StartRun(ctx, store, operations.Run{Owner: operations.Owner{Kind: phase.Backup, Name: fmt.Sprint("b", i)}, Created: t0},
				func(context.Context) (operations.MainRun, error) {
					return operations.MainRun{Operations: []operations.Operation{{Action: "quiet", ID: "1"}, {Action: "done", ID: "2"}}}, nil
				})
			require.NoError(t, err)
		}
		return monitor.New(store, resolver, append(r.MonitorOptions(), monitor.WithClock(clocktest.NewClock(t0)))...)
	}
	east, west := metrics.Reporter("east"), metrics.Reporter("west")
	me, mw := monitorWith(east, 2), monitorWith(west, 1)
	for _, m := range []*monitor.Monitor{me, mw} {
		_, err := m.RunOnce(ctx)
		require.NoError(t, err)
	}
	of := func(name string, runs, newOps float64, ended float64) map[string]float64 {
		s := map[string]float64{
			"itemops_operations_ended_total" + labelKey(map[string]string{"monitor": name, "phase": "Completed"}):                                      ended,
			"itemops_operations_ended_total" + labelKey(map[string]string{"monitor": name, "phase": "Failed"}):                                         0,
			"itemops_monitor_pass_duration_seconds" + labelKey(map[string]string{"monitor": name}):                                                     1,
			"itemops_plugin_call_duration_seconds" + labelKey(map[string]string{"monitor": name, "action": "done", "call": "progress"}):                ended,
			"itemops_plugin_call_duration_seconds" + labelKey(map[string]string{"monitor": name, "action": "quiet", "call": "progress"}):               ended,
			"itemops_plugin_calls_total" + labelKey(map[string]string{"monitor": name, "action": "done", "call": "progress", "outcome": "succeeded"}):  ended,
			"itemops_plugin_calls_total" + labelKey(map[string]string{"monitor": name, "action": "quiet", "call": "progress", "outcome": "succeeded"}): ended,
		}
		if runs > 0 {
			s["itemops_runs"+labelKey(map[string]string{"monitor": name, "kind": "Backup", "phase": "WaitingForPluginOperations"})] = runs
			s["itemops_operations"+labelKey(map[string]string{"monitor": name, "phase": "New"})] = newOps
			s["itemops_operations"+labelKey(map[string]string{"monitor": name, "phase": "InProgress"})] = 0
			s["itemops_operations_in_backoff"+labelKey(map[string]string{"monitor": name})] = 0
		}
		return s
	}
	want := of("east", 2, 2, 2)
	maps.Copy(want, of("west", 1, 1, 1))
	if diff := gocmp.Diff(want, series(t, reg)); diff != "" {
		t.Errorf("series of two Monitors (-want +got):\n%s", diff)
	}

	east.Close()
	east.Close() // idempotent
	want = of("east", 0, 0, 2)
	maps.Copy(want, of("west", 1, 1, 1))
	if diff := gocmp.Diff(want, series(t, reg)); diff != "" {
		t.Errorf("series after the east Monitor's Close (-want +got):\n%s", diff)
	}
	_, err := me.RunOnce(ctx) // a pass after Close counts, but shows in no gauge
	require.NoError(t, err)
	got := series(t, reg)
	require.NotContains(t, got, "itemops_runs"+labelKey(map[string]string{"monitor": "east", "kind": "Backup", "phase": "WaitingForPluginOperations"}))
	require.Equal(t, 2.0, got["itemops_monitor_pass_duration_seconds"+labelKey(map[string]string{"monitor": "east"})])
}

// series gathers reg: the value of each series by its name and labels (a histogram's
// sample count).
func series(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, f := range families {
		for _, mt := range f.GetMetric() {
			v := mt.GetCounter().GetValue() + mt.GetGauge().GetValue() + float64(mt.GetHistogram().GetSampleCount())
			got[f.GetName()+labelKey(labelsOf(mt))] = v
		}
	}
	return got
}

// TestStallsAndRetries drives a Monitor with a stall timeout and retry policies over
// four passes on a fake clock and checks, after each, the series of stalls, retries by
// outcome, and operations in backoff: an operation whose report never moves stalls at
// the end of its window; one whose plugin restarts is retried twice, waits in backoff
// between, and recovers; one runs out of attempts; one's error is not to be retried.
// Close then removes the gauge and keeps the counters.
func TestStallsAndRetries(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	restarting := operations.Retryable(errors.New("plugin restarting"))
	var flakyCalls int
	trackers := map[string]operations.Tracker{
		"stuck": &operationstest.Tracker{ProgressFunc: func(context.Context, operations.Operation) (operations.Progress, error) {
			return operations.Progress{NCompleted: 12, NTotal: 100}, nil
		}},
		"flaky": &operationstest.Tracker{ProgressFunc: func(context.Context, operations.Operation) (operations.Progress, error) {
			if flakyCalls++; flakyCalls <= 2 {
				return operations.Progress{}, restarting
			}
			return operations.Progress{Completed: true}, nil
		}},
		"down": &operationstest.Tracker{ProgressFunc: func(context.Context, operations.Operation) (operations.Progress, error) {
			return operations.Progress{}, restarting
		}},
		"broken": &operationstest.Tracker{ProgressFunc: func(context.Context, operations.Operation) (operations.Progress, error) {
			return operations.Progress{}, errors.New("snapshot class not found")
		}},
	}
	o := operations.Owner{Kind: phase.Backup, Name: "b1"}
	_, err := operations.StartRun(ctx, store, operations.Run{Owner: o, Created: t0}, func(context.Context) (operations.MainRun, error) {
		return operations.MainRun{Operations: []operations.Operation{{Action: "stuck", ID: "1"}, {Action: "flaky", ID: "2"},
			{Action: "down", ID: "3"}, {Action: "broken", ID: "4"}}}, nil
	})
	require.NoError(t, err)

	reg := prometheus.NewRegistry()
	metrics := prommetrics.New()
	require.NoError(t, metrics.Register(reg))
	clk := clocktest.NewClock(t0)
	reporter := metrics.Reporter("m")
	m := monitor.New(store, operationstest.Resolver(trackers), append(reporter.MonitorOptions(),
		monitor.WithClock(clk),
		monitor.WithActionStallTimeout("stuck", 30*time.Minute),
		monitor.WithRetryPolicy(monitor.RetryPolicy{InitialInterval: time.Minute, MaxAttempts: 5}),
		monitor.WithActionRetryPolicy("down", monitor.RetryPolicy{MaxAttempts: 1}))...)

	key := func(name string, kv ...string) string {
		labels := map[string]string{"monitor": "m"}
		for i := 0; i < len(kv); i += 2 {
			labels[kv[i]] = kv[i+1]
		}
		return name + labelKey(labels)
	}
	retries := func(action, outcome string) string {
		return key("itemops_operation_retries_total", "action", action, "outcome", outcome)
	}
	stalled, backoff := key("itemops_operations_stalled_total", "action", "stuck"), key("itemops_operations_in_backoff")
	steps := []struct {
		name    string
		advance time.Duration
		want    map[string]float64
	}{
		{"first pass: flaky errs, down runs out, broken is refused", 0, map[string]float64{
			retries("flaky", "scheduled"): 1, retries("down", "exhausted"): 1, retries("broken", "refused"): 1, backoff: 0}},
		{"30s on: flaky waits its minute in backoff", 30 * time.Second, map[string]float64{
			retries("flaky", "scheduled"): 1, retries("down", "exhausted"): 1, retries("broken", "refused"): 1, backoff: 1}},
		{"30m on: stuck stalls, flaky errs again", 30*time.Minute - 30*time.Second, map[string]float64{
			stalled: 1, retries("flaky", "scheduled"): 2, retries("down", "exhausted"): 1, retries("broken", "refused"): 1, backoff: 0}},
		{"10m more: flaky answers", 10 * time.Minute, map[string]float64{
			stalled: 1, retries("flaky", "scheduled"): 2, retries("flaky", "recovered"): 1, retries("down", "exhausted"): 1,
			retries("broken", "refused"): 1, backoff: 0}},
	}
	ours := func() map[string]float64 {
		got := map[string]float64{}
		for k, v := range series(t, reg) {
			if strings.HasPrefix(k, "itemops_operations_stalled_total") || strings.HasPrefix(k, "itemops_operation_retries_total") ||
				strings.HasPrefix(k, "itemops_operations_in_backoff") {
				got[k] = v
			}
		}
		return got
	}
	for _, step := range steps {
		clk.Advance(step.advance)
		_, err := m.RunOnce(ctx)
		require.NoError(t, err, step.name)
		if diff := gocmp.Diff(step.want, ours()); diff != "" {
			t.Errorf("%s: series (-want +got):\n%s", step.name, diff)
		}
	}
	reporter.Close()
	want := steps[len(steps)-1].want
	delete(want, backoff)
	if diff := gocmp.Diff(want, ours()); diff != "" {
		t.Errorf("after Close: series (-want +got):\n%s", diff)
	}
	ops, err := store.ListOperations(ctx, o, operations.OperationFilter{})
	require.NoError(t, err)
	phases := map[string]operations.OperationPhase{}
	for _, op := range ops {
		phases[op.Action] = op.Status.Phase
	}
	require.Equal(t, map[string]operations.OperationPhase{"stuck": operations.OperationFailed, "flaky": operations.OperationCompleted,
		"down": operations.OperationFailed, "broken": operations.OperationFailed}, phases)
}
