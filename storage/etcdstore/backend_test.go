package etcdstore

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/storage/kv"
	"github.com/itemops/itemops/storage/kv/kvtest"
)

// newTestBackend returns a backend under a fresh prefix of the test server.
func newTestBackend(t testing.TB, o *Options) *backend {
	t.Helper()
	opts, err := o.withDefaults()
	require.NoError(t, err)
	return newBackend(newClient(t, testServer), newPrefix(), opts)
}

func put(t testing.TB, b kv.Backend, kvs ...string) {
	t.Helper()
	var ws []kv.Write
	for i := 0; i < len(kvs); i += 2 {
		ws = append(ws, kv.Write{Key: []byte(kvs[i]), Value: []byte(kvs[i+1])})
	}
	require.NoError(t, b.Commit(bg, nil, ws))
}

// scan returns key=value of every key in [start, end).
func scan(ctx context.Context, r kv.Reader, start, end string) ([]string, error) {
	var got []string
	err := r.Scan(ctx, []byte(start), []byte(end), func(k, v []byte, _ kv.Version) error {
		got = append(got, string(k)+"="+string(v))
		return nil
	})
	return got, err
}

func TestBackendConformance(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts *Options
	}{
		{"defaults", nil},
		{"small pages and limits", &Options{PageSize: 2, MaxTxnOps: minTxnOps, MaxRequestBytes: minRequestBytes}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kvtest.Run(t, func(t *testing.T) kv.Backend { return newTestBackend(t, tc.opts) })
		})
	}
}

// TestBackendReadPinsRevision writes from another backend while a Read runs: the Read
// sees none of it, in Gets or in Scans of many pages.
func TestBackendReadPinsRevision(t *testing.T) {
	b := newTestBackend(t, &Options{PageSize: 2})
	other := newBackend(newClient(t, testServer), b.prefix, b.opts)
	put(t, b, "a", "1", "b", "1", "c", "1", "d", "1", "e", "1")
	err := b.Read(bg, func(r kv.Reader) error {
		v, ver, err := r.Get(bg, []byte("a"))
		require.NoError(t, err)
		require.Equal(t, "1", string(v))
		require.NotZero(t, ver)
		put(t, other, "a", "2", "c", "2", "bb", "2", "f", "2")
		require.NoError(t, other.Commit(bg, nil, []kv.Write{{Key: []byte("e"), Delete: true}}))

		v, ver2, err := r.Get(bg, []byte("a"))
		require.NoError(t, err)
		require.Equal(t, "1", string(v), "a key changed after the read began")
		require.Equal(t, ver, ver2)
		v, ver, err = r.Get(bg, []byte("f"))
		require.NoError(t, err)
		require.Nil(t, v, "a key made after the read began")
		require.Zero(t, ver)
		got, err := scan(bg, r, "", "")
		require.NoError(t, err)
		if d := cmp.Diff([]string{"a=1", "b=1", "c=1", "d=1", "e=1"}, got); d != "" {
			t.Errorf("Scan (-want +got):\n%s", d)
		}
		return nil
	})
	require.NoError(t, err)
	err = b.Read(bg, func(r kv.Reader) error {
		got, err := scan(bg, r, "b", "e")
		require.NoError(t, err)
		require.Equal(t, []string{"b=1", "bb=2", "c=2", "d=1"}, got, "a later read")
		return nil
	})
	require.NoError(t, err)
}

// TestBackendCompacted compacts etcd past the revision of a running Read: its next page
// fails with an error wrapping operations.ErrConflict, and a new Read works.
func TestBackendCompacted(t *testing.T) {
	b := newTestBackend(t, &Options{PageSize: 1})
	put(t, b, "a", "1", "b", "1")
	err := b.Read(bg, func(r kv.Reader) error {
		if _, _, err := r.Get(bg, []byte("a")); err != nil {
			return err
		}
		put(t, b, "a", "2")
		resp, err := b.client.Get(bg, "any")
		require.NoError(t, err)
		_, err = b.client.Compact(bg, resp.Header.Revision)
		require.NoError(t, err)
		_, err = scan(bg, r, "", "")
		return err
	})
	require.ErrorIs(t, err, operations.ErrConflict)
	require.ErrorContains(t, err, "compacted")
	err = b.Read(bg, func(r kv.Reader) error {
		got, err := scan(bg, r, "", "")
		require.Equal(t, []string{"a=2", "b=1"}, got)
		return err
	})
	require.NoError(t, err)
}

// TestBackendPrefix keeps two backends apart whose prefixes nest, and one at the root
// of the key space sees both.
func TestBackendPrefix(t *testing.T) {
	c := newClient(t, testServer)
	opts, err := (&Options{PageSize: 2}).withDefaults()
	require.NoError(t, err)
	p := newPrefix()
	outer, inner := newBackend(c, p, opts), newBackend(c, p+"x/", opts)
	put(t, outer, "a", "1", "y", "1", "z", "1")
	put(t, inner, "a", "2", "b", "2")
	for _, tc := range []struct {
		b    *backend
		want []string
	}{
		{outer, []string{"a=1", "x/a=2", "x/b=2", "y=1", "z=1"}},
		{inner, []string{"a=2", "b=2"}},
	} {
		require.NoError(t, tc.b.Read(bg, func(r kv.Reader) error {
			got, err := scan(bg, r, "", "")
			require.Equal(t, tc.want, got, "keys under %q", tc.b.prefix)
			return err
		}))
	}
	root := newBackend(c, "", opts)
	require.NoError(t, root.Read(bg, func(r kv.Reader) error {
		got, err := scan(bg, r, p, "")
		require.NoError(t, err)
		require.GreaterOrEqual(t, len(got), 5, "keys from %q with no end", p)
		require.Equal(t, p+"a=1", got[0])
		return nil
	}))
}

// TestBackendLimits checks the limits a backend reports and that a larger Commit fails
// with ErrTooLarge and writes nothing.
func TestBackendLimits(t *testing.T) {
	b := newTestBackend(t, &Options{MaxTxnOps: 8, MaxRequestBytes: minRequestBytes})
	lim := b.Limits()
	require.Equal(t, 8, lim.MaxOps)
	require.Equal(t, minRequestBytes-requestOverhead-8*(len(b.prefix)+opOverhead), lim.MaxBytes)

	var ws []kv.Write
	for i := range lim.MaxOps + 1 {
		ws = append(ws, kv.Write{Key: []byte(fmt.Sprint(i)), Value: []byte("v")})
	}
	require.ErrorIs(t, b.Commit(bg, nil, ws), kv.ErrTooLarge, "too many writes")
	require.ErrorIs(t, b.Commit(bg, []kv.Condition{{Key: []byte("c")}}, ws[1:]), kv.ErrTooLarge, "too many conditions and writes")
	big := []kv.Write{{Key: []byte("k"), Value: make([]byte, lim.MaxBytes)}}
	require.ErrorIs(t, b.Commit(bg, nil, big), kv.ErrTooLarge, "too many bytes")
	require.Zero(t, countKeys(t, b.client, b.prefix), "keys written")

	// A server with etcd's defaults takes a commit at the default limits, of the longest
	// keys: the overheads the limits allow for are enough.
	d := newTestBackend(t, nil)
	lim = d.Limits()
	conds := []kv.Condition{{Key: []byte("absent")}}
	ws = ws[:0]
	for i := range lim.MaxOps - len(conds) {
		ws = append(ws, kv.Write{Key: fmt.Appendf(nil, "%08d", i)})
	}
	ws[0].Value = make([]byte, lim.MaxBytes-len(conds[0].Key)-8*len(ws))
	require.NoError(t, d.Commit(bg, conds, ws), "a commit at the default limits")
}
