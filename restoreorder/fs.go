package restoreorder

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
)

// FromFS returns a [Source] over an extracted Velero backup tarball: fsys holds
// resources/ at its root (metadata/ and any other top-level files are ignored). Both
// backup formats are read: resources/<resource>/{cluster,namespaces}/... and, from
// format 1.1, the <version>-preferredversion and <version> directories beside them. When
// a resource has the classic directories they are used; otherwise its
// <version>-preferredversion directory is; other versions are never used (see the
// package documentation).
//
// FromFS lists the whole resources/ tree at once (names only) and fails with an error
// wrapping [ErrMalformed] if there is no resources directory, if a file, a symbolic link
// or a directory is where the layout does not allow it, or if a resource has no usable
// version directory; it returns the file system's own errors wrapped. Items are read
// only when asked for, so an item that is not a JSON object is reported by [Collect]
// (when it reads labels) or [ReadItem], with [ErrInvalidItem].
//
// The Source is safe for concurrent use if fsys is; [os.DirFS] and [testing/fstest.MapFS]
// are.
func FromFS(fsys fs.FS) (Source, error) {
	info, err := fs.Stat(fsys, resourcesDir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, malformed(resourcesDir, "no resources directory")
	case err != nil:
		return nil, fmt.Errorf("restoreorder: %w", err)
	case !info.IsDir():
		return nil, malformed(resourcesDir, "not a directory")
	}
	b := newBuilder()
	err = fs.WalkDir(fsys, resourcesDir, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir():
			return nil
		case !d.Type().IsRegular():
			return malformed(p, "not a regular file (%v)", d.Type())
		}
		if _, err := b.add(p); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, ErrMalformed) {
			return nil, err
		}
		return nil, fmt.Errorf("restoreorder: list backup: %w", err)
	}
	x, _, err := b.build()
	if err != nil {
		return nil, err
	}
	return &fsSource{index: x, fsys: fsys}, nil
}

type fsSource struct {
	*index
	fsys fs.FS
}

var _ Source = (*fsSource)(nil)

// Open opens the file at path. A path that names no file fails with an *fs.PathError
// wrapping fs.ErrNotExist.
func (s *fsSource) Open(ctx context.Context, path string) (io.ReadCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return s.fsys.Open(path)
}
