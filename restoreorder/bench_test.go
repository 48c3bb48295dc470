package restoreorder_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/itemops/itemops/internal/testutil/cputime"
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

// benchTarball writes a backup of items. In pax format it is written as cmd/itemops
// writes its backups, modification times to the nanosecond, so that every entry has a
// pax header; in ustar format, every entry is one header block and its data.
func benchTarball(b *testing.B, format tar.Format, items int, body func(i int) []byte) []byte {
	b.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	mtime := time.Unix(1700000000, 0)
	if format == tar.FormatPAX {
		mtime = mtime.Add(123456789)
	}
	for i := range items {
		data := body(i)
		name := fmt.Sprintf("resources/kind%02d.example.com/namespaces/ns-%03d/item-%07d.json", i%20, i/20%50, i)
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: mtime, Format: format}
		if err := tw.WriteHeader(hdr); err != nil {
			b.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			b.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		b.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

// readWithArchiveTar reads every entry of a .tar.gz into memory with archive/tar alone,
// checking nothing: the baseline of the FromTarGz benchmarks.
func readWithArchiveTar(archive []byte) (int, error) {
	zr, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		return 0, err
	}
	tr := tar.NewReader(zr)
	data := map[string][]byte{}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return len(data), nil
		}
		if err != nil {
			return 0, err
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return 0, err
		}
		data[hdr.Name] = b
	}
}

// BenchmarkFromTarGz reads backup tarballs with FromTarGz, each beside the same tarball
// read with archive/tar alone (impl=archive-tar: every entry into a map, nothing
// checked), so that what FromTarGz adds is a ratio:
//
//	tarball=realistic: 5,000 items of about 1.3 KiB of JSON, as cmd/itemops writes them
//	tarball=million-entries: 1,000,000 items of "{}", ustar (13.4 MB of gzip)
//	impl=fromtargz/limit=64MiB: refused once the entries pass the limit
//
// and, with no limit, the refusal of a header that declares 4 GiB over an entry cut
// after 1 MiB of spaces (2 KB of gzip), beside the same bytes under a header that
// declares one byte more than they are.
func BenchmarkFromTarGz(b *testing.B) {
	pad := strings.Repeat("x", 1200)
	realistic := benchTarball(b, tar.FormatPAX, 5000, func(i int) []byte {
		return []byte(fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"item-%07d","namespace":"ns-%03d","labels":{"app":"web"}},"data":{"k":"%s"}}`, i, i/20%50, pad))
	})
	var million []byte // built by the first benchmark that reads it
	millionEntries := func(b *testing.B) []byte {
		if million == nil {
			million = benchTarball(b, tar.FormatUSTAR, 1_000_000, func(int) []byte { return []byte("{}") })
		}
		return million
	}
	run := func(b *testing.B, read func() (int, error), want int, wantErr error) {
		cputime.PerOp(b)
		for i := 0; i < b.N; i++ {
			n, err := read()
			if !errors.Is(err, wantErr) || (wantErr == nil && n != want) {
				b.Fatalf("read %d items, %v; want %d, %v", n, err, want, wantErr)
			}
		}
	}
	fromTarGz := func(archive []byte, opts ...restoreorder.TarGzOption) func() (int, error) {
		return func() (int, error) {
			src, err := restoreorder.FromTarGz(bytes.NewReader(archive), opts...)
			if err != nil {
				return 0, err
			}
			c, err := restoreorder.Collect(context.Background(), src, restoreorder.Priorities{}, restoreorder.Filter{})
			if err != nil {
				return 0, err
			}
			return c.Total(), nil
		}
	}
	for _, tc := range []struct {
		name    string
		archive func(b *testing.B) []byte
		items   int
	}{
		{name: "tarball=realistic", archive: func(*testing.B) []byte { return realistic }, items: 5000},
		{name: "tarball=million-entries", archive: millionEntries, items: 1_000_000},
	} {
		b.Run(tc.name+"/impl=archive-tar", func(b *testing.B) {
			archive := tc.archive(b)
			run(b, func() (int, error) { return readWithArchiveTar(archive) }, tc.items, nil)
		})
		b.Run(tc.name+"/impl=fromtargz", func(b *testing.B) {
			archive := tc.archive(b)
			run(b, fromTarGz(archive), tc.items, nil)
		})
	}
	b.Run("tarball=million-entries/impl=fromtargz/limit=64MiB", func(b *testing.B) {
		archive := millionEntries(b)
		run(b, fromTarGz(archive, restoreorder.WithMaxBytes(64<<20)), 0, restoreorder.ErrTooLarge)
	})

	declared := func(size int64) []byte {
		var raw bytes.Buffer
		tw := tar.NewWriter(&raw)
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "resources/pods/cluster/x.json", Mode: 0o644, Size: size}); err != nil {
			b.Fatal(err)
		}
		body := "{" + strings.Repeat(" ", 1<<20)
		if _, err := tw.Write([]byte(body)); err != nil {
			b.Fatal(err)
		}
		// The writer is not closed: the entry is cut after its bytes, honest or not.
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		if _, err := zw.Write(raw.Bytes()); err != nil {
			b.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			b.Fatal(err)
		}
		return buf.Bytes()
	}
	b.Run("declared=1MiB+2", func(b *testing.B) {
		run(b, fromTarGz(declared(1<<20+2), restoreorder.WithMaxBytes(0)), 0, restoreorder.ErrMalformed)
	})
	b.Run("declared=4GiB", func(b *testing.B) {
		run(b, fromTarGz(declared(4<<30), restoreorder.WithMaxBytes(0)), 0, restoreorder.ErrMalformed)
	})
}
