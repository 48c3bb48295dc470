package restoreorder_test

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/restoreorder"
)

const obj = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"}}`

func TestFromTarGzErrors(t *testing.T) {
	valid := makeTarGz(t, tarFile{name: "resources/pods/namespaces/a/x.json", body: obj})
	tests := []struct {
		name    string
		archive func(t *testing.T) []byte
		opts    []restoreorder.TarGzOption
		want    error
	}{
		{name: "not gzip", archive: func(*testing.T) []byte { return []byte("resources/pods") }, want: restoreorder.ErrMalformed},
		{name: "empty input", archive: func(*testing.T) []byte { return nil }, want: restoreorder.ErrMalformed},
		{name: "gzip of something that is not tar", archive: func(t *testing.T) []byte { return gz(t, bytes.Repeat([]byte("not a tar header "), 64)) }, want: restoreorder.ErrMalformed},
		{name: "truncated archive", archive: func(*testing.T) []byte { return valid[:len(valid)/2] }, want: restoreorder.ErrMalformed},
		{name: "empty tar has no resources", archive: func(t *testing.T) []byte { return makeTarGz(t) }, want: restoreorder.ErrMalformed},
		{
			name:    "metadata only has no resources",
			archive: func(t *testing.T) []byte { return makeTarGz(t, tarFile{name: "metadata/version", body: "1.1.0"}) },
			want:    restoreorder.ErrMalformed,
		},
		{
			name:    "parent directory escape",
			archive: func(t *testing.T) []byte { return makeTarGz(t, tarFile{name: "../etc/passwd", body: "root"}) },
			want:    restoreorder.ErrMalformed,
		},
		{
			name: "escape inside resources",
			archive: func(t *testing.T) []byte {
				return makeTarGz(t, tarFile{name: "resources/pods/../../../x.json", body: obj})
			},
			want: restoreorder.ErrMalformed,
		},
		{
			name: "absolute path",
			archive: func(t *testing.T) []byte {
				return makeTarGz(t, tarFile{name: "/resources/pods/namespaces/a/x.json", body: obj})
			},
			want: restoreorder.ErrMalformed,
		},
		{
			name: "unclean path",
			archive: func(t *testing.T) []byte {
				return makeTarGz(t, tarFile{name: "resources//pods/namespaces/a/x.json", body: obj})
			},
			want: restoreorder.ErrMalformed,
		},
		{
			name: "symbolic link",
			archive: func(t *testing.T) []byte {
				return makeTarGz(t, tarFile{name: "resources/pods/namespaces/a/x.json", typeflag: tar.TypeSymlink, linkname: "/etc/passwd"})
			},
			want: restoreorder.ErrMalformed,
		},
		{
			name: "hard link",
			archive: func(t *testing.T) []byte {
				return makeTarGz(t,
					tarFile{name: "resources/pods/namespaces/a/x.json", body: obj},
					tarFile{name: "resources/pods/namespaces/a/y.json", typeflag: tar.TypeLink, linkname: "resources/pods/namespaces/a/x.json"})
			},
			want: restoreorder.ErrMalformed,
		},
		{
			name: "same path twice",
			archive: func(t *testing.T) []byte {
				return makeTarGz(t,
					tarFile{name: "resources/pods/namespaces/a/x.json", body: obj},
					tarFile{name: "./resources/pods/namespaces/a/x.json", body: obj})
			},
			want: restoreorder.ErrMalformed,
		},
		{
			name: "same non-item path twice",
			archive: func(t *testing.T) []byte {
				return makeTarGz(t,
					tarFile{name: "metadata/version", body: "1.1.0"},
					tarFile{name: "resources/pods/namespaces/a/x.json", body: obj},
					tarFile{name: "./metadata/version", body: "1.1.0"})
			},
			want: restoreorder.ErrMalformed,
		},
		{
			name: "item is a JSON array",
			archive: func(t *testing.T) []byte {
				return makeTarGz(t, tarFile{name: "resources/pods/cluster/x.json", body: `[1,2]`})
			},
			want: restoreorder.ErrInvalidItem,
		},
		{
			name: "item is null",
			archive: func(t *testing.T) []byte {
				return makeTarGz(t, tarFile{name: "resources/pods/cluster/x.json", body: `null`})
			},
			want: restoreorder.ErrInvalidItem,
		},
		{
			name: "item is broken JSON",
			archive: func(t *testing.T) []byte {
				return makeTarGz(t, tarFile{name: "resources/pods/cluster/x.json", body: `{"a":`})
			},
			want: restoreorder.ErrInvalidItem,
		},
		{
			name:    "item is empty",
			archive: func(t *testing.T) []byte { return makeTarGz(t, tarFile{name: "resources/pods/cluster/x.json"}) },
			want:    restoreorder.ErrInvalidItem,
		},
		{
			name: "items beyond the limit",
			archive: func(t *testing.T) []byte {
				return makeTarGz(t,
					tarFile{name: "resources/pods/cluster/x.json", body: obj},
					tarFile{name: "resources/pods/cluster/y.json", body: obj})
			},
			opts: []restoreorder.TarGzOption{restoreorder.WithMaxBytes(int64(len(obj)) + 10)},
			want: restoreorder.ErrTooLarge,
		},
	}
	for _, lc := range layoutErrorCases {
		tests = append(tests, struct {
			name    string
			archive func(t *testing.T) []byte
			opts    []restoreorder.TarGzOption
			want    error
		}{name: "layout: " + lc.name, archive: func(t *testing.T) []byte { return lc.files.tarGz(t) }, want: restoreorder.ErrMalformed})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src, err := restoreorder.FromTarGz(bytes.NewReader(tc.archive(t)), tc.opts...)
			require.ErrorIs(t, err, tc.want)
			require.Nil(t, src)
		})
	}
}

// layoutErrorCases are backups whose files do not fit Velero's layout.
var layoutErrorCases = []struct {
	name  string
	files backupFiles
}{
	{name: "file directly under resources", files: backupFiles{"resources/README": "x"}},
	{name: "file directly under a resource", files: backupFiles{"resources/pods/x.json": obj}},
	{name: "file directly under namespaces", files: backupFiles{"resources/pods/namespaces/x.json": obj}},
	{name: "file in a version directory", files: backupFiles{"resources/pods/v1-preferredversion/x.json": obj}},
	{name: "unknown scope directory", files: backupFiles{"resources/pods/v1/global/x.json": obj}},
	{name: "directory inside a namespace", files: backupFiles{"resources/pods/namespaces/a/sub/x.json": obj}},
	{name: "directory inside cluster", files: backupFiles{"resources/pods/cluster/sub/x.json": obj}},
	{name: "not a .json file", files: backupFiles{"resources/pods/namespaces/a/x.yaml": obj}},
	{name: "no name", files: backupFiles{"resources/pods/cluster/.json": obj}},
	{
		name: "two preferred versions",
		files: backupFiles{
			"resources/hpa.autoscaling/v1-preferredversion/namespaces/a/x.json": obj,
			"resources/hpa.autoscaling/v2-preferredversion/namespaces/a/x.json": obj,
		},
	},
	{
		name:  "only a non-preferred version",
		files: backupFiles{"resources/hpa.autoscaling/v1/namespaces/a/x.json": obj},
	},
}

func TestFromFSErrors(t *testing.T) {
	tests := []struct {
		name string
		fsys fs.FS
		want error
	}{
		{name: "no resources directory", fsys: fstest.MapFS{"metadata/version": {Data: []byte("1.1.0")}}, want: restoreorder.ErrMalformed},
		{name: "resources is a file", fsys: fstest.MapFS{"resources": {Data: []byte("x")}}, want: restoreorder.ErrMalformed},
	}
	for _, lc := range layoutErrorCases {
		tests = append(tests, struct {
			name string
			fsys fs.FS
			want error
		}{name: "layout: " + lc.name, fsys: lc.files.mapFS(), want: restoreorder.ErrMalformed})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src, err := restoreorder.FromFS(tc.fsys)
			require.ErrorIs(t, err, tc.want)
			require.Nil(t, src)
		})
	}

	t.Run("symbolic link", func(t *testing.T) {
		dir := backupFiles{"resources/pods/namespaces/a/x.json": obj}.dir(t)
		require.NoError(t, os.Symlink("/etc/hostname", filepath.Join(dir, "resources/pods/namespaces/a/y.json")))
		_, err := restoreorder.FromFS(os.DirFS(dir))
		require.ErrorIs(t, err, restoreorder.ErrMalformed)
	})

	t.Run("file system error is wrapped", func(t *testing.T) {
		_, err := restoreorder.FromFS(errFS{})
		require.ErrorIs(t, err, fs.ErrPermission)
	})
}

// errFS fails every call with fs.ErrPermission.
type errFS struct{}

func (errFS) Open(name string) (fs.File, error) {
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrPermission}
}

func TestVersionDirectories(t *testing.T) {
	body := func(v string) string { return `{"apiVersion":"` + v + `","metadata":{"name":"x"}}` }
	tests := []struct {
		name      string
		files     backupFiles
		wantPaths []string
	}{
		{
			name: "classic wins over preferred and other versions",
			files: backupFiles{
				"resources/hpa.autoscaling/namespaces/a/x.json":                     body("autoscaling/v2"),
				"resources/hpa.autoscaling/v2-preferredversion/namespaces/a/x.json": body("autoscaling/v2"),
				"resources/hpa.autoscaling/v1/namespaces/a/x.json":                  body("autoscaling/v1"),
			},
			wantPaths: []string{"resources/hpa.autoscaling/namespaces/a/x.json"},
		},
		{
			name: "classic wins wholesale even when the preferred directory holds more",
			files: backupFiles{
				"resources/pods/cluster/x.json":                     body("v1"),
				"resources/pods/v1-preferredversion/cluster/x.json": body("v1"),
				"resources/pods/v1-preferredversion/cluster/y.json": body("v1"),
			},
			wantPaths: []string{"resources/pods/cluster/x.json"},
		},
		{
			name: "preferred without classic",
			files: backupFiles{
				"resources/hpa.autoscaling/v2-preferredversion/namespaces/a/x.json": body("autoscaling/v2"),
				"resources/hpa.autoscaling/v2-preferredversion/namespaces/b/x.json": body("autoscaling/v2"),
				"resources/hpa.autoscaling/v1/namespaces/a/x.json":                  body("autoscaling/v1"),
				"resources/hpa.autoscaling/v1/namespaces/c/x.json":                  body("autoscaling/v1"),
			},
			wantPaths: []string{
				"resources/hpa.autoscaling/v2-preferredversion/namespaces/a/x.json",
				"resources/hpa.autoscaling/v2-preferredversion/namespaces/b/x.json",
			},
		},
		{
			name: "each resource chooses for itself",
			files: backupFiles{
				"resources/pods/namespaces/a/x.json":                                body("v1"),
				"resources/hpa.autoscaling/v2-preferredversion/namespaces/a/x.json": body("autoscaling/v2"),
			},
			wantPaths: []string{
				"resources/hpa.autoscaling/v2-preferredversion/namespaces/a/x.json",
				"resources/pods/namespaces/a/x.json",
			},
		},
		{
			name: "files outside resources are ignored",
			files: backupFiles{
				"metadata/version":                   "1.1.0",
				"velero-backup.json":                 "{}",
				"resources/pods/namespaces/a/x.json": body("v1"),
			},
			wantPaths: []string{"resources/pods/namespaces/a/x.json"},
		},
	}
	for _, tc := range tests {
		for srcName, src := range tc.files.sources(t) {
			t.Run(tc.name+"/"+srcName, func(t *testing.T) {
				c, err := restoreorder.Collect(context.Background(), src, restoreorder.Priorities{}, restoreorder.Filter{})
				require.NoError(t, err)
				var got []string
				for it := range c.Items() {
					got = append(got, it.Path)
				}
				if diff := cmp.Diff(tc.wantPaths, got); diff != "" {
					t.Errorf("paths (-want +got):\n%s", diff)
				}
			})
		}
	}
}

func TestFromTarGzAcceptsTarStyles(t *testing.T) {
	// "tar -C dir ." writes "./"-prefixed names and directory entries.
	archive := makeTarGz(t,
		tarFile{name: "./", typeflag: tar.TypeDir},
		tarFile{name: "./metadata/", typeflag: tar.TypeDir},
		tarFile{name: "./metadata/version", body: "1.1.0"},
		tarFile{name: "./resources/", typeflag: tar.TypeDir},
		tarFile{name: "./resources/pods/", typeflag: tar.TypeDir},
		tarFile{name: "./resources/pods/namespaces/a/x.json", body: "  \n" + obj},
		tarFile{name: "resources/pods/namespaces/a/w.json", body: obj},
	)
	src, err := restoreorder.FromTarGz(bytes.NewReader(archive))
	require.NoError(t, err)
	c, err := restoreorder.Collect(context.Background(), src, restoreorder.Priorities{}, restoreorder.Filter{})
	require.NoError(t, err)
	require.Equal(t, []string{"pods a/w", "pods a/x"}, describeAll(c))
	require.Equal(t, []string{"resources/pods/namespaces/a/w.json", "resources/pods/namespaces/a/x.json"},
		[]string{collectAll(c)[0].Path, collectAll(c)[1].Path})

	// An archive with only directories under resources/ is an empty backup.
	empty := makeTarGz(t, tarFile{name: "resources/", typeflag: tar.TypeDir})
	src, err = restoreorder.FromTarGz(bytes.NewReader(empty))
	require.NoError(t, err)
	c, err = restoreorder.Collect(context.Background(), src, restoreorder.Priorities{}, restoreorder.Filter{})
	require.NoError(t, err)
	require.Zero(t, c.Total())
}

// TestFromTarGzCutOrDamaged holds FromTarGz to reading a backup to its very end: a tar
// cut between two entries, a damaged or cut gzip trailer, or bytes after the archive
// must fail, never yield fewer items.
func TestFromTarGzCutOrDamaged(t *testing.T) {
	files := []tarFile{
		{name: "resources/pods/namespaces/a/x.json", body: obj},
		{name: "resources/pods/namespaces/a/y.json", body: obj},
		{name: "resources/pods/namespaces/a/z.json", body: obj},
	}
	whole := makeTar(t, files...)
	// The third header starts where the tar of the first two ends its entries, before
	// the two zero blocks that end an archive.
	third := len(makeTar(t, files[:2]...)) - 1024
	require.Equal(t, makeTar(t, files[:2]...)[:third], whole[:third])
	valid := gz(t, whole)
	flip := func(b []byte, i int) []byte {
		b = bytes.Clone(b)
		b[i] ^= 0x5a
		return b
	}

	tests := []struct {
		name    string
		archive []byte
	}{
		{name: "tar cut between two entries", archive: gz(t, whole[:third])},
		{name: "tar cut inside an entry's padding", archive: gz(t, whole[:third-100])},
		{name: "tar cut after one zero block", archive: gz(t, whole[:len(whole)-512])},
		{name: "tar cut inside the zero blocks", archive: gz(t, whole[:len(whole)-100])},
		{name: "data after the end-of-archive marker", archive: gz(t, append(bytes.Clone(whole), "x"...))},
		{name: "bad gzip checksum", archive: flip(valid, len(valid)-8)},
		{name: "bad gzip length", archive: flip(valid, len(valid)-1)},
		{name: "gzip trailer cut in half", archive: valid[:len(valid)-4]},
		{name: "gzip trailer missing", archive: valid[:len(valid)-8]},
		{name: "garbage after the gzip stream", archive: append(bytes.Clone(valid), "garbage"...)},
		{name: "one byte after the gzip stream", archive: append(bytes.Clone(valid), 0)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src, err := restoreorder.FromTarGz(bytes.NewReader(tc.archive))
			require.ErrorIs(t, err, restoreorder.ErrMalformed)
			require.Nil(t, src)
		})
	}

	// What tar itself writes after the marker, zeros up to its record size (10240 bytes
	// for GNU tar), is part of a whole archive.
	padded := append(bytes.Clone(whole), make([]byte, 10240-len(whole)%10240)...)
	for name, archive := range map[string][]byte{"as written": valid, "padded to a tar record": gz(t, padded)} {
		t.Run(name, func(t *testing.T) {
			src, err := restoreorder.FromTarGz(bytes.NewReader(archive))
			require.NoError(t, err)
			c, err := restoreorder.Collect(context.Background(), src, restoreorder.Priorities{}, restoreorder.Filter{})
			require.NoError(t, err)
			require.Equal(t, []string{"pods a/x", "pods a/y", "pods a/z"}, describeAll(c))
		})
	}
}

// TestFromTarGzGlobalHeader reads an archive that starts with a pax global header, as
// git archive writes one.
func TestFromTarGzGlobalHeader(t *testing.T) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	require.NoError(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeXGlobalHeader, Name: "pax_global_header",
		PAXRecords: map[string]string{"comment": "0123abcd"}}))
	require.NoError(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "resources/pods/cluster/x.json", Mode: 0o644, Size: int64(len(obj))}))
	_, err := tw.Write([]byte(obj))
	require.NoError(t, err)
	require.NoError(t, tw.Close())
	src, err := restoreorder.FromTarGz(bytes.NewReader(gz(t, buf.Bytes())))
	require.NoError(t, err)
	c, err := restoreorder.Collect(context.Background(), src, restoreorder.Priorities{}, restoreorder.Filter{})
	require.NoError(t, err)
	require.Equal(t, []string{"pods x"}, describeAll(c))
}

// allocated returns the bytes allocated while f ran. The tests that call it do not run
// in parallel, so nothing else allocates much meanwhile.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestFromTarGzMemory holds FromTarGz to its limit: reading a big item allocates about
// the item once (its buffer doubles only until the item is at most 32 times what has
// arrived, then takes the item's size), and an entry that does not start with "{" or
// holds fewer bytes than its header says fails before it is held.
func TestFromTarGzMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("reads a backup of a 32 MiB item several times; runs without -short")
	}
	const size = 32 << 20
	big := `{"data":"` + strings.Repeat("x", size-len(`{"data":""}`)) + `"}`
	archive := makeTarGz(t, tarFile{name: "resources/pods/cluster/big.json", body: big})
	var (
		src restoreorder.Source
		err error
	)
	n := allocated(func() {
		// The limit counts the item, and 512 bytes and the path for its entry.
		src, err = restoreorder.FromTarGz(bytes.NewReader(archive), restoreorder.WithMaxBytes(size+512+int64(len("resources/pods/cluster/big.json"))))
	})
	require.NoError(t, err)
	require.NotNil(t, src)
	require.LessOrEqual(t, n, uint64(size+4<<20), "allocated %d bytes for an item of %d", n, size)
	t.Logf("allocated %d bytes to read an item of %d", n, size)

	notObject := makeTarGz(t, tarFile{name: "resources/pods/cluster/big.json", body: strings.Repeat("x", size)})
	n = allocated(func() { _, err = restoreorder.FromTarGz(bytes.NewReader(notObject)) })
	require.ErrorIs(t, err, restoreorder.ErrInvalidItem)
	require.LessOrEqual(t, n, uint64(4<<20), "allocated %d bytes to refuse an item that is not an object", n)
	t.Logf("allocated %d bytes to refuse an item that is not an object", n)

	// A header that claims 32 MiB over 10 bytes, the archive cut after them.
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	require.NoError(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "resources/pods/cluster/x.json", Mode: 0o644, Size: size}))
	_, err = tw.Write([]byte(`{"a":"b"} `))
	require.NoError(t, err)
	// The writer is not closed: it would refuse the short entry. What it wrote so far is
	// the header and the 10 bytes.
	lying := gz(t, raw.Bytes())
	n = allocated(func() { _, err = restoreorder.FromTarGz(bytes.NewReader(lying)) })
	require.ErrorIs(t, err, restoreorder.ErrMalformed)
	require.LessOrEqual(t, n, uint64(4<<20), "allocated %d bytes for an entry that holds 10", n)
}

// TestFromTarGzLimit holds WithMaxBytes to what it counts: 512 bytes and the path of
// every entry, files, directories and all, and the bytes of the items, not those of
// other files.
func TestFromTarGzLimit(t *testing.T) {
	files := []tarFile{
		{name: "resources/", typeflag: tar.TypeDir},
		{name: "resources/pods/cluster/x.json", body: obj},
		{name: "resources/pods/cluster/y.json", body: obj},
		{name: "metadata/big", body: string(bytes.Repeat([]byte("m"), 1000))}, // not an item: its bytes are not counted
	}
	archive := makeTarGz(t, files...)
	limit := int64(2 * len(obj))
	for _, f := range files {
		limit += 512 + int64(len(f.name))
	}
	_, err := restoreorder.FromTarGz(bytes.NewReader(archive), restoreorder.WithMaxBytes(limit))
	require.NoError(t, err, "exactly at the limit")
	_, err = restoreorder.FromTarGz(bytes.NewReader(archive), restoreorder.WithMaxBytes(limit-1))
	require.ErrorIs(t, err, restoreorder.ErrTooLarge)
	_, err = restoreorder.FromTarGz(bytes.NewReader(archive), restoreorder.WithMaxBytes(0))
	require.NoError(t, err, "no limit")
}

func TestReadItem(t *testing.T) {
	files := backupFiles{
		"resources/pods/namespaces/a/x.json":   obj,
		"resources/pods/namespaces/a/bad.json": `"a string"`,
	}
	ctx := context.Background()
	// FromTarGz refuses the bad item when loading; FromFS reports it when it is read.
	_, err := restoreorder.FromTarGz(bytes.NewReader(files.tarGz(t)))
	require.ErrorIs(t, err, restoreorder.ErrInvalidItem)
	fsSrc, err := restoreorder.FromFS(files.mapFS())
	require.NoError(t, err)
	_, err = restoreorder.ReadItem(ctx, fsSrc, "resources/pods/namespaces/a/bad.json")
	require.ErrorIs(t, err, restoreorder.ErrInvalidItem)

	delete(files, "resources/pods/namespaces/a/bad.json")
	for name, src := range files.sources(t) {
		t.Run(name, func(t *testing.T) {
			got, err := restoreorder.ReadItem(ctx, src, "resources/pods/namespaces/a/x.json")
			require.NoError(t, err)
			require.Equal(t, obj, string(got))
			got[0] = 'X' // the caller's copy
			again, err := restoreorder.ReadItem(ctx, src, "resources/pods/namespaces/a/x.json")
			require.NoError(t, err)
			require.Equal(t, obj, string(again))

			_, err = restoreorder.ReadItem(ctx, src, "resources/pods/namespaces/a/missing.json")
			require.ErrorIs(t, err, fs.ErrNotExist)

			rc, err := src.Open(ctx, "resources/pods/namespaces/a/x.json")
			require.NoError(t, err)
			b, err := io.ReadAll(rc)
			require.NoError(t, err)
			require.NoError(t, rc.Close())
			require.Equal(t, obj, string(b))

			cancelled, cancel := context.WithCancel(ctx)
			cancel()
			_, err = restoreorder.ReadItem(cancelled, src, "resources/pods/namespaces/a/x.json")
			require.ErrorIs(t, err, context.Canceled)
			_, err = src.Resources(cancelled)
			require.ErrorIs(t, err, context.Canceled)
		})
	}
}
