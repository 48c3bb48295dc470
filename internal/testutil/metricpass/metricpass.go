// Package metricpass is one pass of a Monitor over plugins that complete, fail, panic,
// hang, time out and retry, with a failing finalizer, and the table of what the metrics
// of operations/monitor/monitormetrics show after it, so that every exporter of those
// metrics (prommetrics in integrations/controllerruntime, integrations/otel) is held to
// the same table: each test drives the pass through its exporter, reads back what the
// exporter holds, and compares it with [Want].
package metricpass

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/itemops/itemops/clock/clocktest"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/operations/operationstest"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/memstore"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// Run stores three backup runs waiting for their operations in a new memstore, makes a
// Monitor over them with opts (those of the exporter under test) after its own, and
// makes one pass with RunOnce, which must report only the finalizer's error.
func Run(t testing.TB, opts ...monitor.Option) {
	t.Helper()
	ctx := context.Background()
	store := memstore.New()
	answer := func(p operations.Progress, err error) *operationstest.Tracker {
		return &operationstest.Tracker{ProgressFunc: func(context.Context, operations.Operation) (operations.Progress, error) { return p, err }}
	}
	trackers := map[string]operations.Tracker{
		"ok":    answer(operations.Progress{Completed: true}, nil),
		"err":   answer(operations.Progress{}, errors.New("unreachable")),
		"slow":  answer(operations.Progress{}, nil), // still running, past its timeout
		"quiet": answer(operations.Progress{}, nil), // still running
		"flaky": answer(operations.Progress{}, operations.Retryable(errors.New("plugin restarting"))),
		"panic": &operationstest.Tracker{ProgressFunc: func(context.Context, operations.Operation) (operations.Progress, error) {
			panic("boom")
		}},
		"hang": &operationstest.Tracker{ProgressFunc: func(ctx context.Context, _ operations.Operation) (operations.Progress, error) {
			<-ctx.Done()
			return operations.Progress{}, ctx.Err()
		}},
	}
	start := func(name string, ops ...operations.Operation) {
		o := operations.Owner{Kind: phase.Backup, Name: name}
		_, err := operations.StartRun(ctx, store, operations.Run{Owner: o, Created: t0}, func(context.Context) (operations.MainRun, error) {
			return operations.MainRun{Operations: ops}, nil
		})
		if err != nil {
			t.Fatalf("StartRun %s: %v", name, err)
		}
	}
	start("b1", operations.Operation{Action: "ok", ID: "1"}, operations.Operation{Action: "err", ID: "2"},
		operations.Operation{Action: "panic", ID: "3"}, operations.Operation{Action: "hang", ID: "4"},
		operations.Operation{Action: "slow", ID: "5", Status: operations.Status{Created: t0.Add(-5 * time.Hour)}})
	start("b2", operations.Operation{Action: "ok", ID: "1"})
	start("b3", operations.Operation{Action: "quiet", ID: "1"}, operations.Operation{Action: "flaky", ID: "2"})

	opts = append([]monitor.Option{
		monitor.WithClock(clocktest.NewClock(t0)),
		monitor.WithCallTimeout(20 * time.Millisecond),
		monitor.WithActionRetryPolicy("flaky", monitor.RetryPolicy{MaxAttempts: 5}),
		monitor.WithFinalizer(monitor.FinalizerFunc(func(context.Context, operations.Run, []operations.ResourceIdentifier) error {
			return errors.New("object store unavailable")
		})),
	}, opts...)
	m := monitor.New(store, operationstest.Resolver(trackers), opts...)
	_, err := m.RunOnce(ctx)
	if err == nil || !strings.Contains(err.Error(), "object store unavailable") {
		t.Fatalf("RunOnce = %v, want the finalizer's error", err)
	}
}

// Want returns what the metrics show after [Run]'s pass, by [Key]: a counter's or a
// gauge's value, and a histogram's number of observations (their durations are real
// time, which no test asserts). Every series the pass makes is in it, those of value
// zero included, and no other.
func Want() map[string]float64 {
	return maps.Clone(want)
}

var want = map[string]float64{
	// As the pass found the runs: all three waiting.
	Key("itemops.runs", "kind", "Backup", "phase", "WaitingForPluginOperations"): 3,
	// b3's quiet operation, never started, and flaky's, whose error is retried.
	Key("itemops.operations", "phase", "New"):                                                  2,
	Key("itemops.operations", "phase", "InProgress"):                                           0,
	Key("itemops.operations.ended", "phase", "Completed"):                                      2, // ok, twice
	Key("itemops.operations.ended", "phase", "Failed"):                                         4, // err, panic, hang, slow
	Key("itemops.operations.in_backoff"):                                                       0, // flaky waits from the next pass on
	Key("itemops.operations.timed_out", "action", "slow"):                                      1,
	Key("itemops.operation.retries", "action", "flaky", "outcome", "scheduled"):                1,
	Key("itemops.monitor.pass.duration"):                                                       1,
	Key("itemops.plugin.call.duration", "action", "err", "call", "progress"):                   1,
	Key("itemops.plugin.call.duration", "action", "flaky", "call", "progress"):                 1,
	Key("itemops.plugin.call.duration", "action", "hang", "call", "progress"):                  1,
	Key("itemops.plugin.call.duration", "action", "ok", "call", "progress"):                    2,
	Key("itemops.plugin.call.duration", "action", "panic", "call", "progress"):                 1,
	Key("itemops.plugin.call.duration", "action", "quiet", "call", "progress"):                 1,
	Key("itemops.plugin.call.duration", "action", "slow", "call", "cancel"):                    1,
	Key("itemops.plugin.call.duration", "action", "slow", "call", "progress"):                  1,
	Key("itemops.plugin.calls", "action", "err", "call", "progress", "outcome", "errored"):     1,
	Key("itemops.plugin.calls", "action", "flaky", "call", "progress", "outcome", "errored"):   1,
	Key("itemops.plugin.calls", "action", "hang", "call", "progress", "outcome", "timed_out"):  1,
	Key("itemops.plugin.calls", "action", "ok", "call", "progress", "outcome", "succeeded"):    2,
	Key("itemops.plugin.calls", "action", "panic", "call", "progress", "outcome", "panicked"):  1,
	Key("itemops.plugin.calls", "action", "quiet", "call", "progress", "outcome", "succeeded"): 1,
	Key("itemops.plugin.calls", "action", "slow", "call", "cancel", "outcome", "succeeded"):    1,
	Key("itemops.plugin.calls", "action", "slow", "call", "progress", "outcome", "succeeded"):  1,
	Key("itemops.finalizer.failures", "kind", "Backup"):                                        2, // b1 and b2 both reach finalizing
}

// Key returns the key of a series in [Want]: the metric's name in OpenTelemetry's
// spelling, then its labels, given as name and value in turn, sorted by name:
// itemops.plugin.calls{action=ok,call=progress,outcome=succeeded}.
func Key(metric string, labels ...string) string {
	kv := make([]string, 0, len(labels)/2)
	for i := 0; i+1 < len(labels); i += 2 {
		kv = append(kv, labels[i]+"="+labels[i+1])
	}
	slices.Sort(kv)
	return metric + "{" + strings.Join(kv, ",") + "}"
}
