package restoreorder_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/itemops/itemops/restoreorder"
)

// TestCollectVeleroFilterCases runs the cases of Velero's TestRestoreResourceFiltering
// and TestRestoreNamespaceMapping (pkg/restore/restore_test.go, v1.16), as facts: a
// backup, a restore's filter, and the items Velero restores, each as
// "<target namespace>/<name>" by resource ("/<name>" for cluster-scoped items). Then
// the cases of Velero's getOrderedResourceCollection for namespace objects, which it
// collects as cluster-scoped items. Collect's default filter gives Velero's list.
func TestCollectVeleroFilterCases(t *testing.T) {
	lbl := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	// Most of Velero's cases restore from this backup.
	standard := []memItem{
		{resource: "pods", namespace: "ns-1", name: "pod-1"}, {resource: "pods", namespace: "ns-2", name: "pod-2"},
		{resource: "deployments.apps", namespace: "ns-1", name: "deploy-1"}, {resource: "deployments.apps", namespace: "ns-2", name: "deploy-2"},
		{resource: "persistentvolumes", name: "pv-1"}, {resource: "persistentvolumes", name: "pv-2"},
	}
	podsAndPVs := []memItem{standard[0], standard[1], standard[4], standard[5]}
	withNamespaces := append([]memItem{{resource: "namespaces", name: "ns-1"}, {resource: "namespaces", name: "ns-2"}}, standard...)
	bothPodsAndDeploys := map[string][]string{
		"pods": {"ns-1/pod-1", "ns-2/pod-2"}, "deployments.apps": {"ns-1/deploy-1", "ns-2/deploy-2"},
	}
	everything := map[string][]string{
		"pods": {"ns-1/pod-1", "ns-2/pod-2"}, "deployments.apps": {"ns-1/deploy-1", "ns-2/deploy-2"},
		"persistentvolumes": {"/pv-1", "/pv-2"},
	}
	onlyNs1 := map[string][]string{"pods": {"ns-1/pod-1"}, "deployments.apps": {"ns-1/deploy-1"}}
	sel := func(s string) labels.Selector { return selector(t, s) }

	tests := []struct {
		name   string
		backup []memItem
		filter restoreorder.Filter
		want   map[string][]string
	}{
		{"no filters restores everything", podsAndPVs, restoreorder.Filter{},
			map[string][]string{"pods": {"ns-1/pod-1", "ns-2/pod-2"}, "persistentvolumes": {"/pv-1", "/pv-2"}}},
		{"included resources filter only restores resources of those types", podsAndPVs,
			restoreorder.Filter{IncludedResources: []string{"pods"}}, map[string][]string{"pods": {"ns-1/pod-1", "ns-2/pod-2"}}},
		{"excluded resources filter only restores resources not of those types", podsAndPVs,
			restoreorder.Filter{ExcludedResources: []string{"pvs"}}, map[string][]string{"pods": {"ns-1/pod-1", "ns-2/pod-2"}}},
		{"included namespaces filter only restores resources in those namespaces", standard,
			restoreorder.Filter{IncludedNamespaces: []string{"ns-1"}}, onlyNs1},
		{"excluded namespaces filter only restores resources not in those namespaces", standard,
			restoreorder.Filter{ExcludedNamespaces: []string{"ns-2"}}, onlyNs1},
		{"IncludeClusterResources=false only restores namespaced resources", standard,
			restoreorder.Filter{IncludeClusterResources: ptr(false)}, bothPodsAndDeploys},
		{"label selector only restores matching resources",
			[]memItem{
				{resource: "pods", namespace: "ns-1", name: "pod-1", labels: lbl("a", "b")}, {resource: "pods", namespace: "ns-2", name: "pod-2"},
				{resource: "deployments.apps", namespace: "ns-1", name: "deploy-1"}, {resource: "deployments.apps", namespace: "ns-2", name: "deploy-2", labels: lbl("a", "b")},
				{resource: "persistentvolumes", name: "pv-1", labels: lbl("a", "b")}, {resource: "persistentvolumes", name: "pv-2", labels: lbl("a", "c")},
			},
			restoreorder.Filter{LabelSelector: sel("a=b")},
			map[string][]string{"pods": {"ns-1/pod-1"}, "deployments.apps": {"ns-2/deploy-2"}, "persistentvolumes": {"/pv-1"}}},
		{"OrLabelSelectors only restores matching resources",
			[]memItem{
				{resource: "pods", namespace: "ns-1", name: "pod-1", labels: lbl("a1", "b1")}, {resource: "pods", namespace: "ns-2", name: "pod-2"},
				{resource: "deployments.apps", namespace: "ns-1", name: "deploy-1"}, {resource: "deployments.apps", namespace: "ns-2", name: "deploy-2", labels: lbl("a3", "b3")},
				{resource: "persistentvolumes", name: "pv-1", labels: lbl("a5", "b5")}, {resource: "persistentvolumes", name: "pv-2", labels: lbl("a4", "b4")},
			},
			restoreorder.Filter{OrLabelSelectors: []labels.Selector{sel("a1=b1"), sel("a2=b2"), sel("a3=b3"), sel("a4=b4")}},
			map[string][]string{"pods": {"ns-1/pod-1"}, "deployments.apps": {"ns-2/deploy-2"}, "persistentvolumes": {"/pv-2"}}},
		{"should include cluster-scoped resources if restoring subset of namespaces and IncludeClusterResources=true", standard,
			restoreorder.Filter{IncludedNamespaces: []string{"ns-1"}, IncludeClusterResources: ptr(true)},
			map[string][]string{"pods": {"ns-1/pod-1"}, "deployments.apps": {"ns-1/deploy-1"}, "persistentvolumes": {"/pv-1", "/pv-2"}}},
		{"should not include cluster-scoped resources if restoring subset of namespaces and IncludeClusterResources=false", standard,
			restoreorder.Filter{IncludedNamespaces: []string{"ns-1"}, IncludeClusterResources: ptr(false)}, onlyNs1},
		{"should not include cluster-scoped resources if restoring subset of namespaces and IncludeClusterResources=nil", standard,
			restoreorder.Filter{IncludedNamespaces: []string{"ns-1"}}, onlyNs1},
		{"should include cluster-scoped resources if restoring all namespaces and IncludeClusterResources=true", standard,
			restoreorder.Filter{IncludeClusterResources: ptr(true)}, everything},
		{"should not include cluster-scoped resources if restoring all namespaces and IncludeClusterResources=false", standard,
			restoreorder.Filter{IncludeClusterResources: ptr(false)}, bothPodsAndDeploys},
		{"when a wildcard and a specific resource are included, the wildcard takes precedence", standard,
			restoreorder.Filter{IncludedResources: []string{"*", "pods"}}, everything},
		{"unresolvable included resources are ignored", standard,
			restoreorder.Filter{IncludedResources: []string{"pods", "unresolvable"}}, map[string][]string{"pods": {"ns-1/pod-1", "ns-2/pod-2"}}},
		{"unresolvable excluded resources are ignored", standard,
			restoreorder.Filter{ExcludedResources: []string{"deployments", "unresolvable"}},
			map[string][]string{"pods": {"ns-1/pod-1", "ns-2/pod-2"}, "persistentvolumes": {"/pv-1", "/pv-2"}}},
		{"service accounts are restored", []memItem{{resource: "serviceaccounts", namespace: "ns-1", name: "sa-1"}},
			restoreorder.Filter{}, map[string][]string{"serviceaccounts": {"ns-1/sa-1"}}},

		// TestRestoreNamespaceMapping.
		{"namespace mappings are applied",
			[]memItem{{resource: "pods", namespace: "ns-1", name: "pod-1"}, {resource: "pods", namespace: "ns-2", name: "pod-2"}, {resource: "pods", namespace: "ns-3", name: "pod-3"}},
			restoreorder.Filter{NamespaceMapping: map[string]string{"ns-1": "mapped-ns-1", "ns-2": "mapped-ns-2"}},
			map[string][]string{"pods": {"mapped-ns-1/pod-1", "mapped-ns-2/pod-2", "ns-3/pod-3"}}},
		{"namespace mappings are applied when IncludedNamespaces are specified",
			[]memItem{{resource: "pods", namespace: "ns-1", name: "pod-1"}, {resource: "pods", namespace: "ns-2", name: "pod-2"}, {resource: "pods", namespace: "ns-3", name: "pod-3"}},
			restoreorder.Filter{IncludedNamespaces: []string{"ns-1", "ns-2"}, NamespaceMapping: map[string]string{"ns-1": "mapped-ns-1", "ns-2": "mapped-ns-2"}},
			map[string][]string{"pods": {"mapped-ns-1/pod-1", "mapped-ns-2/pod-2"}}},

		// getOrderedResourceCollection: namespace objects are cluster-scoped items.
		{"a restore of some namespaces collects no namespace objects", withNamespaces,
			restoreorder.Filter{IncludedNamespaces: []string{"ns-1"}}, onlyNs1},
		{"nor with IncludeClusterResources=false", withNamespaces,
			restoreorder.Filter{IncludedNamespaces: []string{"ns-1"}, IncludeClusterResources: ptr(false)}, onlyNs1},
		{"IncludeClusterResources=true collects every namespace object", withNamespaces,
			restoreorder.Filter{IncludedNamespaces: []string{"ns-1"}, IncludeClusterResources: ptr(true)},
			map[string][]string{"pods": {"ns-1/pod-1"}, "deployments.apps": {"ns-1/deploy-1"}, "persistentvolumes": {"/pv-1", "/pv-2"}, "namespaces": {"/ns-1", "/ns-2"}}},
		{"a restore of every namespace collects them at cluster scope, mapping or not", withNamespaces,
			restoreorder.Filter{NamespaceMapping: map[string]string{"ns-1": "mapped-ns-1"}},
			map[string][]string{"pods": {"mapped-ns-1/pod-1", "ns-2/pod-2"}, "deployments.apps": {"mapped-ns-1/deploy-1", "ns-2/deploy-2"}, "persistentvolumes": {"/pv-1", "/pv-2"}, "namespaces": {"/ns-1", "/ns-2"}}},
	}
	// Velero resolves names through the cluster's discovery, short names included; a
	// fork passes such a resolver to Collect. This one knows the short name the cases use.
	discovery := func(name string, resources []string) (string, bool) {
		if name == "pvs" {
			name = "persistentvolumes"
		}
		return restoreorder.ResolveName(name, resources)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := restoreorder.Collect(context.Background(), newMemSource(tc.backup...), restoreorder.Priorities{}, tc.filter, restoreorder.WithResolver(discovery))
			require.NoError(t, err)
			got := map[string][]string{}
			n := 0
			for it := range c.Items() {
				got[it.Resource] = append(got[it.Resource], it.TargetNamespace+"/"+it.Name)
				n++
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("restored items (-Velero +Collect):\n%s", diff)
			}
			require.Equal(t, n, c.Total(), "total")
		})
	}

	// Velero's "wildcard excludes are ignored" holds for its restorer alone: its restore
	// controller refuses such a restore first ("excludes list cannot contain '*'"), so
	// no restore reaches it. Here "*" excludes every resource, as Filter documents.
	c, err := restoreorder.Collect(context.Background(), newMemSource(standard...), restoreorder.Priorities{}, restoreorder.Filter{ExcludedResources: []string{"*"}})
	require.NoError(t, err)
	require.Zero(t, c.Total(), "ExcludedResources [*]: a difference documented in Filter")
}
