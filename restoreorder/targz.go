package restoreorder

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
)

// DefaultMaxBytes is the most item bytes [FromTarGz] holds when [WithMaxBytes] is not
// given: 4 GiB.
const DefaultMaxBytes = 4 << 30

// A TarGzOption configures [FromTarGz].
type TarGzOption interface{ applyTarGz(*tarGzConfig) }

type tarGzOptionFunc func(*tarGzConfig)

func (f tarGzOptionFunc) applyTarGz(c *tarGzConfig) { f(c) }

type tarGzConfig struct {
	maxBytes int64
}

// WithMaxBytes limits the total size of the item files [FromTarGz] reads into memory,
// after decompression; beyond it FromTarGz fails with [ErrTooLarge]. While it reads an
// item, FromTarGz holds at most 1 MiB more than the items it keeps. The default is
// [DefaultMaxBytes]; n <= 0 removes the limit.
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
// ends without its end-of-archive marker (two zero blocks: a tar cut between two entries
// would otherwise lose the rest silently) or holds data after it, if an entry's path is
// absolute or climbs out with "..", if an entry is a link, device or other special file,
// if a file's path appears twice, if the items do not fit the layout, or if there is no
// resources directory; with [ErrInvalidItem] if an item file is not a JSON object; and
// with [ErrTooLarge] past the limit of [WithMaxBytes]. It never panics on bad input. It
// does not take a context: to stop it, make r fail (close the file or connection it
// reads).
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
	sawResources := false
	var total int64
	zc := &countingReader{r: zr}
	tr := tar.NewReader(zc)
	for {
		// The rest of the previous entry is read here, not skipped inside Next, so that
		// the next header's offset is known: the entry's end rounded up to a block.
		if _, err := io.Copy(io.Discard, tr); err != nil {
			return nil, fmt.Errorf("restoreorder: read backup: %w: %v", ErrMalformed, err)
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
			return nil, fmt.Errorf("restoreorder: read backup: %w: %v", ErrMalformed, err)
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
			continue
		case tar.TypeReg:
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
			return nil, fmt.Errorf("restoreorder: %s: %w: items exceed %d bytes", name, ErrTooLarge, cfg.maxBytes)
		}
		item, err := readItem(name, tr, hdr.Size)
		if err != nil {
			return nil, err
		}
		total += hdr.Size
		data[name] = item
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

// tarBlock is the size of a tar block; headers start on block boundaries, and the end
// of an archive is two blocks of zeros.
const tarBlock = 512

// checkEnd checks how a tar stream ended: archive/tar's Next reports io.EOF alike for two
// zero blocks, one zero block and then nothing, and nothing at all where a header should
// be, so a tar cut between two entries would pass for a whole archive. header is the
// offset at which Next looked for a header. Only two zero blocks end an archive. After
// them, the rest of the gzip stream is read to its end, so that its checksum and length
// are checked, and it may hold only zeros (tar pads an archive to its record size).
func checkEnd(zc *countingReader, header int64) error {
	if zc.n != header+2*tarBlock {
		return fmt.Errorf("restoreorder: read backup: %w: the archive is cut short (no end-of-archive marker after byte %d)", ErrMalformed, header)
	}
	if _, err := io.Copy(zeroWriter{}, zc); err != nil {
		if errors.Is(err, errNotZero) {
			return fmt.Errorf("restoreorder: read backup: %w: data after the end of the archive", ErrMalformed)
		}
		return fmt.Errorf("restoreorder: read backup: %w: after the end of the archive: %v", ErrMalformed, err)
	}
	return nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
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

// readItem reads the n bytes of the item at path, the current entry, and checks that they
// hold a JSON object. The first chunk (1 MiB) is read and checked before the rest, so an
// entry that does not start with "{" fails before more of it is held, and a header that
// claims more bytes than the entry holds costs at most one chunk; a bigger item then
// takes one allocation of its exact size, so that reading it holds at most one chunk
// more than the item (a buffer that grows by doubling would hold up to twice as much).
func readItem(path string, r io.Reader, n int64) ([]byte, error) {
	const chunk = 1 << 20
	first := make([]byte, min(n, chunk))
	if _, err := io.ReadFull(r, first); err != nil {
		return nil, fmt.Errorf("restoreorder: read backup: %s: %w: %v", path, ErrMalformed, err)
	}
	b := first
	if n > chunk {
		// The brace is checked once the first chunk holds more than white space.
		if len(bytes.TrimLeft(first, " \t\r\n")) > 0 {
			if err := checkBrace(path, first); err != nil {
				return nil, err
			}
		}
		b = make([]byte, n)
		copy(b, first)
		if _, err := io.ReadFull(r, b[chunk:]); err != nil {
			return nil, fmt.Errorf("restoreorder: read backup: %s: %w: %v", path, ErrMalformed, err)
		}
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
