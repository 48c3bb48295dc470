// Package boltfault damages bbolt files on purpose, for the tests that check how the
// store and the itemops command meet damage.
package boltfault

import (
	"encoding/binary"
	"fmt"
	"os"

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
