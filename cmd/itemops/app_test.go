package main

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

func TestSyntheticApp(t *testing.T) {
	tests := []struct {
		name           string
		items, claims  int
		wantNamespaces int
	}{
		{"the smallest", minItems(0), 0, 1},
		{"defaults", 300, 6, 3},
		{"one claim", 10, 1, 1},
		{"more claims than namespace names", 200, 20, len(namespaceNames)},
		{"exactly the minimum", minItems(5), 5, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			items := syntheticApp(tc.items, tc.claims)
			require.Len(t, items, tc.items)
			byResource := map[string]int{}
			keys := map[string]bool{}
			for _, it := range items {
				byResource[it.gr.String()]++
				require.False(t, keys[it.key()], "%s appears twice", it.key())
				keys[it.key()] = true
				if it.gr == grPVC {
					id, err := newMover(wallClock{}, moverConfig{minDuration: 1, maxDuration: 1}).start(context.Background(), "upload", "b", it.obj)
					require.NoError(t, err, "the mover must accept every claim")
					require.NotEmpty(t, id)
				}
			}
			require.Equal(t, tc.claims, byResource["persistentvolumeclaims"])
			require.Equal(t, tc.claims, byResource["persistentvolumes"])
			require.Equal(t, tc.wantNamespaces, byResource["namespaces"])
			require.Equal(t, 1, byResource["storageclasses.storage.k8s.io"])
			if diff := cmp.Diff(objects(items), objects(syntheticApp(tc.items, tc.claims))); diff != "" {
				t.Errorf("a second call differs (-first +second):\n%s", diff)
			}
		})
	}
}

func objects(items []appItem) []map[string]any {
	var out []map[string]any
	for _, it := range items {
		out = append(out, it.obj.Object)
	}
	return out
}

func TestTarPaths(t *testing.T) {
	items := syntheticApp(minItems(1)+7, 1)
	got := map[string][]string{}
	for _, it := range items {
		got[it.key()] = it.tarPaths()
	}
	want := map[string][]string{
		"persistentvolumeclaims shop/data-0": {"resources/persistentvolumeclaims/namespaces/shop/data-0.json", "resources/persistentvolumeclaims/v1-preferredversion/namespaces/shop/data-0.json"},
		"storageclasses.storage.k8s.io standard": {"resources/storageclasses.storage.k8s.io/cluster/standard.json",
			"resources/storageclasses.storage.k8s.io/v1-preferredversion/cluster/standard.json"},
		"deployments.apps shop/web-0": {"resources/deployments.apps/namespaces/shop/web-0.json", "resources/deployments.apps/v1-preferredversion/namespaces/shop/web-0.json"},
	}
	for key, paths := range want {
		require.Equal(t, paths, got[key], key)
	}
}
