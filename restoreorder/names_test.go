package restoreorder_test

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/restoreorder"
)

// TestItemNames runs every shape of item file whose name, less ".json", could not be an
// object's name (empty, ".", "..", or holding a "/") in every place of the layout,
// through every Source constructor: each is refused with ErrMalformed, also in a version
// directory that the index does not use. Names that are odd but possible are items.
func TestItemNames(t *testing.T) {
	dirs := []string{
		"resources/pods/cluster/",
		"resources/pods/namespaces/a/",
		"resources/pods/v1-preferredversion/cluster/",
		"resources/pods/v1-preferredversion/namespaces/a/",
		"resources/pods/v2/namespaces/a/", // not used: the classic directories are there
	}
	// base is a sound backup, so that a file refused is refused for its own name.
	base := backupFiles{"resources/pods/cluster/ok.json": obj, "resources/pods/namespaces/a/ok.json": obj}
	for _, dir := range dirs {
		for _, file := range []string{".json", "..json", "...json", "sub/.json", "sub/x.json", "../x.json"} {
			t.Run(dir+file, func(t *testing.T) {
				files := backupFiles{dir + file: obj}
				for p, body := range base {
					files[p] = body
				}
				src, err := restoreorder.FromTarGz(bytes.NewReader(files.tarGz(t)))
				require.ErrorIs(t, err, restoreorder.ErrMalformed, "FromTarGz")
				require.Nil(t, src)
				if file == "../x.json" {
					return // a path that no file system tree holds
				}
				src, err = restoreorder.FromFS(files.mapFS())
				require.ErrorIs(t, err, restoreorder.ErrMalformed, "FromFS(MapFS)")
				require.Nil(t, src)
				src, err = restoreorder.FromFS(os.DirFS(files.dir(t)))
				require.ErrorIs(t, err, restoreorder.ErrMalformed, "FromFS(DirFS)")
				require.Nil(t, src)
			})
		}
	}

	odd := backupFiles{
		"resources/pods/cluster/....json":         obj, // "..."
		"resources/pods/cluster/.x.json":          obj,
		"resources/pods/cluster/x..json":          obj,
		"resources/pods/cluster/.json.json":       obj,
		"resources/pods/namespaces/a/a\\b.json":   obj,
		"resources/pods/namespaces/a/ .json":      obj,
		"resources/pods/namespaces/.../x.json":    obj, // a namespace named "..." is a directory, not an item
		"resources/pods/namespaces/a/x.json.json": obj,
	}
	for name, src := range odd.sources(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			cluster, err := src.Items(ctx, "pods", restoreorder.ClusterScope)
			require.NoError(t, err)
			a, err := src.Items(ctx, "pods", "a")
			require.NoError(t, err)
			dots, err := src.Items(ctx, "pods", "...")
			require.NoError(t, err)
			var names []string
			for _, e := range append(append(cluster, a...), dots...) {
				names = append(names, e.Name)
			}
			require.Equal(t, []string{"...", ".json", ".x", "x.", " ", "a\\b", "x.json", "x"}, names)
		})
	}
}

// TestFromTarGzFileAndDirectory: an archive in which a path is both a file and a
// directory, whatever the order of its entries and whether the directory has an entry
// of its own or is only in the path of another entry, is refused, as Velero's extractor
// fails on it. An archive that names every directory of its files, as tar writes it, is
// read.
func TestFromTarGzFileAndDirectory(t *testing.T) {
	const item = "resources/pods/cluster/x.json"
	dir := func(name string) tarFile { return tarFile{name: name, typeflag: tar.TypeDir} }
	file := func(name, body string) tarFile { return tarFile{name: name, body: body} }
	tests := []struct {
		name  string
		files []tarFile
	}{
		{name: "a directory entry, then an item of its path", files: []tarFile{dir(item + "/"), file(item, obj)}},
		{name: "an item, then a directory entry of its path", files: []tarFile{file(item, obj), dir(item + "/")}},
		{name: "an item, then a directory entry of its path with ./", files: []tarFile{file(item, obj), dir("./" + item + "/")}},
		{name: "an item, then a directory entry under it", files: []tarFile{file(item, obj), dir(item + "/sub/")}},
		{name: "a directory entry, then a file of its path", files: []tarFile{file(item, obj), dir("metadata/version/"), file("metadata/version", "1.1.0")}},
		{name: "a file, then a directory entry of its path", files: []tarFile{file(item, obj), file("metadata/version", "1.1.0"), dir("metadata/version")}},
		{name: "a file, then a file under it", files: []tarFile{file("metadata", "m"), file(item, obj), file("metadata/version", "1.1.0")}},
		{name: "a file under a file, then the file", files: []tarFile{file("metadata/version", "1.1.0"), file(item, obj), file("metadata", "m")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src, err := restoreorder.FromTarGz(bytes.NewReader(makeTarGz(t, tc.files...)))
			require.ErrorIs(t, err, restoreorder.ErrMalformed)
			require.ErrorContains(t, err, ": a file, and also a directory")
			require.Nil(t, src)
		})
	}

	// Paths that share a prefix but not a directory: "metadata" and "metadata-x/y",
	// "metadata.d/v" and "metadata/version" sort between a file and its own children.
	src, err := restoreorder.FromTarGz(bytes.NewReader(makeTarGz(t,
		dir("./"), dir("resources/"), dir("resources/pods/"), dir("resources/pods/cluster/"), file(item, obj),
		dir("resources/pods/cluster/x/"), file("info/x.json", "a"), file("info/x.json.bak", "b"), file("info/x.json-1/c", "c"),
		file("metadata", "m"), file("metadata-x/y", "y"), file("metadata.d/v", "v"), dir("metadata0/"),
		dir("resources/"), // a directory twice, as Velero's extractor takes it
	)))
	require.NoError(t, err)
	entries, err := src.Items(context.Background(), "pods", restoreorder.ClusterScope)
	require.NoError(t, err)
	require.Equal(t, []restoreorder.Entry{{Name: "x", Path: item}}, entries)
}
