package boltstore

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
)

// Build makes a new store at path, filled by fill, that shows at path only whole: it
// opens a store in a new temporary file beside path (".<name>.build-*"), calls fill with
// it, closes it, syncs the file to disk, links it to path and syncs the directory. A
// process killed meanwhile leaves no file at path, only perhaps the temporary one; once
// Build returns nil, the store at path is durable.
//
// Build fails, leaving nothing at path and removing the temporary file, with an error
// wrapping fs.ErrExist when path exists (at the start, or when the link is made), with
// fill's error as it is, and with an error of the file system, a file system that
// cannot link included.
func Build(path string, fill func(*Store) error) (err error) {
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("boltstore: build %s: %w", path, os.ErrExist)
	}
	dir, base := filepath.Split(path)
	tmp := filepath.Join(dir, "."+base+".build-"+strconv.FormatUint(rand.Uint64(), 36))
	defer func() {
		if rerr := os.Remove(tmp); err == nil && !os.IsNotExist(rerr) {
			err = rerr
		}
	}()
	s, err := Open(tmp, &Options{NoSync: true})
	if err != nil {
		return err
	}
	err = fill(s)
	if cerr := s.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("boltstore: build %s: %w", path, cerr)
	}
	if err != nil {
		return err
	}
	if err := syncFile(tmp); err != nil {
		return fmt.Errorf("boltstore: build %s: %w", path, err)
	}
	if err := os.Link(tmp, path); err != nil {
		return fmt.Errorf("boltstore: build %s: %w", path, err)
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("boltstore: build %s: %w", path, err)
	}
	return nil
}

// syncFile makes the content of the file at name durable.
func syncFile(name string) error {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
