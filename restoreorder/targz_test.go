package restoreorder_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/restoreorder"
)

// longName is an item path of more than 100 bytes, the most a ustar header's name field
// holds: archive/tar writes it in a pax header or a GNU long-name header, or splits it
// into the ustar prefix and name fields.
var longName = "resources/pods/namespaces/a-namespace-with-a-rather-long-name/" + strings.Repeat("p", 80) + ".json"

// cutFiles are the entries of the archives TestFromTarGzEveryCut cuts: directories, a
// file that is not an item, items with short and long paths, and an item whose data
// takes two blocks.
var cutFiles = []tarFile{
	{name: "resources/", typeflag: tar.TypeDir},
	{name: "metadata/version", body: "1.1.0"},
	{name: longName, body: obj},
	{name: "resources/pods/namespaces/a/x.json", body: `{"metadata":{"name":"x","labels":{"note":"` + strings.Repeat("n", 600) + `"}}}`},
	{name: "resources/configmaps/cluster/c.json", body: obj},
}

// gunzipFile returns the decompressed contents of a .gz file under testdata.
func gunzipFile(t testing.TB, name string) []byte {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	require.NoError(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err)
	b, err := io.ReadAll(zr)
	require.NoError(t, err)
	return b
}

// cutArchive is a whole tar that the cut tests cut, with where its end-of-archive marker
// ends: after that, a tar may hold only the zeros that pad it to its record size.
type cutArchive struct {
	name      string
	tar       []byte
	markerEnd int
}

// cutArchives returns the archives of cutFiles in the three formats archive/tar writes,
// and the two that Python's tarfile wrote (testdata/tarballs/make.py), padded to tar's
// record size of 10240 bytes.
func cutArchives(t testing.TB) []cutArchive {
	t.Helper()
	archives := []cutArchive{
		{name: "ustar", tar: formatTar(t, tar.FormatUSTAR, cutFiles...)},
		{name: "pax", tar: formatTar(t, tar.FormatPAX, cutFiles...)},
		{name: "gnu", tar: formatTar(t, tar.FormatGNU, cutFiles...)},
		{name: "python-gnu", tar: gunzipFile(t, "tarballs/python-gnu.tar.gz")},
		{name: "python-pax", tar: gunzipFile(t, "tarballs/python-pax.tar.gz")},
	}
	for i := range archives {
		archives[i].markerEnd = markerEnd(t, archives[i].tar)
	}
	return archives
}

// markerEnd returns the offset right after the end-of-archive marker of the tar b, where
// archive/tar stops reading.
func markerEnd(t testing.TB, b []byte) int {
	t.Helper()
	r := bytes.NewReader(b)
	tr := tar.NewReader(r)
	for {
		_, err := tr.Next()
		if err == io.EOF {
			return len(b) - r.Len()
		}
		require.NoError(t, err)
	}
}

// itemContents reads every item of src, by path.
func itemContents(t testing.TB, src restoreorder.Source) map[string]string {
	t.Helper()
	ctx := context.Background()
	c, err := restoreorder.Collect(ctx, src, restoreorder.Priorities{}, restoreorder.Filter{})
	require.NoError(t, err)
	got := map[string]string{}
	for it := range c.Items() {
		b, err := restoreorder.ReadItem(ctx, src, it.Path)
		require.NoError(t, err)
		got[it.Path] = string(b)
	}
	return got
}

// gzipper compresses many inputs with one gzip.Writer, which is costly to make.
type gzipper struct{ zw *gzip.Writer }

func (g *gzipper) gz(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	if g.zw == nil {
		zw, err := gzip.NewWriterLevel(&buf, gzip.NoCompression)
		require.NoError(t, err)
		g.zw = zw
	} else {
		g.zw.Reset(&buf)
	}
	_, err := g.zw.Write(b)
	require.NoError(t, err)
	require.NoError(t, g.zw.Close())
	return buf.Bytes()
}

// TestFromTarGzEveryCut cuts backups in ustar, pax and GNU formats, written by
// archive/tar and by Python's tarfile, at every byte of the tar (gzipped whole again, as
// a tar that died under "tar | gzip" leaves it; under -short, at the bytes within 16 of
// a block boundary) and at every byte of the gzip stream. A
// cut before the end of the end-of-archive marker must fail with ErrMalformed and an
// error that says at which byte the tar ends; a cut after it, in the zeros that pad a
// tar to its record size, leaves a whole archive and must give the same items.
func TestFromTarGzEveryCut(t *testing.T) {
	for _, a := range cutArchives(t) {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			var g gzipper
			whole, err := restoreorder.FromTarGz(bytes.NewReader(g.gz(t, a.tar)))
			require.NoError(t, err)
			want := itemContents(t, whole)
			require.Len(t, want, 3)

			for cut := 0; cut <= len(a.tar); cut++ {
				if testing.Short() && cut%512 > 16 && cut%512 < 512-16 {
					continue // under -short, the cuts within 16 bytes of a block boundary
				}
				src, err := restoreorder.FromTarGz(bytes.NewReader(g.gz(t, a.tar[:cut])))
				if cut < a.markerEnd {
					require.ErrorIsf(t, err, restoreorder.ErrMalformed, "tar cut at byte %d of %d", cut, a.markerEnd)
					require.Containsf(t, err.Error(), fmt.Sprintf("the tar ends at byte %d,", cut), "tar cut at byte %d", cut)
					require.Nil(t, src)
					continue
				}
				require.NoErrorf(t, err, "tar cut at byte %d, after the marker at %d", cut, a.markerEnd)
				if diff := cmp.Diff(want, itemContents(t, src)); diff != "" {
					t.Fatalf("tar cut at byte %d: items (-whole +cut):\n%s", cut, diff)
				}
			}

			stream := gz(t, a.tar)
			for cut := 0; cut < len(stream); cut++ {
				src, err := restoreorder.FromTarGz(bytes.NewReader(stream[:cut]))
				require.ErrorIsf(t, err, restoreorder.ErrMalformed, "gzip stream cut at byte %d of %d", cut, len(stream))
				if msg := err.Error(); !strings.Contains(msg, "not gzip") && !strings.Contains(msg, "the gzip stream fails at byte") {
					t.Fatalf("gzip stream cut at byte %d: the error does not say where: %v", cut, err)
				}
				require.Nil(t, src)
			}
		})
	}
}

// TestFromTarGzFixtureBlockCuts cuts the realistic fixture backup, written as
// cmd/itemops writes its backups (pax headers with modification times to the
// nanosecond), at every block boundary, gzipped whole again: every cut but the whole
// archive fails.
func TestFromTarGzFixtureBlockCuts(t *testing.T) {
	backup := fixtureBackup(fixtureLayout{classic: true, versions: true})
	var files []tarFile
	for _, p := range backup.paths() {
		files = append(files, tarFile{name: p, body: backup[p]})
	}
	whole := formatTar(t, tar.FormatPAX, files...)
	var g gzipper
	src, err := restoreorder.FromTarGz(bytes.NewReader(g.gz(t, whole)))
	require.NoError(t, err)
	require.NotEmpty(t, itemContents(t, src))
	for cut := 0; cut < len(whole); cut += 512 {
		src, err := restoreorder.FromTarGz(bytes.NewReader(g.gz(t, whole[:cut])))
		require.ErrorIsf(t, err, restoreorder.ErrMalformed, "cut at byte %d of %d", cut, len(whole))
		require.Containsf(t, err.Error(), fmt.Sprintf("the tar ends at byte %d,", cut), "cut at byte %d", cut)
		require.Nil(t, src)
	}
}

// headerBlock returns a ustar header block of the given type, name and size, with its
// checksum: archive/tar's Writer refuses to write a pax or GNU header when asked to.
func headerBlock(t testing.TB, typeflag byte, name string, size int64) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	require.NoError(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Format: tar.FormatUSTAR}))
	block := buf.Bytes()[:512]
	block[156] = typeflag
	if size < 8<<30 {
		copy(block[124:136], fmt.Sprintf("%011o\x00", size))
	} else { // base-256, as GNU tar writes sizes that octal cannot hold
		block[124] = 0x80
		for i := 135; i > 124; i, size = i-1, size>>8 {
			block[i] = byte(size)
		}
	}
	copy(block[148:156], "        ")
	sum := 0
	for _, c := range block {
		sum += int(c)
	}
	copy(block[148:156], fmt.Sprintf("%06o\x00 ", sum))
	return block
}

// paxBlocks returns a pax extended header of records, and its data padded to a block.
func paxBlocks(t testing.TB, records ...[2]string) []byte {
	t.Helper()
	var data []byte
	for _, r := range records {
		rec := " " + r[0] + "=" + r[1] + "\n"
		n := len(rec) + 1
		for len(strconv.Itoa(n))+len(rec) != n {
			n++
		}
		data = append(data, strconv.Itoa(n)+rec...)
	}
	return padBlock(append(headerBlock(t, tar.TypeXHeader, "PaxHeaders/x", int64(len(data))), data...))
}

// padBlock pads b with zeros to a whole block.
func padBlock(b []byte) []byte { return append(b, make([]byte, (512-len(b)%512)%512)...) }

// TestFromTarGzDeclaredSize gives FromTarGz headers that declare far more than their
// entries hold: up to a TiB over a few bytes, within the limit or with none. Reading
// must fail as a cut archive does, having allocated no more than WithMaxBytes says: 32
// KiB plus 34 times the bytes that arrived, besides what reading an honest archive of the
// same bytes costs. Sparse files, whose holes archive/tar fills with zeros the stream
// does not hold, are refused before any of them is read.
func TestFromTarGzDeclaredSize(t *testing.T) {
	const path = "resources/pods/cluster/x.json"
	for _, held := range []int{1000, 1<<20 + 1000} { // the second passes the first MiB, and gzips to about 1 KB
		body := "{" + strings.Repeat(" ", held-1)
		// honest declares what the entry holds, and is cut after it like the others.
		honest := gz(t, append(headerBlock(t, tar.TypeReg, path, int64(held)), body...))
		var base uint64
		for range 3 { // the least of three runs: the first also warms gzip's pools
			n := allocated(func() { _, _ = restoreorder.FromTarGz(bytes.NewReader(honest)) })
			if base == 0 || n < base {
				base = n
			}
		}
		for _, tc := range []struct {
			declared, limit int64
		}{
			{declared: 4 << 30, limit: 8 << 30},
			{declared: 4 << 30, limit: 0},
			{declared: 8<<30 - 1, limit: 0}, // the most the header's octal field holds
			{declared: 1 << 40, limit: 0},
		} {
			t.Run(fmt.Sprintf("held=%d/declared=%d/limit=%d", held, tc.declared, tc.limit), func(t *testing.T) {
				archive := gz(t, append(headerBlock(t, tar.TypeReg, path, tc.declared), body...))
				var err error
				n := allocated(func() {
					_, err = restoreorder.FromTarGz(bytes.NewReader(archive), restoreorder.WithMaxBytes(tc.limit))
				})
				require.ErrorIs(t, err, restoreorder.ErrMalformed)
				require.Contains(t, err.Error(), fmt.Sprintf("the tar ends at byte %d,", 512+held))
				bound := base + 32<<10 + 34*uint64(held)
				require.LessOrEqualf(t, n, bound, "allocated %d bytes for %d that arrived (an archive of %d bytes)", n, held, len(archive))
				t.Logf("allocated %d bytes, %d for the honest archive (%d bytes of gzip)", n, base, len(archive))
			})
		}
	}

	t.Run("sparse", func(t *testing.T) {
		// base is what reading the archive's one honest entry costs, alone.
		honest := gz(t, makeTar(t, tarFile{name: "resources/pods/cluster/y.json", body: obj}))
		var base uint64
		for range 3 { // the least of three runs: the first also warms gzip's pools
			n := allocated(func() { _, _ = restoreorder.FromTarGz(bytes.NewReader(honest)) })
			if base == 0 || n < base {
				base = n
			}
		}
		for _, name := range []string{path, "metadata/sparse"} {
			// A pax sparse file, format 1.0: a map of one fragment, "{", at the start of a
			// file of 1 GiB; archive/tar reads the rest as zeros.
			var raw []byte
			raw = append(raw, paxBlocks(t,
				[2]string{"GNU.sparse.major", "1"}, [2]string{"GNU.sparse.minor", "0"},
				[2]string{"GNU.sparse.name", name}, [2]string{"GNU.sparse.realsize", strconv.Itoa(1 << 30)})...)
			raw = append(raw, headerBlock(t, tar.TypeReg, "GNUSparseFile.0/x", 513)...)
			raw = append(raw, padBlock([]byte("1\n0\n1\n"))...)
			raw = append(raw, padBlock([]byte("{"))...)
			raw = append(raw, makeTar(t, tarFile{name: "resources/pods/cluster/y.json", body: obj})...)
			var err error
			n := allocated(func() { _, err = restoreorder.FromTarGz(bytes.NewReader(gz(t, raw))) })
			require.ErrorIs(t, err, restoreorder.ErrMalformed, name)
			require.Contains(t, err.Error(), "a sparse file")
			// What reading the sparse headers costs beyond the honest entry varies with the
			// Go release; the bound is what matters: far below the GiB the header declares.
			require.LessOrEqualf(t, n, base+4<<20, "allocated %d bytes, %d for the honest entry alone", n, base)
			t.Logf("allocated %d bytes, %d for the honest entry alone", n, base)
		}
	})
}

// TestFromTarGzManyEntries streams an archive of a million tiny items to FromTarGz with
// a limit of 1 MiB: it must refuse it with ErrTooLarge once the entries' 512 bytes each
// and paths pass the limit, having read no more than about that many entries, not all
// of them.
func TestFromTarGzManyEntries(t *testing.T) {
	const limit, entries = 1 << 20, 1_000_000
	pr, pw := io.Pipe()
	var written int
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		zw, _ := gzip.NewWriterLevel(pw, gzip.BestSpeed)
		tw := tar.NewWriter(zw)
		for written = 0; written < entries; written++ {
			name := fmt.Sprintf("resources/pods/namespaces/a/item-%07d.json", written)
			if tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: 2}) != nil {
				return
			}
			if _, err := tw.Write([]byte("{}")); err != nil {
				return
			}
		}
		pw.CloseWithError(errors.Join(tw.Close(), zw.Close()))
	}()
	_, err := restoreorder.FromTarGz(pr, restoreorder.WithMaxBytes(limit))
	pr.CloseWithError(errors.New("done reading"))
	wg.Wait()
	require.ErrorIs(t, err, restoreorder.ErrTooLarge)
	// Each entry counts 512 bytes and its path; the writer runs ahead of the reader by
	// what gzip and the pipe hold, a few thousand entries at most.
	read := limit / (512 + len("resources/pods/namespaces/a/item-0000000.json"))
	require.Lessf(t, written, read+10_000, "%d entries written before FromTarGz refused the archive; the limit holds %d", written, read)
	t.Logf("%d entries written before FromTarGz refused the archive; the limit holds %d", written, read)
}

// TestFromTarGzHeadersWithoutEntry gives FromTarGz a pax header that describes no entry:
// the end-of-archive marker follows it. archive/tar reads the header and the marker and
// reports io.EOF; FromTarGz refuses the archive, since an entry is missing.
func TestFromTarGzHeadersWithoutEntry(t *testing.T) {
	entries := makeTar(t, tarFile{name: "resources/pods/cluster/x.json", body: obj})
	entries = entries[:len(entries)-1024] // without its marker
	raw := append(bytes.Clone(entries), paxBlocks(t, [2]string{"comment", "dangling"})...)
	raw = append(raw, make([]byte, 1024)...)
	_, err := restoreorder.FromTarGz(bytes.NewReader(gz(t, raw)))
	require.ErrorIs(t, err, restoreorder.ErrMalformed)
	require.Contains(t, err.Error(), fmt.Sprintf("headers at byte %d describe no entry", len(entries)))
}
