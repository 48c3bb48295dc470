// Package boltfault damages bbolt files on purpose, for the tests that check how the
// store and the itemops command meet damage.
package boltfault

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"

	bolt "go.etcd.io/bbolt"
)

// LoopBranch finds the first branch page of the bbolt file at path and points its first
// child back at the page itself, so that a read descending the tree never ends. It
// returns the page's number. It fails when the file cannot be read or written or holds
// no branch page (a store too small to need one).
func LoopBranch(path string) (int, error) {
	// Writable: opened read-only, bbolt cannot tell free pages from used ones.
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		return 0, err
	}
	pageSize, branch := db.Info().PageSize, 0
	err = db.View(func(tx *bolt.Tx) error {
		for id := 2; branch == 0; id++ {
			info, err := tx.Page(id)
			if err != nil || info == nil {
				return fmt.Errorf("boltfault: no branch page in %s (page %d: %v)", path, id, err)
			}
			if info.Type == "branch" {
				branch = id
			}
		}
		return nil
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	// The first branch element follows the 16-byte page header: its position and key
	// size (4 bytes each), then the child's page number.
	binary.NativeEndian.PutUint64(b[branch*pageSize+16+8:], uint64(branch))
	return branch, os.WriteFile(path, b, 0o600)
}

// PageSize is the page size of the stores the tests damage (bbolt's default on the
// machines CI runs on).
const PageSize = 4096

// A Meta is what the meta page of a bbolt file's last transaction says, read from the
// file's bytes as bbolt lays them out (after a page's 16-byte header: magic, version,
// page size, flags, the root bucket's root page and sequence, the freelist's page, the
// number of pages, the transaction ID).
type Meta struct {
	Page     int // 0 or 1: the meta page of the last transaction
	Root     int // the root bucket's root page
	Freelist int // the freelist's page
	Pages    int // how many pages bbolt uses
}

// LastMeta returns the meta of the last transaction of the bbolt file b, whose pages
// are PageSize bytes: the meta page with the higher transaction ID.
func LastMeta(b []byte) Meta {
	ne := binary.NativeEndian
	var m Meta
	if ne.Uint64(b[PageSize+16+48:]) > ne.Uint64(b[16+48:]) {
		m.Page = 1
	}
	at := m.Page*PageSize + 16
	m.Root = int(ne.Uint64(b[at+16:]))
	m.Freelist = int(ne.Uint64(b[at+32:]))
	m.Pages = int(ne.Uint64(b[at+40:]))
	return m
}

// InUse returns the offset, in the bbolt file b, of the first copy of each of texts
// that lies in a leaf page the last transaction uses: free pages hold stale copies. It
// fails when a text has no such copy or the file cannot be read.
func InUse(b []byte, texts ...string) ([]int, error) {
	dir, err := os.MkdirTemp("", "boltfault-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "pages.db")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return nil, err
	}
	db, err := bolt.Open(path, 0o600, nil) // writable: read-only, tx.Page fails (free pages not loaded)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	offsets := make([]int, len(texts))
	err = db.View(func(tx *bolt.Tx) error {
		for n, s := range texts {
			offsets[n] = -1
			for from := 0; offsets[n] < 0; {
				i := bytes.Index(b[from:], []byte(s))
				if i < 0 {
					return fmt.Errorf("boltfault: %q is in no leaf page in use", s)
				}
				info, err := tx.Page((from + i) / db.Info().PageSize)
				if err != nil {
					return err
				}
				if info != nil && info.Type == "leaf" {
					offsets[n] = from + i
				}
				from += i + 1
			}
		}
		return nil
	})
	return offsets, err
}

// NotStores returns the contents of files that exist and are not itemops stores, by
// name: an empty file, text, a bbolt file without buckets and a bbolt file of another
// program. It fails when bbolt cannot write its files in a temporary directory.
func NotStores() (map[string][]byte, error) {
	dir, err := os.MkdirTemp("", "boltfault-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	files := map[string][]byte{"empty": {}, "text": bytes.Repeat([]byte("itemops "), 1024)}
	for _, name := range []string{"bbolt without buckets", "bbolt of another program"} {
		path := filepath.Join(dir, name)
		db, err := bolt.Open(path, 0o600, nil)
		if err != nil {
			return nil, err
		}
		if name == "bbolt of another program" {
			err = db.Update(func(tx *bolt.Tx) error {
				_, err := tx.CreateBucket([]byte("theirs"))
				return err
			})
		}
		if cerr := db.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, err
		}
		if files[name], err = os.ReadFile(path); err != nil {
			return nil, err
		}
	}
	return files, nil
}
