package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/internal/testutil/boltfault"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/opsfile"
	"github.com/itemops/itemops/restoreorder"
	"github.com/itemops/itemops/storage/boltstore"
)

// hostileDir holds the corpus of hostile inputs: backup tarballs, store files and
// itemoperations files, each made to hurt a reader (see writeHostile).
var hostileDir = filepath.Join("..", "..", "testdata", "hostile")

var writeHostileCorpus = flag.Bool("write-hostile", false, "write the corpus of hostile inputs in testdata/hostile with this build")

// commandMemoryLimit is the most resident memory a command may use on any input of the
// corpus (see the package documentation, "Memory").
const commandMemoryLimit = 64 << 20

// TestWriteHostileCorpus writes the corpus: go -C cmd/itemops test . -run
// TestWriteHostileCorpus -write-hostile.
func TestWriteHostileCorpus(t *testing.T) {
	if !*writeHostileCorpus {
		t.Skip("run with -write-hostile to write testdata/hostile")
	}
	for name, b := range hostileInputs(t) {
		path := filepath.Join(hostileDir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, b, 0o644))
	}
}

// hostileInputs returns the corpus by file name.
func hostileInputs(t *testing.T) map[string][]byte {
	t.Helper()
	in := map[string][]byte{}
	item := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns"}}`
	files := []tarEntry{
		{"resources/pods/namespaces/ns/a.json", item},
		{"resources/pods/namespaces/ns/b.json", item},
		{"resources/pods/namespaces/ns/c.json", item},
	}
	whole := tarOf(t, files...)
	in["tarballs/cut-before-end-of-archive.tar.gz"] = gzipOf(t, whole[:len(whole)-1024])
	in["tarballs/cut-gzip-trailer.tar.gz"] = gzipOf(t, whole)[:len(gzipOf(t, whole))-4]
	in["tarballs/trailing-garbage.tar.gz"] = append(gzipOf(t, whole), "garbage"...)
	bad := gzipOf(t, whole)
	bad[len(bad)-8] ^= 0xff // the CRC-32 of the gzip trailer
	in["tarballs/bad-gzip-checksum.tar.gz"] = bad
	in["tarballs/path-climbs-out.tar.gz"] = gzipOf(t, tarOf(t, tarEntry{"resources/../../etc/passwd.json", item}))
	in["tarballs/item-twice.tar.gz"] = gzipOf(t, tarOf(t, files[0], files[0]))
	in["tarballs/item-not-json.tar.gz"] = gzipOf(t, tarOf(t, tarEntry{"resources/pods/namespaces/ns/a.json", strings.Repeat("x", 1<<20)}))
	in["tarballs/item-of-64-mib.tar.gz"] = gzipOf(t, tarOf(t, tarEntry{"resources/pods/namespaces/ns/a.json", "{" + strings.Repeat(" ", 64<<20) + "}"}))

	ops := []operations.Operation{{
		Owner: operations.Owner{Kind: "Backup", Name: "b\x1b[2J\x00", UID: "u\n"}, Action: "a", ID: "op-1",
		Status: operations.Status{Phase: operations.OperationInProgress, NCompleted: 1, NTotal: 2},
	}}
	var buf bytes.Buffer
	require.NoError(t, opsfile.Encode(&buf, ops))
	good := buf.Bytes()
	in["opsfiles/owner-with-escapes.json.gz"] = good
	text := string(gunzipForTest(t, good))
	in["opsfiles/negative-progress.json.gz"] = gzipOf(t, []byte(strings.Replace(text, `"nTotal":2`, `"nTotal":-9223372036854775808`, 1)))
	in["opsfiles/start-in-year-9999.json.gz"] = gzipOf(t, []byte(strings.Replace(text, `"phase":"InProgress"`, `"phase":"InProgress","started":"9999-12-31T23:59:59Z"`, 1)))
	in["opsfiles/truncated.json.gz"] = good[:len(good)-6]
	in["opsfiles/not-gzip.json.gz"] = []byte(text)
	in["opsfiles/endless-string.json.gz"] = gzipOf(t, []byte(`[{"spec":{"backupName":"`+strings.Repeat("a", 64<<20)))
	in["opsfiles/endless-nesting.json.gz"] = gzipOf(t, bytes.Repeat([]byte("["), 64<<20))
	in["opsfiles/endless-white-space.json.gz"] = gzipOf(t, append([]byte("["), bytes.Repeat([]byte(" "), 260<<20)...))

	store := demoLikeStore(t)
	const pageSize = boltfault.PageSize
	meta := boltfault.LastMeta(store)
	store = store[:meta.Pages*pageSize] // what bbolt uses; the rest is room to grow
	last, root, freelist := meta.Page, meta.Root, meta.Freelist
	change := func(at int, x byte) []byte {
		b := bytes.Clone(store)
		b[at] ^= x
		return b
	}
	in["stores/cut-at-8209-bytes.db"] = store[:8209]
	zeroed := bytes.Clone(store)
	clear(zeroed[:pageSize])
	in["stores/first-page-zeroed.db"] = zeroed
	in["stores/last-meta-magic.db"] = change(last*pageSize+16, 0x5a)
	in["stores/root-page-position.db"] = change(root*pageSize+16+4, 0x5a)
	in["stores/freelist-page-number.db"] = change(freelist*pageSize+16, 0x5a)
	in["stores/leaf-entry-position.db"] = change(inLeaf(t, store, "restore-1.1-op-3")/pageSize*pageSize+16+16*3+4, 0x5a)
	in["stores/run-key.db"] = change(inLeaf(t, store, "rBbackup-k.1")+len("rBbackup-"), 0x5a)
	in["stores/not-a-store.db"] = bytes.Repeat([]byte("itemops"), 4096)
	return in
}

type tarEntry struct{ name, body string }

func tarOf(t *testing.T, files ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: f.name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(f.body))}))
		_, err := tw.Write([]byte(f.body))
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	return buf.Bytes()
}

func gzipOf(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	require.NoError(t, err)
	_, err = zw.Write(b)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

// hostileFiles lists the corpus, by kind.
func hostileFiles(t *testing.T, kind string) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(hostileDir, kind, "*"))
	require.NoError(t, err)
	require.NotEmpty(t, paths, "no %s in the corpus", kind)
	return paths
}

// allocated returns what fn allocates, in bytes (runtime.MemStats.TotalAlloc).
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestHostileCorpusLibrary runs the corpus through the library: every input fails with
// one of its reader's typed errors, and allocates no more than the reader's limits
// allow (the limits of the test are a margin over those the reader documents).
func TestHostileCorpusLibrary(t *testing.T) {
	const maxItems = 1 << 20
	for _, path := range hostileFiles(t, "tarballs") {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		var ferr error
		n := allocated(func() { _, ferr = restoreorder.FromTarGz(bytes.NewReader(b), restoreorder.WithMaxBytes(maxItems)) })
		require.Truef(t, errors.Is(ferr, restoreorder.ErrMalformed) || errors.Is(ferr, restoreorder.ErrInvalidItem) || errors.Is(ferr, restoreorder.ErrTooLarge),
			"%s: %v", path, ferr)
		// FromTarGz holds the items it keeps (at most maxItems, with their entries), and
		// its buffer for the item it reads grows by doubling, to at most that item; the
		// rest is gzip's and tar's buffers.
		require.LessOrEqualf(t, n, uint64(maxItems+(1<<20)+(4<<20)), "%s: allocated %d bytes", path, n)
		t.Logf("%s: %v (allocated %.1f MiB)", filepath.Base(path), ferr, float64(n)/(1<<20))
	}
	for _, path := range hostileFiles(t, "opsfiles") {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		var derr error
		n := allocated(func() { _, derr = opsfile.Decode(bytes.NewReader(b), opsfile.WithSizeLimit(32<<20)) })
		switch filepath.Base(path) {
		case "owner-with-escapes.json.gz", "start-in-year-9999.json.gz":
			require.NoError(t, derr, path) // valid records: the command must show them safely
		default:
			require.Truef(t, errors.Is(derr, opsfile.ErrMalformed) || errors.Is(derr, opsfile.ErrTooLarge) || errors.Is(derr, operations.ErrInvalid),
				"%s: %v", path, derr)
		}
		// The decoder holds a record of up to 8 MiB (DefaultRecordSizeLimit) and its
		// buffer, which grows by doubling.
		require.LessOrEqualf(t, n, uint64(32<<20), "%s: allocated %d bytes", path, n)
		t.Logf("%s: %v (allocated %.1f MiB)", filepath.Base(path), derr, float64(n)/(1<<20))
	}
	for _, path := range hostileFiles(t, "stores") {
		cp := filepath.Join(t.TempDir(), "store.db")
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(cp, b, 0o600))
		var oerr error
		n := allocated(func() {
			var s *boltstore.Store
			if s, oerr = boltstore.Open(cp, &boltstore.Options{ReadOnly: true}); oerr == nil {
				_ = s.Close()
			}
		})
		require.Truef(t, errors.Is(oerr, boltstore.ErrCorrupt) || errors.Is(oerr, boltstore.ErrNotStore), "%s: %v", path, oerr)
		// The check keeps a bit per page and a page's bytes; bbolt maps the file.
		require.LessOrEqualf(t, n, uint64(1<<20), "%s: allocated %d bytes", path, n)
		t.Logf("%s: %v (allocated %.1f KiB)", filepath.Base(path), oerr, float64(n)/(1<<10))
	}
}

// TestHostileCorpusCommand runs the command on every input of the corpus it reads, in
// this process: every run fails with status 1 and one clear error line (salvage lists
// what it lost on stdout), never a panic, except the valid records, which it must show
// safely; and no run allocates more than commandMemoryLimit (runtime.MemStats.TotalAlloc,
// which bounds the memory a run holds at any one time from above).
func TestHostileCorpusCommand(t *testing.T) {
	type job struct {
		args []string
		ok   bool // the input is valid
	}
	var jobs []job
	for _, path := range hostileFiles(t, "opsfiles") {
		base := filepath.Base(path)
		if testing.Short() && base == "endless-white-space.json.gz" {
			// inspect reads its whole size limit of white space before it refuses
			// it: 16 s under the race detector, so only without -short.
			t.Logf("-short: %s is left to the run without -short", base)
			continue
		}
		jobs = append(jobs, job{[]string{"inspect", path}, base == "owner-with-escapes.json.gz" || base == "start-in-year-9999.json.gz"})
	}
	for _, path := range hostileFiles(t, "stores") {
		cp := func() string {
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			p := filepath.Join(t.TempDir(), filepath.Base(path))
			require.NoError(t, os.WriteFile(p, b, 0o600))
			return p
		}
		jobs = append(jobs,
			job{args: []string{"inspect", path}},
			job{args: []string{"check", path}},
			job{args: []string{"salvage", path, filepath.Join(t.TempDir(), "saved.db")}},
			job{args: []string{"cancel", cp(), "restore-1.1"}},
			job{args: []string{"demo", "-db", cp(), "-items", "10", "-operations", "2"}},
		)
	}
	worst := uint64(0)
	for _, j := range jobs {
		var status int
		var stdout, stderr bytes.Buffer
		n := allocated(func() { status = run(j.args, &stdout, &stderr) })
		worst = max(worst, n)
		file := j.args[1] // check, salvage, cancel
		switch j.args[0] {
		case "inspect":
			file = j.args[len(j.args)-1]
		case "demo":
			file = j.args[2]
		}
		name := j.args[0] + " " + filepath.Base(file)
		if j.ok {
			require.Equal(t, 0, status, "%s: %s", name, stderr.String())
			for _, raw := range []string{"\x1b", "\x00", "in -"} {
				require.NotContains(t, stdout.String(), raw, name)
			}
		} else {
			require.Equal(t, 1, status, "%s: %s%s", name, stdout.String(), stderr.String())
			require.Equal(t, 1, strings.Count(stderr.String(), "\n"), "%s: one error line, got %q", name, stderr.String())
			require.NotContains(t, stderr.String(), "nil pointer", name)
		}
		require.NotContains(t, stderr.String(), "panic", name)
		require.LessOrEqualf(t, n, uint64(commandMemoryLimit), "%s: allocated %d bytes", name, n)
		t.Logf("%-40s exit %d, allocated %5.1f MiB: %s", name, status, float64(n)/(1<<20), strings.TrimSpace(stderr.String()))
	}
	t.Logf("%d runs of the command on the corpus; the most any allocated: %.1f MiB (limit %d MiB)", len(jobs), float64(worst)/(1<<20), commandMemoryLimit>>20)
}
