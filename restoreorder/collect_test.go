package restoreorder_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/itemops/itemops/restoreorder"
)

func TestResolveName(t *testing.T) {
	resources := []string{
		"configmaps",
		"customresourcedefinitions.apiextensions.k8s.io",
		"foos.a.example.com",
		"foos.b.example.com",
		"pods",
		"podtemplates",
		"replicasets.apps",
		"storageclasses.storage.k8s.io",
	}
	tests := []struct {
		name, in string
		want     string
		wantOK   bool
	}{
		{name: "exact core", in: "pods", want: "pods", wantOK: true},
		{name: "exact with group", in: "replicasets.apps", want: "replicasets.apps", wantOK: true},
		{name: "the one group", in: "customresourcedefinitions", want: "customresourcedefinitions.apiextensions.k8s.io", wantOK: true},
		{name: "storage classes", in: "storageclasses", want: "storageclasses.storage.k8s.io", wantOK: true},
		{name: "two groups is ambiguous", in: "foos", wantOK: false},
		{name: "a prefix of a name is not a match", in: "pod", wantOK: false},
		{name: "a group prefix is not a match", in: "replicasets.ap", wantOK: false},
		{name: "absent", in: "secrets", wantOK: false},
		{name: "singular is not resolved", in: "storageclass", wantOK: false},
		{name: "empty", in: "", wantOK: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := restoreorder.ResolveName(tc.in, resources)
			require.Equal(t, tc.wantOK, ok, "ResolveName(%q) ok", tc.in)
			require.Equal(t, tc.want, got, "ResolveName(%q)", tc.in)
		})
	}
}

// orderBackup has one item per resource, so the order of items is the order of resources.
func orderBackup() *memSource {
	var items []memItem
	for _, r := range []string{
		"clusters.cluster.x-k8s.io", "configmaps", "customresourcedefinitions.apiextensions.k8s.io",
		"deployments.apps", "foos.a.io", "foos.b.io", "namespaces", "persistentvolumes", "pods",
		"secrets", "storageclasses.storage.k8s.io", "widgets.example.com",
	} {
		ns := "ns"
		if r == "namespaces" || r == "persistentvolumes" || r == "storageclasses.storage.k8s.io" ||
			r == "customresourcedefinitions.apiextensions.k8s.io" {
			ns = ""
		}
		items = append(items, memItem{resource: r, namespace: ns, name: "x"})
	}
	return newMemSource(items...)
}

func TestCollectResourceOrder(t *testing.T) {
	tests := []struct {
		name           string
		priorities     string
		opts           []restoreorder.Option
		want           []string
		wantUnresolved []string
	}{
		{
			name:       "no priorities: sorted",
			priorities: "",
			want: []string{
				"clusters.cluster.x-k8s.io", "configmaps", "customresourcedefinitions.apiextensions.k8s.io",
				"deployments.apps", "foos.a.io", "foos.b.io", "namespaces", "persistentvolumes", "pods",
				"secrets", "storageclasses.storage.k8s.io", "widgets.example.com",
			},
		},
		{
			name:       "defaults: high, rest sorted, low",
			priorities: restoreorder.DefaultPriorities().String(),
			want: []string{
				"customresourcedefinitions.apiextensions.k8s.io", "namespaces", "storageclasses.storage.k8s.io",
				"persistentvolumes", "secrets", "configmaps", "pods",
				"deployments.apps", "foos.a.io", "foos.b.io", "widgets.example.com",
				"clusters.cluster.x-k8s.io",
			},
			wantUnresolved: []string{
				"volumesnapshotclass.snapshot.storage.k8s.io", "volumesnapshotcontents.snapshot.storage.k8s.io",
				"volumesnapshots.snapshot.storage.k8s.io", "datauploads.velero.io", "persistentvolumeclaims",
				"clusterroles", "roles", "serviceaccounts", "clusterrolebindings", "rolebindings", "limitranges",
				"priorityclasses", "replicasets.apps", "clusterclasses.cluster.x-k8s.io", "endpoints", "services",
				"clusterbootstraps.run.tanzu.vmware.com", "clusterresourcesets.addons.cluster.x-k8s.io",
				"apps.kappctrl.k14s.io", "packageinstalls.packaging.carvel.dev",
			},
		},
		{
			name:       "high and low",
			priorities: "pods,deployments,-,configmaps,customresourcedefinitions",
			want: []string{
				"pods", "deployments.apps",
				"clusters.cluster.x-k8s.io", "foos.a.io", "foos.b.io", "namespaces", "persistentvolumes",
				"secrets", "storageclasses.storage.k8s.io", "widgets.example.com",
				"configmaps", "customresourcedefinitions.apiextensions.k8s.io",
			},
		},
		{
			name:       "a resource named twice is collected once, at its first place",
			priorities: "pods,secrets,pods,deployments.apps,deployments,-,pods,secrets,configmaps",
			want: []string{
				"pods", "secrets", "deployments.apps",
				"clusters.cluster.x-k8s.io", "customresourcedefinitions.apiextensions.k8s.io", "foos.a.io",
				"foos.b.io", "namespaces", "persistentvolumes", "storageclasses.storage.k8s.io", "widgets.example.com",
				"configmaps",
			},
		},
		{
			name:       "an ambiguous name resolves to nothing",
			priorities: "foos,widgets",
			want: []string{
				"widgets.example.com",
				"clusters.cluster.x-k8s.io", "configmaps", "customresourcedefinitions.apiextensions.k8s.io",
				"deployments.apps", "foos.a.io", "foos.b.io", "namespaces", "persistentvolumes", "pods",
				"secrets", "storageclasses.storage.k8s.io",
			},
			wantUnresolved: []string{"foos"},
		},
		{
			name:       "a caller's resolver",
			priorities: "po,foo-b,-,cm,nope",
			opts: []restoreorder.Option{restoreorder.WithResolver(func(name string, resources []string) (string, bool) {
				short := map[string]string{"po": "pods", "foo-b": "foos.b.io", "cm": "configmaps", "nope": "nothing.in.backup"}
				r, ok := short[name]
				return r, ok
			})},
			want: []string{
				"pods", "foos.b.io",
				"clusters.cluster.x-k8s.io", "customresourcedefinitions.apiextensions.k8s.io",
				"deployments.apps", "foos.a.io", "namespaces", "persistentvolumes",
				"secrets", "storageclasses.storage.k8s.io", "widgets.example.com",
				"configmaps",
			},
			wantUnresolved: []string{"nope"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := restoreorder.ParsePriorities(tc.priorities)
			require.NoError(t, err)
			c, err := restoreorder.Collect(context.Background(), orderBackup(), p, restoreorder.Filter{}, tc.opts...)
			require.NoError(t, err)
			var got []string
			for it := range c.Items() {
				got = append(got, it.Resource)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("resource order (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantUnresolved, c.Unresolved()); diff != "" {
				t.Errorf("Unresolved (-want +got):\n%s", diff)
			}
			require.Equal(t, len(tc.want), c.Total())
		})
	}
}

func TestCollectNamespaceAndItemOrder(t *testing.T) {
	src := newMemSource(
		memItem{resource: "pods", namespace: "zeta", name: "b"},
		memItem{resource: "pods", namespace: "alpha", name: "b"},
		memItem{resource: "pods", namespace: "alpha", name: "a-1"},
		memItem{resource: "pods", namespace: "alpha", name: "a"},
		memItem{resource: "pods", namespace: "Beta", name: "x"},
		memItem{resource: "widgets.example.com", namespace: "alpha", name: "w"},
		memItem{resource: "widgets.example.com", namespace: "", name: "global"},
	)
	c, err := restoreorder.Collect(context.Background(), src, restoreorder.Priorities{}, restoreorder.Filter{})
	require.NoError(t, err)
	want := []string{
		"pods Beta/x", "pods alpha/a", "pods alpha/a-1", "pods alpha/b", "pods zeta/b",
		"widgets.example.com global", "widgets.example.com alpha/w",
	}
	if diff := cmp.Diff(want, describeAll(c)); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
}

// filterBackup is the backup of the filter tests.
func filterBackup() *memSource {
	return newMemSource(
		memItem{resource: "namespaces", name: "ns-a", labels: map[string]string{"team": "blue"}},
		memItem{resource: "namespaces", name: "ns-b"},
		memItem{resource: "namespaces", name: "kube-system"},
		memItem{resource: "pods", namespace: "ns-a", name: "web", labels: map[string]string{"app": "web"}},
		memItem{resource: "pods", namespace: "ns-a", name: "db", labels: map[string]string{"app": "db", "tier": "backend"}},
		memItem{resource: "pods", namespace: "ns-b", name: "web", labels: map[string]string{"app": "web"}},
		memItem{resource: "pods", namespace: "kube-system", name: "dns", labels: map[string]string{"k8s-app": "dns"}},
		memItem{resource: "configmaps", namespace: "ns-a", name: "cfg"},
		memItem{resource: "configmaps", namespace: "ns-b", name: "cfg", labels: map[string]string{"app": "web"}},
		memItem{resource: "persistentvolumes", name: "pv-1", labels: map[string]string{"app": "db"}},
		memItem{resource: "persistentvolumes", name: "pv-2"},
		memItem{resource: "deployments.apps", namespace: "ns-a", name: "web", labels: map[string]string{"app": "web"}},
		memItem{resource: "clusterroles.rbac.authorization.k8s.io", name: "admin"},
	)
}

func selector(t *testing.T, s string) labels.Selector {
	t.Helper()
	sel, err := labels.Parse(s)
	require.NoError(t, err)
	return sel
}

func ptr[T any](v T) *T { return &v }

func TestCollectFilter(t *testing.T) {
	everything := []string{
		"clusterroles.rbac.authorization.k8s.io admin",
		"configmaps ns-a/cfg", "configmaps ns-b/cfg",
		"deployments.apps ns-a/web",
		"namespaces kube-system/kube-system", "namespaces ns-a/ns-a", "namespaces ns-b/ns-b",
		"persistentvolumes pv-1", "persistentvolumes pv-2",
		"pods kube-system/dns", "pods ns-a/db", "pods ns-a/web", "pods ns-b/web",
	}
	tests := []struct {
		name       string
		filter     func(t *testing.T) restoreorder.Filter
		want       []string
		wantOpens  bool // whether items had to be read for labels
		wantCounts []restoreorder.ResourceCount
	}{
		{
			name:   "zero filter selects everything",
			filter: func(*testing.T) restoreorder.Filter { return restoreorder.Filter{} },
			want:   everything,
			wantCounts: []restoreorder.ResourceCount{
				{Resource: "clusterroles.rbac.authorization.k8s.io", Items: 1}, {Resource: "configmaps", Items: 2},
				{Resource: "deployments.apps", Items: 1}, {Resource: "namespaces", Items: 3},
				{Resource: "persistentvolumes", Items: 2}, {Resource: "pods", Items: 4},
			},
		},
		{
			name:   "included resources",
			filter: func(*testing.T) restoreorder.Filter { return restoreorder.Filter{IncludedResources: []string{"pods"}} },
			want:   []string{"pods kube-system/dns", "pods ns-a/db", "pods ns-a/web", "pods ns-b/web"},
		},
		{
			name: "included resources resolve like priorities",
			filter: func(*testing.T) restoreorder.Filter {
				return restoreorder.Filter{IncludedResources: []string{"deployments", "clusterroles"}}
			},
			want: []string{"clusterroles.rbac.authorization.k8s.io admin", "deployments.apps ns-a/web"},
		},
		{
			name: "star and excluded resources",
			filter: func(*testing.T) restoreorder.Filter {
				return restoreorder.Filter{IncludedResources: []string{"*"}, ExcludedResources: []string{"pods", "configmaps", "namespaces", "clusterroles"}}
			},
			want: []string{"deployments.apps ns-a/web", "persistentvolumes pv-1", "persistentvolumes pv-2"},
		},
		{
			name:   "excluding star excludes everything",
			filter: func(*testing.T) restoreorder.Filter { return restoreorder.Filter{ExcludedResources: []string{"*"}} },
			want:   nil,
		},
		{
			name: "an unknown resource selects nothing",
			filter: func(*testing.T) restoreorder.Filter {
				return restoreorder.Filter{IncludedResources: []string{"nosuch"}}
			},
			want: nil,
		},
		{
			name: "included namespaces leave cluster resources out by default",
			filter: func(*testing.T) restoreorder.Filter {
				return restoreorder.Filter{IncludedNamespaces: []string{"ns-a"}}
			},
			want: []string{"configmaps ns-a/cfg", "deployments.apps ns-a/web", "namespaces ns-a/ns-a", "pods ns-a/db", "pods ns-a/web"},
		},
		{
			name: "included namespaces with cluster resources forced in",
			filter: func(*testing.T) restoreorder.Filter {
				return restoreorder.Filter{IncludedNamespaces: []string{"ns-a"}, IncludeClusterResources: ptr(true)}
			},
			want: []string{
				"clusterroles.rbac.authorization.k8s.io admin", "configmaps ns-a/cfg", "deployments.apps ns-a/web",
				"namespaces ns-a/ns-a", "persistentvolumes pv-1", "persistentvolumes pv-2", "pods ns-a/db", "pods ns-a/web",
			},
		},
		{
			name: "all namespaces with cluster resources forced out keeps namespace objects",
			filter: func(*testing.T) restoreorder.Filter {
				return restoreorder.Filter{IncludedNamespaces: []string{"*"}, IncludeClusterResources: ptr(false)}
			},
			want: []string{
				"configmaps ns-a/cfg", "configmaps ns-b/cfg", "deployments.apps ns-a/web",
				"namespaces kube-system/kube-system", "namespaces ns-a/ns-a", "namespaces ns-b/ns-b",
				"pods kube-system/dns", "pods ns-a/db", "pods ns-a/web", "pods ns-b/web",
			},
		},
		{
			name: "star namespaces include cluster resources by default",
			filter: func(*testing.T) restoreorder.Filter {
				return restoreorder.Filter{IncludedNamespaces: []string{"*"}}
			},
			want: everything,
		},
		{
			name: "an excluded namespace leaves cluster resources out by default",
			filter: func(*testing.T) restoreorder.Filter {
				return restoreorder.Filter{ExcludedNamespaces: []string{"kube-system"}}
			},
			want: []string{
				"configmaps ns-a/cfg", "configmaps ns-b/cfg", "deployments.apps ns-a/web",
				"namespaces ns-a/ns-a", "namespaces ns-b/ns-b",
				"pods ns-a/db", "pods ns-a/web", "pods ns-b/web",
			},
		},
		{
			name: "excluded namespaces win over included ones",
			filter: func(*testing.T) restoreorder.Filter {
				return restoreorder.Filter{IncludedNamespaces: []string{"ns-a", "ns-b"}, ExcludedNamespaces: []string{"ns-b"}}
			},
			want: []string{"configmaps ns-a/cfg", "deployments.apps ns-a/web", "namespaces ns-a/ns-a", "pods ns-a/db", "pods ns-a/web"},
		},
		{
			name: "excluding star excludes every namespace but keeps cluster resources when forced",
			filter: func(*testing.T) restoreorder.Filter {
				return restoreorder.Filter{ExcludedNamespaces: []string{"*"}, IncludeClusterResources: ptr(true)}
			},
			want: []string{"clusterroles.rbac.authorization.k8s.io admin", "persistentvolumes pv-1", "persistentvolumes pv-2"},
		},
		{
			name: "label selector",
			filter: func(t *testing.T) restoreorder.Filter {
				return restoreorder.Filter{LabelSelector: selector(t, "app=web")}
			},
			want:      []string{"configmaps ns-b/cfg", "deployments.apps ns-a/web", "pods ns-a/web", "pods ns-b/web"},
			wantOpens: true,
		},
		{
			name: "label selector with an existence requirement",
			filter: func(t *testing.T) restoreorder.Filter {
				return restoreorder.Filter{LabelSelector: selector(t, "app,app!=web")}
			},
			want:      []string{"persistentvolumes pv-1", "pods ns-a/db"},
			wantOpens: true,
		},
		{
			name: "OR selectors keep an item matching any",
			filter: func(t *testing.T) restoreorder.Filter {
				return restoreorder.Filter{OrLabelSelectors: []labels.Selector{selector(t, "app=db"), selector(t, "k8s-app=dns")}}
			},
			want:      []string{"persistentvolumes pv-1", "pods kube-system/dns", "pods ns-a/db"},
			wantOpens: true,
		},
		{
			name: "label selector and OR selectors both apply",
			filter: func(t *testing.T) restoreorder.Filter {
				return restoreorder.Filter{
					LabelSelector:    selector(t, "tier=backend"),
					OrLabelSelectors: []labels.Selector{selector(t, "app=web"), selector(t, "app=db")},
				}
			},
			want:      []string{"pods ns-a/db"},
			wantOpens: true,
		},
		{
			name: "an OR selector that matches everything reads nothing",
			filter: func(t *testing.T) restoreorder.Filter {
				return restoreorder.Filter{OrLabelSelectors: []labels.Selector{selector(t, "app=db"), labels.Everything()}}
			},
			want: everything,
		},
		{
			name: "an empty label selector reads nothing",
			filter: func(t *testing.T) restoreorder.Filter {
				return restoreorder.Filter{LabelSelector: labels.Everything()}
			},
			want: everything,
		},
		{
			name: "labels apply to namespace objects too",
			filter: func(t *testing.T) restoreorder.Filter {
				return restoreorder.Filter{IncludedResources: []string{"namespaces"}, LabelSelector: selector(t, "team=blue")}
			},
			want:      []string{"namespaces ns-a/ns-a"},
			wantOpens: true,
		},
		{
			name: "namespace mapping moves items and renames namespace objects",
			filter: func(*testing.T) restoreorder.Filter {
				return restoreorder.Filter{NamespaceMapping: map[string]string{"ns-a": "ns-x"}, IncludedNamespaces: []string{"ns-a"}}
			},
			want: []string{
				"configmaps ns-a→ns-x/cfg", "deployments.apps ns-a→ns-x/web", "namespaces ns-a→ns-x/ns-a",
				"pods ns-a→ns-x/db", "pods ns-a→ns-x/web",
			},
		},
		{
			name: "namespace filters look at the original namespace",
			filter: func(*testing.T) restoreorder.Filter {
				return restoreorder.Filter{
					NamespaceMapping:   map[string]string{"ns-a": "ns-b", "ns-b": "ns-c"},
					IncludedNamespaces: []string{"ns-b"},
					IncludedResources:  []string{"pods", "namespaces"},
				}
			},
			want: []string{"namespaces ns-b→ns-c/ns-b", "pods ns-b→ns-c/web"},
		},
		{
			name: "cluster resources forced out, nothing else",
			filter: func(*testing.T) restoreorder.Filter {
				return restoreorder.Filter{IncludeClusterResources: ptr(false)}
			},
			want: []string{
				"configmaps ns-a/cfg", "configmaps ns-b/cfg", "deployments.apps ns-a/web",
				"namespaces kube-system/kube-system", "namespaces ns-a/ns-a", "namespaces ns-b/ns-b",
				"pods kube-system/dns", "pods ns-a/db", "pods ns-a/web", "pods ns-b/web",
			},
		},
		{
			name: "labels are read only for items the other rules keep",
			filter: func(t *testing.T) restoreorder.Filter {
				return restoreorder.Filter{IncludedNamespaces: []string{"ns-b"}, IncludedResources: []string{"pods"}, LabelSelector: selector(t, "app=web")}
			},
			want:      []string{"pods ns-b/web"},
			wantOpens: true,
		},
	}
	// These cases were written for namespace objects that follow the namespace rules:
	// they run with NamespaceObjectsFollowNamespaces. TestCollectVeleroFilterCases
	// covers the default, Velero's rule.
	filter := func(t *testing.T, tc func(*testing.T) restoreorder.Filter) restoreorder.Filter {
		f := tc(t)
		f.NamespaceObjectsFollowNamespaces = true
		return f
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := filterBackup()
			c, err := restoreorder.Collect(context.Background(), src, restoreorder.Priorities{}, filter(t, tc.filter))
			require.NoError(t, err)
			got := describeAll(c)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("collected (-want +got):\n%s", diff)
			}
			require.Equal(t, len(tc.want), c.Total())
			n := 0
			for _, rc := range c.Resources() {
				n += rc.Items
				require.Equal(t, rc.Items, c.ResourceTotal(rc.Resource))
			}
			require.Equal(t, c.Total(), n, "sum of per-resource totals")
			if tc.wantCounts != nil {
				if diff := cmp.Diff(tc.wantCounts, c.Resources()); diff != "" {
					t.Errorf("Resources (-want +got):\n%s", diff)
				}
			}
			if !tc.wantOpens {
				require.Zero(t, src.opens.Load(), "items opened without a label condition")
			} else {
				require.NotZero(t, src.opens.Load())
			}

			// A LabelSource gives the same result without opening anything.
			ls := &labelMemSource{memSource: filterBackup()}
			c2, err := restoreorder.Collect(context.Background(), ls, restoreorder.Priorities{}, filter(t, tc.filter))
			require.NoError(t, err)
			if diff := cmp.Diff(got, describeAll(c2)); diff != "" {
				t.Errorf("through a LabelSource (-Source +LabelSource):\n%s", diff)
			}
			require.Zero(t, ls.opens.Load(), "a LabelSource's items were opened")
		})
	}
}

func TestCollectReadsLabelsOnlyForCandidates(t *testing.T) {
	src := filterBackup()
	_, err := restoreorder.Collect(context.Background(), src, restoreorder.Priorities{}, restoreorder.Filter{
		IncludedNamespaces: []string{"ns-b"}, IncludedResources: []string{"pods"}, LabelSelector: selector(t, "app=web"),
	})
	require.NoError(t, err)
	require.Equal(t, int64(1), src.opens.Load(), "items opened: only pods in ns-b are candidates")
}

func TestCollectInvalidFilter(t *testing.T) {
	tests := []struct {
		name    string
		mapping map[string]string
	}{
		{name: "from empty", mapping: map[string]string{"": "a"}},
		{name: "to empty", mapping: map[string]string{"a": "", "b": "c"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := restoreorder.Collect(context.Background(), filterBackup(), restoreorder.Priorities{},
				restoreorder.Filter{NamespaceMapping: tc.mapping})
			require.ErrorIs(t, err, restoreorder.ErrInvalidFilter)
		})
	}
}

// brokenSource returns lists out of order.
type brokenSource struct {
	*memSource
	resources  []string
	namespaces []string
	entries    []restoreorder.Entry
}

func (b *brokenSource) Resources(context.Context) ([]string, error) { return b.resources, nil }
func (b *brokenSource) Namespaces(context.Context, string) ([]string, error) {
	return b.namespaces, nil
}
func (b *brokenSource) Items(context.Context, string, string) ([]restoreorder.Entry, error) {
	return b.entries, nil
}

func TestCollectChecksSourceContract(t *testing.T) {
	good := []restoreorder.Entry{{Name: "a", Path: "a"}, {Name: "b", Path: "b"}}
	tests := []struct {
		name string
		src  *brokenSource
	}{
		{name: "resources out of order", src: &brokenSource{resources: []string{"pods", "configmaps"}, namespaces: []string{"a"}, entries: good}},
		{name: "resource repeated", src: &brokenSource{resources: []string{"pods", "pods"}, namespaces: []string{"a"}, entries: good}},
		{name: "namespaces out of order", src: &brokenSource{resources: []string{"pods"}, namespaces: []string{"b", "a"}, entries: good}},
		{name: "items out of order", src: &brokenSource{resources: []string{"pods"}, namespaces: []string{"a"}, entries: []restoreorder.Entry{{Name: "b"}, {Name: "a"}}}},
		{name: "item repeated", src: &brokenSource{resources: []string{"pods"}, namespaces: []string{"a"}, entries: []restoreorder.Entry{{Name: "a"}, {Name: "a"}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := restoreorder.Collect(context.Background(), tc.src, restoreorder.Priorities{}, restoreorder.Filter{})
			require.ErrorIs(t, err, restoreorder.ErrSourceContract)
		})
	}
}

func TestCollectErrors(t *testing.T) {
	boom := errors.New("storage unavailable")

	t.Run("source error is wrapped", func(t *testing.T) {
		src := filterBackup()
		src.itemErr = boom
		_, err := restoreorder.Collect(context.Background(), src, restoreorder.Priorities{}, restoreorder.Filter{})
		require.ErrorIs(t, err, boom)
	})

	t.Run("cancelled context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := restoreorder.Collect(ctx, filterBackup(), restoreorder.Priorities{}, restoreorder.Filter{})
		require.ErrorIs(t, err, context.Canceled)
	})

	t.Run("context cancelled while reading labels", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		var items []memItem
		for i := range 2000 {
			items = append(items, memItem{resource: "pods", namespace: "ns", name: fmt.Sprintf("p%04d", i)})
		}
		src := &cancellingSource{memSource: newMemSource(items...), after: 10, cancel: cancel}
		_, err := restoreorder.Collect(ctx, src, restoreorder.Priorities{}, restoreorder.Filter{LabelSelector: selector(t, "app=web")})
		require.ErrorIs(t, err, context.Canceled)
		require.Less(t, src.opens.Load(), int64(2000), "Collect went on reading after cancellation")
	})

	t.Run("item that is not a JSON object", func(t *testing.T) {
		src := filterBackup()
		src.data["pods/ns-a/web"] = []byte(`["not", "an", "object"]`)
		_, err := restoreorder.Collect(context.Background(), src, restoreorder.Priorities{}, restoreorder.Filter{LabelSelector: selector(t, "app=web")})
		require.ErrorIs(t, err, restoreorder.ErrInvalidItem)
		require.ErrorContains(t, err, "pods/ns-a/web")
	})

	t.Run("labels that are not strings", func(t *testing.T) {
		src := filterBackup()
		src.data["pods/ns-a/web"] = []byte(`{"metadata":{"labels":{"app":7}}}`)
		_, err := restoreorder.Collect(context.Background(), src, restoreorder.Priorities{}, restoreorder.Filter{LabelSelector: selector(t, "app=web")})
		require.ErrorIs(t, err, restoreorder.ErrInvalidItem)
	})

	t.Run("an item error handler may skip the item", func(t *testing.T) {
		src := filterBackup()
		src.data["pods/ns-a/web"] = []byte(`not json`)
		var skipped []string
		c, err := restoreorder.Collect(context.Background(), src, restoreorder.Priorities{}, restoreorder.Filter{LabelSelector: selector(t, "app=web")},
			restoreorder.WithItemErrors(func(it restoreorder.Item, err error) error {
				require.ErrorIs(t, err, restoreorder.ErrInvalidItem)
				skipped = append(skipped, describe(it))
				return nil
			}))
		require.NoError(t, err)
		require.Equal(t, []string{"pods ns-a/web"}, skipped)
		require.Equal(t, []string{"configmaps ns-b/cfg", "deployments.apps ns-a/web", "pods ns-b/web"}, describeAll(c))
	})

	t.Run("an item error handler may stop", func(t *testing.T) {
		src := filterBackup()
		src.openErr = fs.ErrPermission
		_, err := restoreorder.Collect(context.Background(), src, restoreorder.Priorities{}, restoreorder.Filter{LabelSelector: selector(t, "app=web")},
			restoreorder.WithItemErrors(func(it restoreorder.Item, err error) error { return boom }))
		require.ErrorIs(t, err, boom)
	})
}

// cancellingSource cancels its context after a number of opens.
type cancellingSource struct {
	*memSource
	after  int64
	cancel context.CancelFunc
}

func (s *cancellingSource) Open(ctx context.Context, path string) (io.ReadCloser, error) {
	if s.opens.Load() >= s.after {
		s.cancel()
	}
	return s.memSource.Open(ctx, path)
}

// TestItemsAllocatesNothingPerItem walks collections of very different sizes: the
// allocations of a walk do not grow with the number of items.
func TestItemsAllocatesNothingPerItem(t *testing.T) {
	walkAllocs := func(perNamespace int) float64 {
		var items []memItem
		for i := range perNamespace {
			for _, ns := range []string{"a", "b"} {
				items = append(items, memItem{resource: "pods", namespace: ns, name: fmt.Sprintf("p%05d", i)})
			}
		}
		c, err := restoreorder.Collect(context.Background(), newMemSource(items...), restoreorder.Priorities{}, restoreorder.Filter{})
		require.NoError(t, err)
		require.Equal(t, 2*perNamespace, c.Total())
		return testing.AllocsPerRun(20, func() {
			n := 0
			for it := range c.Items() {
				n += len(it.Name)
			}
			if n == 0 {
				t.Fatal("walked nothing")
			}
		})
	}
	small, large := walkAllocs(5), walkAllocs(20_000)
	require.Equal(t, small, large, "allocations of a walk over 10 and over 40,000 items")
	require.LessOrEqual(t, large, 1.0)
}

func TestItemsStopsEarly(t *testing.T) {
	c, err := restoreorder.Collect(context.Background(), filterBackup(), restoreorder.Priorities{}, restoreorder.Filter{})
	require.NoError(t, err)
	var got []string
	for it := range c.Items() {
		got = append(got, describe(it))
		if len(got) == 3 {
			break
		}
	}
	require.Equal(t, []string{"clusterroles.rbac.authorization.k8s.io admin", "configmaps ns-a/cfg", "configmaps ns-b/cfg"}, got)

	var nilCollection *restoreorder.Collection
	require.Zero(t, nilCollection.Total())
	require.Empty(t, collectAll(nilCollection))
	require.Empty(t, nilCollection.Resources())
	require.Zero(t, nilCollection.ResourceTotal("pods"))
	require.Empty(t, nilCollection.Unresolved())
}

// TestCollectLeavesSourceListsAlone filters single items out of shared lists and checks
// that the source's lists are unchanged, and that the collection does not change when
// the caller changes what Resources returned.
func TestCollectLeavesSourceListsAlone(t *testing.T) {
	var items []memItem
	for i := range 10 {
		app := "web"
		if i%3 == 1 {
			app = "db"
		}
		items = append(items, memItem{resource: "pods", namespace: "a", name: fmt.Sprintf("p%d", i), labels: map[string]string{"app": app}})
	}
	src := newMemSource(items...)
	before := append([]restoreorder.Entry(nil), src.items["pods"]["a"]...)
	c, err := restoreorder.Collect(context.Background(), src, restoreorder.Priorities{}, restoreorder.Filter{LabelSelector: selector(t, "app=web")})
	require.NoError(t, err)
	require.Equal(t, before, src.items["pods"]["a"], "Collect changed the source's list")
	require.Equal(t, []string{"pods a/p0", "pods a/p2", "pods a/p3", "pods a/p5", "pods a/p6", "pods a/p8", "pods a/p9"}, describeAll(c))

	rc := c.Resources()
	rc[0].Items = 99
	require.Equal(t, 7, c.ResourceTotal("pods"), "Resources shares the collection's slice")
}
