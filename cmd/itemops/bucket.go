package main

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
	"time"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/opsfile"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/restoreorder"
)

// A bucket is a directory laid out as Velero lays out its object-store bucket:
//
//	backups/<backup>/<backup>.tar.gz
//	backups/<backup>/<backup>-itemoperations.json.gz
//	restores/<restore>/restore-<restore>-itemoperations.json.gz
type bucket struct{ dir string }

// tarball returns the path of backup's tarball.
func (b bucket) tarball(backup string) string {
	return filepath.Join(b.dir, "backups", backup, backup+".tar.gz")
}

// operationsFile returns the path of the itemoperations file of o.
func (b bucket) operationsFile(o operations.Owner) string {
	if o.Kind == phase.Backup {
		return filepath.Join(b.dir, filepath.FromSlash(opsfile.BackupOperationsKey(o.Name)))
	}
	return filepath.Join(b.dir, filepath.FromSlash(opsfile.RestoreOperationsKey(o.Name)))
}

// writeOperations writes the itemoperations file of o from the operations s holds.
func (b bucket) writeOperations(ctx context.Context, s operations.Store, o operations.Owner) error {
	ops, err := s.ListOperations(ctx, o, operations.OperationFilter{})
	if err != nil {
		return err
	}
	return writeAtomic(b.operationsFile(o), func(w io.Writer) error {
		enc := opsfile.NewEncoder(w, o.Kind)
		for _, op := range ops {
			if err := enc.Encode(op); err != nil {
				return err
			}
		}
		return enc.Close()
	})
}

// writeAtomic writes a file with write, through a temporary file beside it that replaces
// it only once written whole and synced, so a crash never leaves half a file at path.
func writeAtomic(path string, write func(w io.Writer) error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	err = write(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// A tarWriter writes a backup tarball: a gzip'd tar of regular files.
type tarWriter struct {
	zw *gzip.Writer
	tw *tar.Writer
	at time.Time // the modification time of every entry
}

func newTarWriter(w io.Writer, at time.Time) *tarWriter {
	zw := gzip.NewWriter(w)
	return &tarWriter{zw: zw, tw: tar.NewWriter(zw), at: at}
}

// add writes a file named name holding data.
func (t *tarWriter) add(name string, data []byte) error {
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: t.at, Format: tar.FormatPAX}
	if err := t.tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err := t.tw.Write(data)
	return err
}

// close ends the tar and the gzip streams.
func (t *tarWriter) close() error {
	return errors.Join(t.tw.Close(), t.zw.Close())
}

// rewriteTarball replaces the tarball at path by a copy whose files pass through
// change, which returns a file's new content (or the same). A tarball that
// restoreorder.FromTarGz refuses (cut short, damaged) is left as it is and fails, so
// that the copy never silently loses the entries after a cut.
func rewriteTarball(path string, change func(name string, data []byte) ([]byte, error)) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if _, err := restoreorder.FromTarGz(bytes.NewReader(old), restoreorder.WithMaxBytes(0)); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(old))
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	tr := tar.NewReader(zr)
	return writeAtomic(path, func(w io.Writer) error {
		out := newTarWriter(w, time.Now())
		for {
			hdr, err := tr.Next()
			if err == io.EOF {
				return out.close()
			}
			if err != nil {
				return fmt.Errorf("read %s: %w", path, err)
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				return fmt.Errorf("read %s: %w", path, err)
			}
			if data, err = change(hdr.Name, data); err != nil {
				return err
			}
			out.at = hdr.ModTime
			if err := out.add(hdr.Name, data); err != nil {
				return err
			}
		}
	})
}
