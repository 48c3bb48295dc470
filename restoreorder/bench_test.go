package restoreorder_test

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"runtime"
	"sort"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/itemops/itemops/restoreorder"
)

// synthSource is a synthetic backup of resources × namespaces × items, all built before
// any benchmark timer starts: every name, path and list exists up front, so a benchmark
// of Collect measures what Collect itself allocates, not the names.
type synthSource struct {
	resources  []string
	namespaces []string
	entries    map[string]map[string][]restoreorder.Entry
	bodies     [2][]byte // JSON of items labelled app=web (even) and app=db (odd)
}

var _ restoreorder.Source = (*synthSource)(nil)

func newSynthSource(resources, namespaces, perNamespace int) *synthSource {
	s := &synthSource{entries: map[string]map[string][]restoreorder.Entry{}}
	for r := range resources {
		s.resources = append(s.resources, fmt.Sprintf("kind%02d.example.com", r))
	}
	for n := range namespaces {
		s.namespaces = append(s.namespaces, fmt.Sprintf("ns-%03d", n))
	}
	sort.Strings(s.resources)
	for _, r := range s.resources {
		byNS := map[string][]restoreorder.Entry{}
		for _, ns := range s.namespaces {
			list := make([]restoreorder.Entry, perNamespace)
			for i := range list {
				name := fmt.Sprintf("item-%07d", i)
				list[i] = restoreorder.Entry{Name: name, Path: "resources/" + r + "/namespaces/" + ns + "/" + name + ".json"}
			}
			byNS[ns] = list
		}
		s.entries[r] = byNS
	}
	s.bodies[0] = objectJSON("x", "ns", map[string]string{"app": "web"})
	s.bodies[1] = objectJSON("x", "ns", map[string]string{"app": "db"})
	return s
}

func (s *synthSource) Resources(context.Context) ([]string, error) { return s.resources, nil }
func (s *synthSource) Namespaces(context.Context, string) ([]string, error) {
	return s.namespaces, nil
}
func (s *synthSource) Items(_ context.Context, r, ns string) ([]restoreorder.Entry, error) {
	return s.entries[r][ns], nil
}

// parity is the item number's last digit, read from the path ("...item-0000042.json").
func parity(path string) int { return int(path[len(path)-6]-'0') % 2 }

func (s *synthSource) Open(_ context.Context, path string) (io.ReadCloser, error) {
	if len(path) < 6 {
		return nil, fs.ErrNotExist
	}
	return io.NopCloser(&bytesReader{b: s.bodies[parity(path)]}), nil
}

// bytesReader is a bytes.Reader without the allocation of bytes.NewReader's pointer
// escaping through an interface twice.
type bytesReader struct {
	b []byte
	i int
}

func (r *bytesReader) Read(p []byte) (int, error) {
	if r.i >= len(r.b) {
		return 0, io.EOF
	}
	n := copy(p, r.b[r.i:])
	r.i += n
	return n, nil
}

// synthLabelSource serves labels without reading items: half app=web, half app=db.
type synthLabelSource struct{ *synthSource }

var (
	webLabels = map[string]string{"app": "web"}
	dbLabels  = map[string]string{"app": "db"}
)

func (s synthLabelSource) Labels(_ context.Context, path string) (map[string]string, error) {
	if parity(path) == 0 {
		return webLabels, nil
	}
	return dbLabels, nil
}

// veleroStyle collects the way the restore-progress design sketches it: per resource, a
// map from original namespace to a slice of items appended one by one. It is the
// baseline for Collect.
func veleroStyle(ctx context.Context, src restoreorder.Source, f func(ns string) (string, bool)) (int, error) {
	type restoreItem struct{ targetNamespace, name, path string }
	type restoreResource struct {
		resource         string
		itemsByNamespace map[string][]restoreItem
		totalItems       int
	}
	resources, err := src.Resources(ctx)
	if err != nil {
		return 0, err
	}
	var collected []restoreResource
	total := 0
	for _, r := range resources {
		rr := restoreResource{resource: r, itemsByNamespace: map[string][]restoreItem{}}
		nss, err := src.Namespaces(ctx, r)
		if err != nil {
			return 0, err
		}
		for _, ns := range nss {
			target, ok := f(ns)
			if !ok {
				continue
			}
			entries, err := src.Items(ctx, r, ns)
			if err != nil {
				return 0, err
			}
			for _, e := range entries {
				rr.itemsByNamespace[ns] = append(rr.itemsByNamespace[ns], restoreItem{targetNamespace: target, name: e.Name, path: e.Path})
				rr.totalItems++
			}
		}
		collected = append(collected, rr)
		total += rr.totalItems
	}
	benchSink = collected
	return total, nil
}

// benchSink keeps a benchmark's result alive, so the compiler cannot drop the work.
var benchSink any

// BenchmarkCollect runs pass one over a synthetic backup of 1,000,000 items (20
// resources × 50 namespaces × 1,000 items). ns/item and B/item divide by the items
// examined. Names and paths are built before the timer starts, so B/item is what the
// collector allocates beyond the item names themselves.
//
//	impl=velero-style: the design's map of namespace → appended items (baseline)
//	impl=collect: Collect, zero filter: every item kept
//	impl=collect/namespaces: half the namespaces, mapped elsewhere
//	impl=collect/labels: a label selector keeping half the items, labels from a LabelSource
//	impl=collect/labels-from-json: the same, labels decoded from each item's JSON
func BenchmarkCollect(b *testing.B) {
	const resources, namespaces, perNamespace = 20, 50, 1000
	const items = resources * namespaces * perNamespace
	src := newSynthSource(resources, namespaces, perNamespace)
	ctx := context.Background()
	web, err := labels.Parse("app=web")
	if err != nil {
		b.Fatal(err)
	}
	half := src.namespaces[:namespaces/2]
	mapping := map[string]string{}
	for _, ns := range half {
		mapping[ns] = ns + "-restored"
	}
	run := func(b *testing.B, collect func() (int, error), want int) {
		b.Helper()
		b.ReportAllocs()
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			n, err := collect()
			if err != nil {
				b.Fatal(err)
			}
			if n != want {
				b.Fatalf("collected %d items, want %d", n, want)
			}
		}
		b.StopTimer()
		runtime.ReadMemStats(&after)
		perOp := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		b.ReportMetric(perOp/items, "ns/item")
		b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N)/items, "B/item")
	}
	collect := func(src restoreorder.Source, f restoreorder.Filter) func() (int, error) {
		return func() (int, error) {
			c, err := restoreorder.Collect(ctx, src, restoreorder.DefaultPriorities(), f)
			return c.Total(), err
		}
	}
	b.Run("impl=velero-style", func(b *testing.B) {
		run(b, func() (int, error) {
			return veleroStyle(ctx, src, func(ns string) (string, bool) { return ns, true })
		}, items)
	})
	b.Run("impl=collect", func(b *testing.B) {
		run(b, collect(src, restoreorder.Filter{}), items)
	})
	b.Run("impl=velero-style/namespaces", func(b *testing.B) {
		run(b, func() (int, error) {
			return veleroStyle(ctx, src, func(ns string) (string, bool) {
				t, ok := mapping[ns]
				return t, ok
			})
		}, items/2)
	})
	b.Run("impl=collect/namespaces", func(b *testing.B) {
		run(b, collect(src, restoreorder.Filter{IncludedNamespaces: half, NamespaceMapping: mapping}), items/2)
	})
	b.Run("impl=collect/labels", func(b *testing.B) {
		run(b, collect(synthLabelSource{src}, restoreorder.Filter{LabelSelector: web}), items/2)
	})
	b.Run("impl=collect/labels-from-json", func(b *testing.B) {
		run(b, collect(src, restoreorder.Filter{LabelSelector: web}), items/2)
	})
}

// BenchmarkItems walks a collection of 1,000,000 items in pass-two order.
func BenchmarkItems(b *testing.B) {
	const items = 20 * 50 * 1000
	src := newSynthSource(20, 50, 1000)
	c, err := restoreorder.Collect(context.Background(), src, restoreorder.DefaultPriorities(), restoreorder.Filter{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for i := 0; i < b.N; i++ {
		for it := range c.Items() {
			n += len(it.Name)
		}
	}
	b.StopTimer()
	if n == 0 {
		b.Fatal("walked nothing")
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/items, "ns/item")
}
