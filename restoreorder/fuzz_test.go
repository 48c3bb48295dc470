package restoreorder_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"slices"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/itemops/itemops/restoreorder"
)

// The vocabulary FuzzCollect draws backups from: two resources share a name across
// groups (so "widgets" is ambiguous), some resources are cluster-scoped, and namespace
// objects are named like the namespaces.
var (
	fuzzResources = []string{
		"pods", "configmaps", "deployments.apps", "namespaces", "widgets.a.io", "widgets.b.io",
		"secrets", "persistentvolumes", "storageclasses.storage.k8s.io", "clusters.cluster.x-k8s.io",
	}
	fuzzNamespaces = []string{"", "a", "b", "c"}
	fuzzNames      = []string{"x", "y", "z", "a", "b", "c"}
	fuzzLabels     = []map[string]string{nil, {"app": "web"}, {"app": "db"}, {"app": "web", "tier": "be"}}
)

// fuzzItems turns bytes into items, four bytes each.
func fuzzItems(spec []byte) []memItem {
	var items []memItem
	for i := 0; i+3 < len(spec) && len(items) < 200; i += 4 {
		it := memItem{
			resource:  fuzzResources[int(spec[i])%len(fuzzResources)],
			namespace: fuzzNamespaces[int(spec[i+1])%len(fuzzNamespaces)],
			name:      fuzzNames[int(spec[i+2])%len(fuzzNames)],
			labels:    fuzzLabels[int(spec[i+3])%len(fuzzLabels)],
		}
		if it.resource == "namespaces" {
			it.namespace = ""
		}
		items = append(items, it)
	}
	return items
}

// fuzzFilter turns bits into a Filter that may use every rule.
func fuzzFilter(t *testing.T, bits uint64) restoreorder.Filter {
	pick := func(shift uint) uint64 { return (bits >> shift) & 3 }
	var f restoreorder.Filter
	f.IncludedResources = [][]string{nil, {"pods", "widgets"}, {"*"}, {"configmaps", "namespaces", "storageclasses"}}[pick(0)]
	f.ExcludedResources = [][]string{nil, {"pods"}, {"*"}, {"deployments"}}[pick(2)]
	f.IncludedNamespaces = [][]string{nil, {"a"}, {"*"}, {"a", "b"}}[pick(4)]
	f.ExcludedNamespaces = [][]string{nil, {"b"}, {"*"}, {"c"}}[pick(6)]
	f.IncludeClusterResources = []*bool{nil, ptr(true), ptr(false), nil}[pick(8)]
	f.NamespaceObjectsFollowNamespaces = (bits>>14)&1 == 1
	switch pick(10) {
	case 1:
		f.LabelSelector = selector(t, "app=web")
	case 2:
		f.LabelSelector = selector(t, "tier")
	case 3:
		f.LabelSelector = labels.Everything()
	}
	switch pick(12) {
	case 1:
		f.OrLabelSelectors = []labels.Selector{selector(t, "app=db")}
	case 2:
		f.OrLabelSelectors = []labels.Selector{selector(t, "app=db"), selector(t, "tier=be")}
	case 3:
		f.OrLabelSelectors = []labels.Selector{nil}
	}
	if bits&(1<<14) != 0 {
		f.NamespaceMapping = map[string]string{"a": "b"}
	}
	if bits&(1<<15) != 0 {
		if f.NamespaceMapping == nil {
			f.NamespaceMapping = map[string]string{}
		}
		f.NamespaceMapping["b"] = "z"
	}
	return f
}

// modelSelect says, item by item and without Collect's machinery, whether f keeps it
// and where it goes.
func modelSelect(it memItem, f restoreorder.Filter, resources []string) (restoreorder.Item, bool) {
	resolve := func(n string) string {
		if r, ok := restoreorder.ResolveName(n, resources); ok {
			return r
		}
		return n
	}
	in := func(list []string, s string, res bool) bool {
		for _, n := range list {
			if n == "*" || (res && resolve(n) == s) || (!res && n == s) {
				return true
			}
		}
		return false
	}
	passes := func(inc, exc []string, s string, res bool) bool {
		return !in(exc, s, res) && (len(inc) == 0 || in(inc, s, res))
	}
	if !passes(f.IncludedResources, f.ExcludedResources, it.resource, true) {
		return restoreorder.Item{}, false
	}
	target := func(ns string) string {
		if t, ok := f.NamespaceMapping[ns]; ok {
			return t
		}
		return ns
	}
	out := restoreorder.Item{Resource: it.resource, Name: it.name, Path: it.resource + "/" + it.namespace + "/" + it.name}
	switch {
	case it.resource == "namespaces" && f.NamespaceObjectsFollowNamespaces:
		if !passes(f.IncludedNamespaces, f.ExcludedNamespaces, it.name, false) {
			return restoreorder.Item{}, false
		}
		out.OriginalNamespace, out.TargetNamespace = it.name, target(it.name)
	case it.namespace == "":
		all := len(f.ExcludedNamespaces) == 0 && (len(f.IncludedNamespaces) == 0 || slices.Contains(f.IncludedNamespaces, "*"))
		if (f.IncludeClusterResources != nil && !*f.IncludeClusterResources) || (f.IncludeClusterResources == nil && !all) {
			return restoreorder.Item{}, false
		}
	default:
		if !passes(f.IncludedNamespaces, f.ExcludedNamespaces, it.namespace, false) {
			return restoreorder.Item{}, false
		}
		out.OriginalNamespace, out.TargetNamespace = it.namespace, target(it.namespace)
	}
	set := labels.Set(it.labels)
	if f.LabelSelector != nil && !f.LabelSelector.Matches(set) {
		return restoreorder.Item{}, false
	}
	if len(f.OrLabelSelectors) > 0 {
		anyMatch := false
		for _, s := range f.OrLabelSelectors {
			anyMatch = anyMatch || s == nil || s.Matches(set)
		}
		if !anyMatch {
			return restoreorder.Item{}, false
		}
	}
	return out, true
}

// modelRanks gives each resource of the backup its place in restore order.
func modelRanks(p restoreorder.Priorities, resources []string) map[string]int {
	rank := map[string]int{}
	named := map[string]bool{}
	var resolved [2][]string
	for i, list := range [][]string{p.High, p.Low} {
		for _, n := range list {
			if r, ok := restoreorder.ResolveName(n, resources); ok {
				resolved[i] = append(resolved[i], r)
				named[r] = true
			}
		}
	}
	place := func(r string) {
		if _, ok := rank[r]; !ok {
			rank[r] = len(rank)
		}
	}
	for _, r := range resolved[0] {
		place(r)
	}
	for _, r := range resources {
		if !named[r] {
			place(r)
		}
	}
	for _, r := range resolved[1] {
		place(r)
	}
	return rank
}

// FuzzCollect checks Collect against a model: it returns exactly the items the filter
// keeps, each once, resources in priority order and each resource's items together,
// namespaces and names sorted within it, and the same result every time.
func FuzzCollect(f *testing.F) {
	f.Add([]byte("\x00\x01\x00\x01\x01\x02\x01\x02\x03\x00\x03\x00\x04\x01\x00\x03"), "pods,widgets,-,configmaps", uint64(0))
	f.Add([]byte("\x00\x01\x00\x01\x00\x01\x00\x01\x07\x00\x01\x02\x03\x00\x04\x00\x05\x02\x02\x01"), restoreorder.DefaultPriorities().String(), uint64(1<<14|1<<10))
	f.Add([]byte("\x03\x00\x00\x00\x03\x00\x01\x01\x00\x01\x02\x03\x00\x02\x02\x02"), "namespaces,-,pods,pods", uint64(1<<4|1<<8))
	f.Add(bytes.Repeat([]byte{9, 1, 2, 3, 8, 0, 1, 2}, 10), "-,clusters,persistentvolumes", uint64(0xffff))
	f.Fuzz(func(t *testing.T, spec []byte, prio string, bits uint64) {
		items := fuzzItems(spec)
		src := newMemSource(items...)
		p, err := restoreorder.ParsePriorities(prio)
		if err != nil {
			p = restoreorder.Priorities{}
		}
		filter := fuzzFilter(t, bits)
		ctx := context.Background()
		c, err := restoreorder.Collect(ctx, src, p, filter)
		require.NoError(t, err)
		got := collectAll(c)

		// Exactly the model's items, each once.
		seen := map[string]bool{}
		var want []restoreorder.Item
		for _, it := range items {
			key := it.resource + "/" + it.namespace + "/" + it.name
			if seen[key] {
				continue // the source keeps the first of two equal items
			}
			seen[key] = true
			if m, ok := modelSelect(it, filter, src.resources); ok {
				want = append(want, m)
			}
		}
		byPath := func(a, b restoreorder.Item) int {
			switch {
			case a.Path < b.Path:
				return -1
			case a.Path > b.Path:
				return 1
			}
			return 0
		}
		sortedGot := slices.Clone(got)
		slices.SortFunc(sortedGot, byPath)
		slices.SortFunc(want, byPath)
		if diff := cmp.Diff(want, sortedGot); diff != "" {
			t.Fatalf("items (-model +Collect):\n%s", diff)
		}

		// Order: resources by rank, together; then original namespace and name increasing.
		rank := modelRanks(p, src.resources)
		for i := 1; i < len(got); i++ {
			a, b := got[i-1], got[i]
			ra, rb := rank[a.Resource], rank[b.Resource]
			switch {
			case ra > rb:
				t.Fatalf("%s (rank %d) before %s (rank %d)", a.Resource, ra, b.Resource, rb)
			case ra == rb && (a.OriginalNamespace > b.OriginalNamespace ||
				a.OriginalNamespace == b.OriginalNamespace && a.Name >= b.Name):
				t.Fatalf("%s before %s within %s", a.Path, b.Path, a.Resource)
			}
		}

		// Totals agree with the items.
		require.Equal(t, len(got), c.Total())
		counts := map[string]int{}
		for _, it := range got {
			counts[it.Resource]++
		}
		for _, rc := range c.Resources() {
			require.Equal(t, counts[rc.Resource], rc.Items, rc.Resource)
			delete(counts, rc.Resource)
		}
		require.Empty(t, counts, "resources missing from Resources()")

		// Deterministic.
		again, err := restoreorder.Collect(ctx, src, p, filter)
		require.NoError(t, err)
		if diff := cmp.Diff(got, collectAll(again)); diff != "" {
			t.Fatalf("second Collect differs (-first +second):\n%s", diff)
		}
	})
}

// FuzzFromTarGz feeds arbitrary bytes to FromTarGz: it must never panic, must fail only
// with the package's errors, and what it accepts must collect and read back as JSON
// objects, under names that can be objects' names.
func FuzzFromTarGz(f *testing.F) {
	f.Add(fixtureBackup(fixtureLayout{classic: true, versions: true}).tarGz(f))
	f.Add(makeTarGz(f, tarFile{name: "resources/pods/namespaces/a/x.json", body: obj}))
	f.Add(makeTarGz(f, tarFile{name: "../x", body: obj}))
	f.Add(makeTarGz(f, tarFile{name: "resources/pods/cluster/x.json", body: "[]"}))
	f.Add(makeTarGz(f, tarFile{name: "resources/pods/cluster/...json", body: obj}))
	f.Add(makeTarGz(f, tarFile{name: "resources/pods/namespaces/a/..json", body: obj}))
	f.Add(makeTarGz(f, tarFile{name: "resources/pods/cluster/x.json/", typeflag: tar.TypeDir},
		tarFile{name: "resources/pods/cluster/x.json", body: obj}))
	f.Add(makeTarGz(f, tarFile{name: "resources/pods/cluster/x.json", body: obj},
		tarFile{name: "metadata", body: "m"}, tarFile{name: "metadata/version", body: "1.1.0"}))
	f.Add([]byte("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		src, err := restoreorder.FromTarGz(bytes.NewReader(data), restoreorder.WithMaxBytes(1<<20))
		if err != nil {
			if !errors.Is(err, restoreorder.ErrMalformed) && !errors.Is(err, restoreorder.ErrInvalidItem) &&
				!errors.Is(err, restoreorder.ErrTooLarge) {
				t.Fatalf("FromTarGz: unexpected error class: %v", err)
			}
			return
		}
		ctx := context.Background()
		c, err := restoreorder.Collect(ctx, src, restoreorder.DefaultPriorities(), restoreorder.Filter{})
		require.NoError(t, err)
		var paths []string
		for it := range c.Items() {
			b, err := restoreorder.ReadItem(ctx, src, it.Path)
			require.NoError(t, err)
			require.Equal(t, byte('{'), bytes.TrimLeft(b, " \t\r\n")[0])
			require.NotContains(t, []string{"", ".", ".."}, it.Name, "item %s", it.Path)
			paths = append(paths, it.Path)
		}
		sort.Strings(paths)
		require.Len(t, slices.Compact(paths), c.Total(), "an item collected twice")
	})
}

// FuzzFromTarGzCut cuts a backup short, at a point of its tar and a point of its gzip
// stream, and appends bytes after it; it may also overwrite bytes of the tar first, as a
// hostile header would (a size of a TiB, a type, a pax record). The backups are those
// of TestFromTarGzEveryCut: ustar, pax and GNU archives by archive/tar and by Python's
// tarfile, with long paths that take pax and GNU headers, kind picking one. Cut or
// followed by bytes, an archive must fail, or, if what FromTarGz reads is somehow a whole
// archive again, give all its items as they were: never fewer. Overwritten, it may give
// other items, but only JSON objects, or fail with the package's errors. Either way,
// whatever its headers declare, FromTarGz may allocate no more than its limits allow
// for the few kilobytes it reads. The inputs it found are seeds in testdata/fuzz.
func FuzzFromTarGzCut(f *testing.F) {
	archives := cutArchives(f)
	wants := make([]map[string]string, len(archives))
	for i, a := range archives {
		src, err := restoreorder.FromTarGz(bytes.NewReader(gz(f, a.tar)))
		require.NoError(f, err)
		wants[i] = itemContents(f, src)
	}
	none := ^uint(0)
	for kind, a := range archives {
		k, n := uint8(kind), uint(a.markerEnd)
		f.Add(k, n, none, []byte(nil), uint(0), []byte(nil))             // the whole archive
		f.Add(k, n-1024, none, []byte(nil), uint(0), []byte(nil))        // cut before the end-of-archive marker
		f.Add(k, n-512, none, []byte(nil), uint(0), []byte(nil))         // one zero block
		f.Add(k, uint(2560), none, []byte(nil), uint(0), []byte(nil))    // after the headers of an entry, in pax and GNU
		f.Add(k, n, uint(20), []byte(nil), uint(0), []byte(nil))         // the gzip stream cut
		f.Add(k, n, none, []byte("garbage"), uint(0), []byte(nil))       // bytes after the gzip stream
		f.Add(k, n, none, gz(f, make([]byte, 64)), uint(0), []byte(nil)) // a second gzip member of zeros
	}
	// Hostile headers over the item x.json: in the ustar archive, sizes of 4 GiB, of
	// 8 GiB - 1 and of a TiB in base-256, and its type changed to a symbolic link; in
	// the pax archive, its mtime record changed to a size record of a TiB.
	const x = "resources/pods/namespaces/a/x.json\x00"
	hdr := uint(bytes.Index(archives[0].tar, []byte(x)))
	f.Add(uint8(0), none, none, []byte(nil), hdr+124, []byte("40000000000\x00"))
	f.Add(uint8(0), none, none, []byte(nil), hdr+124, []byte("77777777777\x00"))
	f.Add(uint8(0), none, none, []byte(nil), hdr+124, []byte("\x80\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00"))
	f.Add(uint8(0), none, none, []byte(nil), hdr+156, []byte("2"))
	pax := archives[1].tar
	mtime := uint(bytes.LastIndex(pax[:bytes.Index(pax, []byte(x))], []byte("30 mtime=")))
	f.Add(uint8(1), none, none, []byte(nil), mtime, []byte("30 size=000000001099511627776\n"))
	f.Fuzz(func(t *testing.T, kind uint8, tarCut, gzCut uint, trailer []byte, at uint, patch []byte) {
		a, want := archives[int(kind)%len(archives)], wants[int(kind)%len(archives)]
		tarball := a.tar
		patched := false
		if len(patch) > 0 {
			tarball = bytes.Clone(tarball)
			at = at % uint(len(tarball))
			patched = !bytes.Equal(tarball[at:min(at+uint(len(patch)), uint(len(tarball)))], patch[:min(uint(len(patch)), uint(len(tarball))-at)])
			copy(tarball[at:], patch)
		}
		tarCut = min(tarCut, uint(len(tarball)))
		stream := gz(t, tarball[:tarCut])
		gzCut = min(gzCut, uint(len(stream)))
		data := append(stream[:gzCut:gzCut], trailer...)
		var (
			src restoreorder.Source
			err error
		)
		// No limit: whatever a header declares, what FromTarGz allocates follows what it
		// reads, a few kilobytes here (and what a trailer of gzip members may hold).
		n := allocated(func() { src, err = restoreorder.FromTarGz(bytes.NewReader(data), restoreorder.WithMaxBytes(0)) })
		require.LessOrEqualf(t, n, uint64(8<<20+64*1032*len(trailer)), "allocated %d bytes", n)
		if err != nil {
			// Bytes after a cut are decompressed as if they belonged there, so they may
			// also make an item that is not JSON.
			if !errors.Is(err, restoreorder.ErrMalformed) && !errors.Is(err, restoreorder.ErrInvalidItem) {
				t.Fatalf("FromTarGz: unexpected error class: %v", err)
			}
			return
		}
		got := itemContents(t, src)
		if patched {
			for p, b := range got {
				require.Equalf(t, byte('{'), bytes.TrimLeft([]byte(b), " \t\r\n")[0], "item %s", p)
			}
			return
		}
		require.False(t, len(trailer) == 0 && (tarCut < uint(a.markerEnd) || gzCut < uint(len(stream))), "a cut archive was accepted")
		if len(trailer) > 0 {
			// Gzip members after the cut may go on with entries of their own: the whole
			// archive's items must be there, as they were, and others may be.
			for p := range got {
				if _, ok := want[p]; !ok {
					delete(got, p)
				}
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("items (-whole +read):\n%s", diff)
		}
	})
}
