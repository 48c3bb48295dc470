package restoreorder_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/restoreorder"
)

// memItem is one item of a memSource.
type memItem struct {
	resource, namespace, name string
	labels                    map[string]string
}

// memSource is an in-memory restoreorder.Source for tests. Paths are
// "<resource>/<namespace>/<name>"; items' JSON carries their labels. opens counts the
// calls of Open, and openErr, when set, makes Open fail.
type memSource struct {
	resources  []string
	namespaces map[string][]string
	items      map[string]map[string][]restoreorder.Entry
	data       map[string][]byte
	labels     map[string]map[string]string

	opens   atomic.Int64
	openErr error
	itemErr error // returned by Items
}

var _ restoreorder.Source = (*memSource)(nil)

func newMemSource(items ...memItem) *memSource {
	s := &memSource{
		namespaces: map[string][]string{},
		items:      map[string]map[string][]restoreorder.Entry{},
		data:       map[string][]byte{},
		labels:     map[string]map[string]string{},
	}
	for _, it := range items {
		byNS := s.items[it.resource]
		if byNS == nil {
			byNS = map[string][]restoreorder.Entry{}
			s.items[it.resource] = byNS
			s.resources = append(s.resources, it.resource)
		}
		if _, ok := byNS[it.namespace]; !ok {
			s.namespaces[it.resource] = append(s.namespaces[it.resource], it.namespace)
		}
		p := it.resource + "/" + it.namespace + "/" + it.name
		if _, dup := s.data[p]; dup {
			continue
		}
		byNS[it.namespace] = append(byNS[it.namespace], restoreorder.Entry{Name: it.name, Path: p})
		s.data[p] = objectJSON(it.name, it.namespace, it.labels)
		s.labels[p] = it.labels
	}
	sort.Strings(s.resources)
	for r, nss := range s.namespaces {
		sort.Strings(nss)
		for _, ns := range nss {
			slices.SortFunc(s.items[r][ns], func(a, b restoreorder.Entry) int { return strings.Compare(a.Name, b.Name) })
		}
	}
	return s
}

func (s *memSource) Resources(ctx context.Context) ([]string, error) { return s.resources, ctx.Err() }

func (s *memSource) Namespaces(ctx context.Context, resource string) ([]string, error) {
	return s.namespaces[resource], ctx.Err()
}

func (s *memSource) Items(ctx context.Context, resource, namespace string) ([]restoreorder.Entry, error) {
	if s.itemErr != nil {
		return nil, s.itemErr
	}
	return s.items[resource][namespace], ctx.Err()
}

func (s *memSource) Open(ctx context.Context, path string) (io.ReadCloser, error) {
	s.opens.Add(1)
	if s.openErr != nil {
		return nil, s.openErr
	}
	b, ok := s.data[path]
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

// labelMemSource is a memSource that serves labels without reading items.
type labelMemSource struct {
	*memSource
	labelCalls atomic.Int64
}

var _ restoreorder.LabelSource = (*labelMemSource)(nil)

func (s *labelMemSource) Labels(ctx context.Context, path string) (map[string]string, error) {
	s.labelCalls.Add(1)
	return s.labels[path], ctx.Err()
}

// objectJSON returns a minimal Kubernetes object with the given labels.
func objectJSON(name, namespace string, labels map[string]string) []byte {
	meta := map[string]any{"name": name}
	if namespace != "" {
		meta["namespace"] = namespace
	}
	if labels != nil {
		meta["labels"] = labels
	}
	b, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Thing", "metadata": meta})
	if err != nil {
		panic(err)
	}
	return b
}

// describe renders an item for comparisons: "pods ns/name", "pods ns→target/name",
// "persistentvolumes name" for cluster-scoped ones.
func describe(it restoreorder.Item) string {
	switch {
	case it.OriginalNamespace == "" && it.TargetNamespace == "":
		return it.Resource + " " + it.Name
	case it.OriginalNamespace == it.TargetNamespace:
		return fmt.Sprintf("%s %s/%s", it.Resource, it.OriginalNamespace, it.Name)
	}
	return fmt.Sprintf("%s %s→%s/%s", it.Resource, it.OriginalNamespace, it.TargetNamespace, it.Name)
}

// describeAll renders the items of c in order.
func describeAll(c *restoreorder.Collection) []string {
	var out []string
	for it := range c.Items() {
		out = append(out, describe(it))
	}
	return out
}

// collectAll returns the items of c in order.
func collectAll(c *restoreorder.Collection) []restoreorder.Item {
	var out []restoreorder.Item
	for it := range c.Items() {
		out = append(out, it)
	}
	return out
}

// tarFile is one entry of an archive built by makeTarGz.
type tarFile struct {
	name     string
	typeflag byte // 0: tar.TypeReg
	body     string
	linkname string
}

// makeTarGz builds a .tar.gz of files, in order.
func makeTarGz(t testing.TB, files ...tarFile) []byte {
	t.Helper()
	return gz(t, makeTar(t, files...))
}

// gz compresses b as one gzip stream.
func gz(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, err := zw.Write(b)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

// makeTar builds a tar of files, in order, ending with the end-of-archive marker, in the
// format archive/tar picks for each header.
func makeTar(t testing.TB, files ...tarFile) []byte {
	t.Helper()
	return formatTar(t, tar.FormatUnknown, files...)
}

// formatTar builds a tar of files in format, as makeTar does. Pax archives carry
// modification times with nanoseconds, as cmd/itemops writes them, so that every entry
// has a pax header.
func formatTar(t testing.TB, format tar.Format, files ...tarFile) []byte {
	t.Helper()
	mtime := time.Unix(1700000000, 0)
	if format == tar.FormatPAX {
		mtime = mtime.Add(123456789)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		hdr := &tar.Header{Name: f.name, Typeflag: f.typeflag, Mode: 0o644, Size: int64(len(f.body)),
			Linkname: f.linkname, ModTime: mtime, Format: format}
		if hdr.Typeflag == 0 {
			hdr.Typeflag = tar.TypeReg
		}
		if hdr.Typeflag != tar.TypeReg {
			hdr.Size = 0
		}
		if hdr.Typeflag == tar.TypeDir {
			hdr.Mode = 0o755
		}
		require.NoError(t, tw.WriteHeader(hdr))
		if hdr.Size > 0 {
			_, err := tw.Write([]byte(f.body))
			require.NoError(t, err)
		}
	}
	require.NoError(t, tw.Close())
	return buf.Bytes()
}

// backupFiles is a backup as a map from path to content.
type backupFiles map[string]string

// tarGz returns the backup as a .tar.gz, entries in path order, files only (as Velero
// writes them).
func (b backupFiles) tarGz(t testing.TB) []byte {
	t.Helper()
	var files []tarFile
	for _, p := range b.paths() {
		files = append(files, tarFile{name: p, body: b[p]})
	}
	return makeTarGz(t, files...)
}

func (b backupFiles) paths() []string {
	var ps []string
	for p := range b {
		ps = append(ps, p)
	}
	sort.Strings(ps)
	return ps
}

// mapFS returns the backup as an fstest.MapFS.
func (b backupFiles) mapFS() fstest.MapFS {
	m := fstest.MapFS{}
	for p, body := range b {
		m[p] = &fstest.MapFile{Data: []byte(body), Mode: 0o644}
	}
	return m
}

// dir writes the backup under a temporary directory and returns it.
func (b backupFiles) dir(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for p, body := range b {
		full := filepath.Join(root, filepath.FromSlash(p))
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(body), 0o644))
	}
	return root
}

// sources returns the backup through every Source constructor: an fstest.MapFS, a
// directory on disk and the .tar.gz.
func (b backupFiles) sources(t *testing.T) map[string]restoreorder.Source {
	t.Helper()
	fromMap, err := restoreorder.FromFS(b.mapFS())
	require.NoError(t, err, "FromFS(MapFS)")
	fromDir, err := restoreorder.FromFS(os.DirFS(b.dir(t)))
	require.NoError(t, err, "FromFS(DirFS)")
	fromTar, err := restoreorder.FromTarGz(bytes.NewReader(b.tarGz(t)))
	require.NoError(t, err, "FromTarGz")
	return map[string]restoreorder.Source{"FromFS(MapFS)": fromMap, "FromFS(DirFS)": fromDir, "FromTarGz": fromTar}
}
