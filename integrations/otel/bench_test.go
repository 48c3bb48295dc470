package otel_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	itemotel "github.com/itemops/itemops/integrations/otel"
	"github.com/itemops/itemops/internal/testutil/scalebench"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/memstore"
)

// BenchmarkTracedPass is the workload of operations/monitor's BenchmarkMonitorPass
// (impl=monitor-64): 10,000 InProgress operations across 100 waiting runs on memstore, a
// plugin (scalebench.Moving) that takes 2 ms per Progress call, a Monitor of 64
// workers. One op is one pass, a RunOnce, so that the pass and its runs have spans (the
// benchmark in operations/monitor polls each run with Poll). It runs untraced
// (tracing=off), then traced (tracing=on): every span recorded by the SDK's tracer
// provider, always sampling, through its batch span processor to an exporter that
// drops them. latency=0 is the same with a plugin that answers at once, which shows
// what tracing costs per call when nothing hides it.
//
//	go test ./integrations/otel -run '^$' -bench TracedPass -benchtime 3x -count 6 -benchmem
func BenchmarkTracedPass(b *testing.B) {
	for _, latency := range []time.Duration{2 * time.Millisecond, 0} {
		for _, traced := range []bool{false, true} {
			name := fmt.Sprintf("latency=%s/tracing=off", latency)
			if traced {
				name = fmt.Sprintf("latency=%s/tracing=on", latency)
			}
			b.Run(name, func(b *testing.B) {
				s := benchStore(b, 100, 100)
				tr := &scalebench.Moving{Latency: latency}
				opts := []monitor.Option{monitor.WithWorkers(64)}
				if traced {
					provider := sdktrace.NewTracerProvider(
						sdktrace.WithSampler(sdktrace.AlwaysSample()),
						sdktrace.WithSpanProcessor(sdktrace.NewBatchSpanProcessor(tracetest.NewNoopExporter())))
					defer func() { _ = provider.Shutdown(context.Background()) }()
					opts = append(opts, itemotel.Options(itemotel.WithTracerProvider(provider))...)
				}
				m := monitor.New(s, operations.ResolverFunc(func(string) (operations.Tracker, error) { return tr, nil }), opts...)
				ctx := context.Background()
				b.ReportAllocs()
				b.ResetTimer()
				start := time.Now()
				for range b.N {
					st, err := m.RunOnce(ctx)
					if err != nil || st.Operations != 100*100 {
						b.Fatalf("pass: %d operations, %v", st.Operations, err)
					}
				}
				b.ReportMetric(float64(100*100*b.N)/time.Since(start).Seconds(), "ops/s")
			})
		}
	}
}

// benchStore returns a memstore holding runs waiting runs of perRun InProgress
// operations each, as BenchmarkMonitorPass's store does.
func benchStore(b *testing.B, runs, perRun int) *memstore.Store {
	ctx := context.Background()
	s := memstore.New()
	t := time.Now()
	for i := range runs {
		o := operations.Owner{Kind: phase.Backup, Name: fmt.Sprintf("backup-%03d", i)}
		r := operations.Run{Owner: o, Phase: phase.New}
		if err := r.SetPhase(phase.WaitingForPluginOperations, "bench", t); err != nil {
			b.Fatal(err)
		}
		if err := s.CreateRun(ctx, r); err != nil {
			b.Fatal(err)
		}
		ops := make([]operations.Operation, perRun)
		for j := range ops {
			ops[j] = operations.Operation{Owner: o, Action: "mover", ID: fmt.Sprintf("op-%03d", j),
				Status: operations.Status{Phase: operations.OperationInProgress, Created: t}}
		}
		if err := s.PutOperations(ctx, o, ops); err != nil {
			b.Fatal(err)
		}
	}
	return s
}
