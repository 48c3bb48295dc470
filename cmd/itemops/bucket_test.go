package main

import (
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/restoreorder"
)

// TestRewriteTarballRefusesCut checks that a backup tarball cut short is not rewritten:
// the copy would silently hold only the entries before the cut.
func TestRewriteTarballRefusesCut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "b.tar.gz")
	require.NoError(t, writeAtomic(path, func(w io.Writer) error {
		out := newTarWriter(w, time.Unix(0, 0))
		for _, name := range []string{"x", "y", "z"} {
			body := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"` + name + `"}}`)
			if err := out.add("resources/pods/namespaces/a/"+name+".json", body); err != nil {
				return err
			}
		}
		return out.close()
	}))
	whole, err := os.ReadFile(path)
	require.NoError(t, err)
	var seen []string
	record := func(name string, data []byte) ([]byte, error) {
		seen = append(seen, name)
		return data, nil
	}
	require.NoError(t, rewriteTarball(path, record))
	require.Contains(t, seen, "resources/pods/namespaces/a/z.json")

	cut := whole[:len(whole)-4] // the gzip trailer cut in half
	require.NoError(t, os.WriteFile(path, cut, 0o644))
	seen = nil
	err = rewriteTarball(path, record)
	require.ErrorIs(t, err, restoreorder.ErrMalformed)
	require.Empty(t, seen)
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, cut, after, "the cut tarball was changed")
}
