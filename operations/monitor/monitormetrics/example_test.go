package monitormetrics_test

import (
	"fmt"

	"github.com/itemops/itemops/operations/monitor/monitormetrics"
)

// Each metric's one name, and the Prometheus name derived from it.
func ExampleMetric_PrometheusName() {
	for _, m := range monitormetrics.All() {
		if m.Instrument != monitormetrics.Gauge {
			fmt.Printf("%-29s %-9s %-37s %v\n", m.Name, m.Instrument, m.PrometheusName(), m.Labels)
		}
	}
	// Output:
	// itemops.operations.ended      counter   itemops_operations_ended_total        [phase]
	// itemops.operations.timed_out  counter   itemops_operations_timed_out_total    [action]
	// itemops.operations.stalled    counter   itemops_operations_stalled_total      [action]
	// itemops.operation.retries     counter   itemops_operation_retries_total       [action outcome]
	// itemops.monitor.pass.duration histogram itemops_monitor_pass_duration_seconds []
	// itemops.plugin.call.duration  histogram itemops_plugin_call_duration_seconds  [action call]
	// itemops.plugin.calls          counter   itemops_plugin_calls_total            [action call outcome]
	// itemops.finalizer.failures    counter   itemops_finalizer_failures_total      [kind]
}
