package opsfile_test

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/itemops/itemops/internal/testutil/cputime"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/opsfile"
	"github.com/itemops/itemops/phase"
)

// The codec benchmarks compare, in one run, the streaming codec with the plain approach
// Velero's own code takes: json.Marshal of the whole slice then gzip, and io.ReadAll of
// the gunzipped file then json.Unmarshal into a slice of Velero's types. Besides time
// and allocations each reports peak-MiB: the most heap the run held above what was live
// before it (the input), sampled every millisecond, and cpu-ns/op: the CPU time of the
// whole process (garbage collection included) per operation, which other work on a
// shared machine disturbs less than the wall time of ns/op. B/op counts all allocation,
// garbage included; peak-MiB is what the process needs. See docs/BENCHMARKS.md.

// heapSampler records the peak of the heap's object bytes while a benchmark runs, and
// the process's CPU time.
type heapSampler struct {
	stop, done chan struct{}
	base, peak uint64
	cpu        time.Duration
}

func startHeapSampler() *heapSampler {
	runtime.GC()
	s := &heapSampler{stop: make(chan struct{}), done: make(chan struct{})}
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 {
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	s.base = read()
	s.cpu = cputime.Used()
	go func() {
		defer close(s.done)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			if h := read(); h > s.peak {
				s.peak = h
			}
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// report stops the sampler and reports the peak above the base, in MiB, and the CPU
// time per operation.
func (s *heapSampler) report(b *testing.B) {
	if cpu := cputime.Used(); cpu >= 0 && s.cpu >= 0 {
		b.ReportMetric(float64(cpu-s.cpu)/float64(b.N), "cpu-ns/op")
	}
	close(s.stop)
	<-s.done
	var above uint64
	if s.peak > s.base {
		above = s.peak - s.base
	}
	b.ReportMetric(float64(above)/(1<<20), "peak-MiB")
}

// sinks keep results alive so that the compiler cannot drop the work.
var (
	sinkOps    []operations.Operation
	sinkVelero []veleroBackupOperation
	sinkOp     operations.Operation
)

func BenchmarkEncode(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		ops := manyOps(phase.Backup, n)
		velero := veleroSlice(ops).([]veleroBackupOperation)
		size := int64(len(veleroJSON(b, ops)))

		b.Run(fmt.Sprintf("records=%d/impl=plain", n), func(b *testing.B) {
			b.SetBytes(size)
			b.ReportAllocs()
			s := startHeapSampler()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				data, err := json.Marshal(velero)
				if err != nil {
					b.Fatal(err)
				}
				zw := gzip.NewWriter(io.Discard)
				if _, err := zw.Write(append(data, '\n')); err != nil {
					b.Fatal(err)
				}
				if err := zw.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			s.report(b)
		})
		b.Run(fmt.Sprintf("records=%d/impl=streaming", n), func(b *testing.B) {
			b.SetBytes(size)
			b.ReportAllocs()
			s := startHeapSampler()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				e := opsfile.NewEncoder(io.Discard, phase.Backup)
				for _, op := range ops {
					if err := e.Encode(op); err != nil {
						b.Fatal(err)
					}
				}
				if err := e.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			s.report(b)
		})
	}
}

// benchFile writes n backup operations to a file for the decode benchmarks and returns
// its path and the size of its JSON text. The operations are not kept, so that the heap
// a benchmark starts from holds neither them nor the file.
func benchFile(b *testing.B, n int) (string, int64) {
	ops := manyOps(phase.Backup, n)
	path := filepath.Join(b.TempDir(), "itemoperations.json.gz")
	if err := os.WriteFile(path, encode(b, ops), 0o600); err != nil {
		b.Fatal(err)
	}
	return path, int64(len(veleroJSON(b, ops)))
}

func open(b *testing.B, path string) *os.File {
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	return f
}

func BenchmarkDecode(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		path, size := benchFile(b, n)

		b.Run(fmt.Sprintf("records=%d/impl=plain", n), func(b *testing.B) {
			b.SetBytes(size)
			b.ReportAllocs()
			s := startHeapSampler()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				sinkVelero = nil // keep one result alive at a time
				f := open(b, path)
				zr, err := gzip.NewReader(f)
				if err != nil {
					b.Fatal(err)
				}
				data, err := io.ReadAll(zr)
				if err != nil {
					b.Fatal(err)
				}
				var out []veleroBackupOperation
				if err := json.Unmarshal(data, &out); err != nil {
					b.Fatal(err)
				}
				f.Close()
				sinkVelero = out
			}
			b.StopTimer()
			sinkVelero = nil
			s.report(b)
		})
		// Decode keeps every record, as the plain approach does.
		b.Run(fmt.Sprintf("records=%d/impl=Decode", n), func(b *testing.B) {
			b.SetBytes(size)
			b.ReportAllocs()
			s := startHeapSampler()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				sinkOps = nil // keep one result alive at a time
				f := open(b, path)
				out, err := opsfile.Decode(f)
				if err != nil {
					b.Fatal(err)
				}
				f.Close()
				sinkOps = out
			}
			b.StopTimer()
			sinkOps = nil
			s.report(b)
		})
		// Next looks at each record and keeps none, as a caller that filters or counts
		// does: its peak must not grow with the number of records.
		b.Run(fmt.Sprintf("records=%d/impl=Next", n), func(b *testing.B) {
			b.SetBytes(size)
			b.ReportAllocs()
			s := startHeapSampler()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				f := open(b, path)
				d, err := opsfile.NewDecoder(f)
				if err != nil {
					b.Fatal(err)
				}
				for {
					op, err := d.Next()
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					sinkOp = op
				}
				f.Close()
			}
			b.StopTimer()
			s.report(b)
		})
	}
}
