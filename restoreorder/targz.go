package restoreorder

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
)

// DefaultMaxBytes is the limit of [WithMaxBytes] when it is not given: 4 GiB.
const DefaultMaxBytes = 4 << 30

// entryCost is what [WithMaxBytes] counts for every entry of an archive besides its path
// and its item's bytes: the size of its header block, more than FromTarGz keeps for an
// entry (a map entry and an [Entry] for an item, a map entry for another file).
const entryCost = tarBlock

// A TarGzOption configures [FromTarGz].
type TarGzOption interface{ applyTarGz(*tarGzConfig) }

type tarGzOptionFunc func(*tarGzConfig)

func (f tarGzOptionFunc) applyTarGz(c *tarGzConfig) { f(c) }

type tarGzConfig struct {
	maxBytes int64
}

// WithMaxBytes limits what [FromTarGz] holds in memory. It counts the bytes of the item
// files, after decompression, and for every entry of the archive (a file, a directory, a
// pax global header) its path and 512 bytes, the size of its header block: so an
// archive of a great many small or empty entries is refused as soon as they pass the
// limit, not after all of them are read. Beyond the limit FromTarGz fails with
// [ErrTooLarge]. The default is [DefaultMaxBytes]; n <= 0 removes the limit.
//
// Whatever the limit, what FromTarGz allocates for an item follows the bytes that
// arrive, not the size its header declares: the buffer starts at 32 KiB or the item's
// size if smaller, doubles when full, and takes the item's size once that is at most 32
// times what has arrived. So a header that declares more than its entry holds costs at
// most 32 KiB plus 34 times the bytes the entry holds, and while it reads an item
// FromTarGz holds besides it at most 32 KiB or 1/16 of the item, whichever is more.
func WithMaxBytes(n int64) TarGzOption {
	return tarGzOptionFunc(func(c *tarGzConfig) { c.maxBytes = n })
}

// FromTarGz returns a [Source] over a Velero backup's .tar.gz, read from r to its end.
// Nothing is written to disk: the item files under resources/ are kept in memory, so the
// Source costs about the decompressed size of the backup's items; other files
// (metadata/version, ...) are skipped. The layout and the choice of version directory
// are those of [FromFS].
//
// FromTarGz fails with an error wrapping [ErrMalformed] if r is not a gzip'd tar, if the
// gzip stream is cut short, fails its checksum or is followed by other bytes, if the tar
// does not end with its end-of-archive marker (two zero blocks right after the last
// entry: a tar cut anywhere, between two entries or after the pax or GNU headers that
// describe the next one, would otherwise lose the rest silently) or holds data after
// it, if an entry's path is absolute or climbs out with "..", if an entry is a link,
// device, sparse or other special file, if a file's path appears twice, if a file's path
// is also a directory (that of a directory entry or of another entry's path: Velero's
// extractor fails on such an archive), if the items do not fit the layout, or if there
// is no resources directory; with [ErrInvalidItem] if an item file is not a JSON
// object; and with [ErrTooLarge] past the limit of [WithMaxBytes]. An archive that is
// cut short fails with an error that says at which byte of the tar it ends. It never
// panics on bad input. It does not take a context: to stop it, make r fail (close the
// file or connection it reads).
//
// The Source is safe for concurrent use. [ReadItem] hands out copies of its items.
func FromTarGz(r io.Reader, opts ...TarGzOption) (Source, error) {
	cfg := tarGzConfig{maxBytes: DefaultMaxBytes}
	for _, o := range opts {
		o.applyTarGz(&cfg)
	}
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("restoreorder: read backup: %w: not gzip: %v", ErrMalformed, err)
	}
	defer zr.Close()

	b := newBuilder()
	data := make(map[string][]byte)
	others := make(map[string]struct{}) // the files that are not items: metadata/version, ...
	var dirs []string                   // the paths of directory entries
	sawResources := false
	var total int64 // what WithMaxBytes counts
	zc := &countingReader{r: zr}
	tr := tar.NewReader(zc)
	for {
		// The rest of the previous entry is read here, not skipped inside Next, so that
		// the next header's offset is known: the entry's end rounded up to a block.
		if _, err := io.Copy(io.Discard, tr); err != nil {
			return nil, zc.failed(err, "inside the last entry's data")
		}
		header := (zc.n + tarBlock - 1) / tarBlock * tarBlock
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			if err := checkEnd(zc, header); err != nil {
				return nil, err
			}
			break
		}
		if err != nil {
			return nil, zc.failed(err, fmt.Sprintf("inside the headers that start at byte %d", header))
		}
		total += entryCost + int64(len(hdr.Name))
		if cfg.maxBytes > 0 && total > cfg.maxBytes {
			return nil, fmt.Errorf("restoreorder: read backup: %w: entries and items exceed %d bytes at the entry whose headers start at byte %d", ErrTooLarge, cfg.maxBytes, header)
		}
		if hdr.Typeflag == tar.TypeXGlobalHeader {
			continue // pax records for the whole archive, as git archive writes them
		}
		name, err := entryPath(hdr.Name)
		if err != nil {
			return nil, err
		}
		if name == "" {
			continue // the archive's root directory
		}
		if name == resourcesDir || strings.HasPrefix(name, resourcesDir+"/") {
			sawResources = true
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			dirs = append(dirs, name)
			continue
		case tar.TypeReg:
			if isSparse(hdr) {
				return nil, malformed(name, "a sparse file")
			}
		default:
			return nil, malformed(name, "a %s, not a regular file or directory", tarTypeName(hdr.Typeflag))
		}
		if _, dup := data[name]; dup {
			return nil, malformed(name, "the same path twice")
		}
		isItem, err := b.add(name)
		if err != nil {
			return nil, err
		}
		if !isItem {
			if _, dup := others[name]; dup {
				return nil, malformed(name, "the same path twice")
			}
			others[name] = struct{}{}
			continue // the loop reads past the rest of the entry
		}
		if hdr.Size < 0 || (cfg.maxBytes > 0 && hdr.Size > cfg.maxBytes-total) {
			return nil, fmt.Errorf("restoreorder: %s: %w: entries and items exceed %d bytes", name, ErrTooLarge, cfg.maxBytes)
		}
		item, err := readItem(name, tr, hdr.Size)
		if errors.Is(err, ErrInvalidItem) {
			return nil, err
		}
		if err != nil {
			return nil, zc.failed(err, fmt.Sprintf("inside the data of %s, the entry whose headers start at byte %d", name, header))
		}
		total += hdr.Size
		data[name] = item
	}
	if err := checkTree(data, others, dirs); err != nil {
		return nil, err
	}
	if !sawResources {
		return nil, malformed(resourcesDir, "no resources directory")
	}
	x, keep, err := b.build()
	if err != nil {
		return nil, err
	}
	for p := range data {
		if !keep(p) {
			delete(data, p) // an item of a version directory the index does not use
		}
	}
	return &tarSource{index: x, data: data}, nil
}

// checkTree fails with ErrMalformed if the path of a file of the archive, an item
// (a key of items) or another file (a key of others), is also a directory: the path
// of a directory entry (dirs), or a directory of another entry's path. Velero's
// extractor fails on such an archive, whatever the order of its entries: it cannot
// make a directory where it wrote a file, nor write a file where it made a
// directory.
func checkTree(items map[string][]byte, others map[string]struct{}, dirs []string) error {
	files := make([]string, 0, len(items)+len(others))
	for p := range items {
		files = append(files, p)
	}
	for p := range others {
		files = append(files, p)
	}
	slices.Sort(files)
	slices.Sort(dirs)
	all := slices.Concat(files, dirs)
	slices.Sort(all)
	for _, f := range files {
		if _, found := slices.BinarySearch(dirs, f); found {
			return malformed(f, "a file, and also a directory entry")
		}
		// The paths under f, if any, come together in sorted order, from the first
		// that is not less than f+"/".
		under := f + "/"
		if i, _ := slices.BinarySearch(all, under); i < len(all) && strings.HasPrefix(all[i], under) {
			return malformed(f, "a file, and also a directory in the path of %s", all[i])
		}
	}
	return nil
}

// tarBlock is the size of a tar block; headers start on block boundaries, and the end
// of an archive is two blocks of zeros.
const tarBlock = 512

// checkEnd checks how a tar stream ended, once archive/tar's Next has reported io.EOF.
// Next reports io.EOF alike for the two zero blocks of an end-of-archive marker and for
// a stream that simply stops where a header should be: between two entries, inside the
// padding of one, after one zero block, or after the pax or GNU headers that describe
// the next entry, which Next reads and keeps to itself. header is the offset at which
// Next began to read. Only a stream whose two blocks from header on were read and are
// zeros ends an archive: then what Next read was the marker and nothing else. After it,
// the rest of the gzip stream is read to its end, so that its checksum and length are
// checked, and it may hold only zeros (tar pads an archive to its record size).
func checkEnd(zc *countingReader, header int64) error {
	if zc.err != nil && zc.err != io.EOF {
		return zc.failed(zc.err, "at its end-of-archive marker")
	}
	end := zc.n
	if end != header+2*tarBlock || zc.zeros < 2*tarBlock {
		var where string
		switch {
		case end < header:
			where = fmt.Sprintf("the tar ends at byte %d, inside the padding of its last entry, with no end-of-archive marker", end)
		case end == header:
			where = fmt.Sprintf("the tar ends at byte %d, after its last entry, with no end-of-archive marker", end)
		case zc.zeros >= 2*tarBlock:
			where = fmt.Sprintf("headers at byte %d describe no entry before the end-of-archive marker", header)
		case end == header+tarBlock && zc.zeros >= tarBlock:
			where = fmt.Sprintf("the tar ends at byte %d, after one zero block of its end-of-archive marker", end)
		default:
			where = fmt.Sprintf("the tar ends at byte %d, after the headers at byte %d and before the entry they describe", end, header)
		}
		return fmt.Errorf("restoreorder: read backup: %w: %s", ErrMalformed, where)
	}
	if _, err := io.Copy(zeroWriter{}, zc); err != nil {
		if errors.Is(err, errNotZero) {
			return fmt.Errorf("restoreorder: read backup: %w: data after the end of the archive at byte %d", ErrMalformed, end)
		}
		return zc.failed(err, "after its end-of-archive marker")
	}
	return nil
}

// countingReader reads the tar stream for archive/tar's Reader and keeps what
// [checkEnd] and error messages need: how many bytes were read, how many of the last of
// them are zeros, and the first error the stream returned.
type countingReader struct {
	r     io.Reader
	n     int64 // bytes read
	zeros int64 // how many of the last bytes read are zeros
	err   error // the first error r returned, io.EOF included
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	// Only the last bytes are looked at, eight at a time: the scan stops at the first
	// one that is not zero, so item data, which ends in "}" or white space, costs one
	// comparison, and a block of padding or of the marker 64.
	i := n
	for i >= 8 && binary.NativeEndian.Uint64(p[i-8:i]) == 0 {
		i -= 8
	}
	for i > 0 && p[i-1] == 0 {
		i--
	}
	if i > 0 {
		c.zeros = 0
	}
	c.zeros += int64(n - i)
	if err != nil && c.err == nil {
		c.err = err
	}
	return n, err
}

// failed returns the error FromTarGz reports for err, met while reading the tar stream
// at the place that where names ("inside the data of ..."). The error wraps ErrMalformed
// and says at which byte of the tar the stream failed, and how: cut short, damaged, or,
// when the gzip stream failed, why.
func (c *countingReader) failed(err error, where string) error {
	switch {
	case c.err != nil && c.err != io.EOF:
		return fmt.Errorf("restoreorder: read backup: %w: the gzip stream fails at byte %d of the tar, %s: %v", ErrMalformed, c.n, where, c.err)
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return fmt.Errorf("restoreorder: read backup: %w: the tar ends at byte %d, %s", ErrMalformed, c.n, where)
	}
	return fmt.Errorf("restoreorder: read backup: %w: at byte %d of the tar, %s: %v", ErrMalformed, c.n, where, err)
}

var errNotZero = errors.New("not zero")

// zeroWriter is a writer that accepts only zero bytes: it fails with errNotZero at the
// first other byte.
type zeroWriter struct{}

func (zeroWriter) Write(p []byte) (int, error) {
	for i, c := range p {
		if c != 0 {
			return i, errNotZero
		}
	}
	return len(p), nil
}

// isSparse reports whether hdr is a sparse file in pax format. archive/tar fills its
// holes with zeros that the stream does not hold, so a few bytes could declare a file of
// any size; a backup has no such files. (A sparse file in the old GNU format has a type
// of its own, which FromTarGz refuses as it refuses links and devices.)
func isSparse(hdr *tar.Header) bool {
	for k := range hdr.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return true
		}
	}
	return false
}

// Reading an item, readItem's buffer starts at firstBuffer, or the item's size if
// smaller, and doubles when full; it takes the item's size at once when that is at most
// trustFactor times what has arrived. The doc of WithMaxBytes gives what these cost.
const (
	firstBuffer = 32 << 10
	trustFactor = 32
)

// readItem reads the n bytes of the item at path, the current entry, and checks that they
// hold a JSON object. Its buffer grows as the bytes arrive (see firstBuffer), so a header
// that claims more bytes than the entry holds does not make it allocate them; and an
// entry that does not start with "{" fails as soon as its first bytes that are not white
// space arrive. It fails with an error wrapping ErrInvalidItem if the item is not a JSON
// object, and with r's error, unwrapped, if r fails first: the caller says where.
func readItem(path string, r io.Reader, n int64) ([]byte, error) {
	b := make([]byte, 0, min(n, firstBuffer))
	checked := false
	for {
		m, err := io.ReadFull(r, b[len(b):cap(b)])
		b = b[:len(b)+m]
		if err != nil {
			return nil, err
		}
		if !checked && len(bytes.TrimLeft(b, " \t\r\n")) > 0 {
			if err := checkBrace(path, b); err != nil {
				return nil, err
			}
			checked = true
		}
		if int64(len(b)) == n {
			break
		}
		size := min(n, 2*int64(cap(b)))
		if n <= trustFactor*int64(len(b)) {
			size = n
		}
		grown := make([]byte, len(b), size)
		copy(grown, b)
		b = grown
	}
	if err := checkObject(path, b); err != nil {
		return nil, err
	}
	return b, nil
}

// tarTypeName names the kinds of tar entry a backup must not hold.
func tarTypeName(t byte) string {
	switch t {
	case tar.TypeSymlink:
		return "symbolic link"
	case tar.TypeLink:
		return "hard link"
	case tar.TypeChar:
		return "character device"
	case tar.TypeBlock:
		return "block device"
	case tar.TypeFifo:
		return "named pipe"
	}
	return fmt.Sprintf("tar entry of type %q", t)
}

// entryPath checks and cleans the name of a tar entry: "./" prefixes and a directory's
// trailing "/" go, and the result must be a valid io/fs path. The archive's root gives "".
func entryPath(name string) (string, error) {
	orig := name
	for strings.HasPrefix(name, "./") {
		name = name[2:]
	}
	name = strings.TrimSuffix(name, "/")
	switch {
	case name == "" || name == ".":
		return "", nil
	case strings.HasPrefix(name, "/"):
		return "", malformed(orig, "absolute path")
	}
	for _, elem := range strings.Split(name, "/") {
		if elem == ".." {
			return "", malformed(orig, "path escapes the archive")
		}
	}
	if !fs.ValidPath(name) {
		return "", malformed(orig, "not a clean relative path")
	}
	return name, nil
}

type tarSource struct {
	*index
	data map[string][]byte // item path → JSON, read-only after FromTarGz
}

var _ Source = (*tarSource)(nil)

// Open returns a reader of the item at path. A path that names no item fails with an
// *fs.PathError wrapping fs.ErrNotExist.
func (s *tarSource) Open(ctx context.Context, path string) (io.ReadCloser, error) {
	b, err := s.itemBytes(ctx, path)
	if err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

func (s *tarSource) itemBytes(ctx context.Context, path string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b, ok := s.data[path]
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
	}
	return b, nil
}
