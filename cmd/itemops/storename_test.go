package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseStoreName(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want storeName
		err  string // a part of the error; empty when the name parses
	}{
		{in: "demo.db", want: storeName{kind: boltStore, path: "demo.db"}},
		{in: "/tmp/demo.db", want: storeName{kind: boltStore, path: "/tmp/demo.db"}},
		{in: "dir/with:colon", want: storeName{kind: boltStore, path: "dir/with:colon"}},
		{in: "bolt:///tmp/demo.db", want: storeName{kind: boltStore, path: "/tmp/demo.db", url: true}},
		{in: "bolt:///tmp/a%20b", want: storeName{kind: boltStore, path: "/tmp/a%20b", url: true}},
		{in: "etcd://127.0.0.1:2379/itemops", want: storeName{kind: etcdStore, endpoints: []string{"127.0.0.1:2379"}, prefix: "itemops"}},
		{in: "etcd://a:1,b:2,[::1]:2379/p/q/", want: storeName{kind: etcdStore, endpoints: []string{"a:1", "b:2", "[::1]:2379"}, prefix: "p/q/"}},
		{in: "etcd://etcd.example:2379/", want: storeName{kind: etcdStore, endpoints: []string{"etcd.example:2379"}}},
		{in: "kube:///ops", want: storeName{kind: kubeStore, namespace: "ops"}},
		{in: "kube://kind-itemops/my-namespace", want: storeName{kind: kubeStore, context: "kind-itemops", namespace: "my-namespace"}},
		{in: "kube://arn:aws:eks:eu-west-1:1234:cluster/prod/velero", want: storeName{kind: kubeStore, context: "arn:aws:eks:eu-west-1:1234:cluster/prod", namespace: "velero"}},

		{in: "", err: "empty"},
		{in: "s3://bucket/key", err: `unknown scheme "s3"`},
		{in: "BOLT:///tmp/x", err: "unknown scheme"},
		{in: "bolt://tmp/demo.db", err: "ABSOLUTE"},
		{in: "bolt:///", err: "no file"},
		{in: "bolt:///tmp/\x1b[2J", err: "control character"},
		{in: "etcd://127.0.0.1:2379", err: "slash before the prefix"},
		{in: "etcd:///prefix", err: "no endpoint"},
		{in: "etcd://127.0.0.1/p", err: "want HOST:PORT"},
		{in: "etcd://:2379/p", err: "no host"},
		{in: "etcd://h:0/p", err: "1 to 65535"},
		{in: "etcd://h:65536/p", err: "1 to 65535"},
		{in: "etcd://h:+1/p", err: "1 to 65535"},
		{in: "etcd://h:02379/p", err: "1 to 65535"},
		{in: "etcd://a:1,,b:2/p", err: "want HOST:PORT"},
		{in: "kube://ns", err: "want kube://"},
		{in: "kube://ctx/", err: "no namespace"},
		{in: "kube:///My-NS", err: "DNS-1123"},
		{in: "kube:///-ns", err: "DNS-1123"},
		{in: "kube:///" + strings.Repeat("a", 64), err: "DNS-1123"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseStoreName(tc.in)
			if tc.err != "" {
				require.Error(t, err)
				require.True(t, errors.Is(err, errStoreName), "%v does not wrap errStoreName", err)
				require.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			// The canonical form parses to the same name.
			again, err := parseStoreName(got.String())
			require.NoError(t, err)
			require.Equal(t, got, again)
		})
	}
}

// FuzzParseStoreName holds parseStoreName to its contract on any text: it never panics;
// it fails only with errStoreName; a name it accepts is printed in a form that parses
// back to it; and what it accepts holds what the stores need (absolute bolt URLs, etcd
// endpoints with a host and a port, namespaces that are DNS labels).
func FuzzParseStoreName(f *testing.F) {
	for _, s := range []string{"demo.db", "bolt:///tmp/x.db", "etcd://127.0.0.1:2379/itemops", "etcd://a:1,b:2/",
		"kube:///ops", "kube://ctx/a/ns", "etcd://[::1]:2379/p", "kube://", "etcd://", "bolt://", "x://y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseStoreName(s)
		if err != nil {
			if !errors.Is(err, errStoreName) {
				t.Fatalf("parseStoreName(%q): %v does not wrap errStoreName", s, err)
			}
			return
		}
		again, err := parseStoreName(n.String())
		if err != nil {
			t.Fatalf("parseStoreName(%q) = %+v, whose form %q does not parse: %v", s, n, n.String(), err)
		}
		if n.String() != again.String() || n.kind != again.kind {
			t.Fatalf("parseStoreName(%q) = %+v, but its form %q parses to %+v", s, n, n.String(), again)
		}
		switch n.kind {
		case boltStore:
			if n.path == "" || (n.url && !strings.HasPrefix(n.path, "/")) {
				t.Fatalf("parseStoreName(%q): bolt path %q", s, n.path)
			}
		case etcdStore:
			if len(n.endpoints) == 0 {
				t.Fatalf("parseStoreName(%q): no endpoint", s)
			}
			for _, e := range n.endpoints {
				if strings.ContainsAny(e, ",/") || !strings.Contains(e, ":") {
					t.Fatalf("parseStoreName(%q): endpoint %q", s, e)
				}
			}
		case kubeStore:
			if !dnsLabel(n.namespace) {
				t.Fatalf("parseStoreName(%q): namespace %q", s, n.namespace)
			}
		}
	})
}
