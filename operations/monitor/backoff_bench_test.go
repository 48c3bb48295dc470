package monitor_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
)

// idleTracker answers every Progress at once, with a report that leaves the operations
// of benchStore as they are, and counts its calls.
type idleTracker struct{ calls atomic.Int64 }

func (t *idleTracker) Progress(context.Context, operations.Operation) (operations.Progress, error) {
	t.calls.Add(1)
	return operations.Progress{}, nil
}

func (t *idleTracker) Cancel(context.Context, operations.Operation) error { return nil }

// BenchmarkMonitorPassBackoff measures a pass (RunOnce) over 10,000 operations in 100
// runs whose plugin answers at once with nothing new, so that no pass writes:
//
//   - state=due: under a retry policy, every operation due, so each is asked;
//   - state=backoff: under the same policy, every operation waiting an hour for its
//     next poll after an error, so that the pass lists and decodes them and asks none;
//   - state=off: no option, every operation asked, as a Monitor without the policy.
//
// calls/op and writes/op count the plugin calls and the PutOperations of a pass.
func BenchmarkMonitorPassBackoff(b *testing.B) {
	const runs, perRun = 100, 100
	policy := monitor.RetryPolicy{InitialInterval: time.Hour, MaxAttempts: 10}
	for _, state := range []string{"due", "backoff", "off"} {
		b.Run("state="+state, func(b *testing.B) {
			ctx := context.Background()
			s, owners := benchStore(b, runs, perRun)
			var opts []monitor.Option
			if state != "off" {
				opts = append(opts, monitor.WithRetryPolicy(policy))
			}
			if state == "backoff" {
				now := time.Now().UTC()
				for _, o := range owners {
					ops, err := s.ListOperations(ctx, o, operations.OperationFilter{})
					if err != nil {
						b.Fatal(err)
					}
					for i := range ops {
						ops[i].Monitor = operations.MonitorState{Attempts: 1, ErrorSince: now, NextPoll: now.Add(time.Hour), LastError: "unavailable"}
					}
					if err := s.PutOperations(ctx, o, ops); err != nil {
						b.Fatal(err)
					}
				}
				s.puts.Store(0)
			}
			tr := &idleTracker{}
			m := monitor.New(s, operations.ResolverFunc(func(string) (operations.Tracker, error) { return tr, nil }), opts...)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := m.RunOnce(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(tr.calls.Load())/float64(b.N), "calls/op")
			b.ReportMetric(float64(s.puts.Load())/float64(b.N), "writes/op")
		})
	}
}
