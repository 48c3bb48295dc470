package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
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

// TestBackupTarballCutAtAnyBlockFails cuts a backup tarball as the demo writes it (a pax
// header before every entry, for its modification time to the nanosecond) at every
// block of its tar, gzipped whole again as a tar that died under "tar | gzip" leaves
// it: restoreorder must refuse every cut, and say where the tar ends.
func TestBackupTarballCutAtAnyBlockFails(t *testing.T) {
	var buf bytes.Buffer
	out := newTarWriter(&buf, time.Unix(1700000000, 123456789))
	for i := range 20 {
		name := fmt.Sprintf("item-%02d", i)
		body := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"` + name + `"}}`)
		require.NoError(t, out.add("resources/pods/namespaces/a/"+name+".json", body))
	}
	require.NoError(t, out.close())
	_, err := restoreorder.FromTarGz(bytes.NewReader(buf.Bytes()))
	require.NoError(t, err)

	zr, err := gzip.NewReader(&buf)
	require.NoError(t, err)
	whole, err := io.ReadAll(zr)
	require.NoError(t, err)
	for cut := 0; cut < len(whole); cut += 512 {
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		_, err := zw.Write(whole[:cut])
		require.NoError(t, err)
		require.NoError(t, zw.Close())
		_, err = restoreorder.FromTarGz(&gz)
		require.ErrorIsf(t, err, restoreorder.ErrMalformed, "cut at byte %d of %d", cut, len(whole))
		require.Containsf(t, err.Error(), fmt.Sprintf("the tar ends at byte %d,", cut), "cut at byte %d", cut)
	}
}
