package adapters_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/itemops/itemops/adapters"
)

func TestMatcherMatchesItem(t *testing.T) {
	web := map[string]string{"app": "web", "tier": "front"}
	tests := []struct {
		name      string
		sel       adapters.ResourceSelector
		gr        schema.GroupResource
		namespace string // empty: cluster-scoped
		labels    map[string]string
		want      bool
	}{
		{name: "zero selector takes a namespaced item", gr: pods, namespace: "app", want: true},
		{name: "zero selector takes a cluster-scoped item", gr: schema.GroupResource{Resource: "persistentvolumes"}, want: true},

		// Resources.
		{name: "bare name matches the core resource", sel: adapters.ResourceSelector{IncludedResources: []string{"pods"}}, gr: pods, namespace: "app", want: true},
		{name: "bare name matches the resource in any group", sel: adapters.ResourceSelector{IncludedResources: []string{"deployments"}}, gr: deploys, namespace: "app", want: true},
		{name: "resource.group matches its group", sel: adapters.ResourceSelector{IncludedResources: []string{"deployments.apps"}}, gr: deploys, namespace: "app", want: true},
		{name: "resource.group does not match another group", sel: adapters.ResourceSelector{IncludedResources: []string{"deployments.apps"}}, gr: schema.GroupResource{Group: "extensions", Resource: "deployments"}, namespace: "app", want: false},
		{name: "resource.group does not match the core group", sel: adapters.ResourceSelector{IncludedResources: []string{"events.events.k8s.io"}}, gr: schema.GroupResource{Resource: "events"}, namespace: "app", want: false},
		{name: "group with dots", sel: adapters.ResourceSelector{IncludedResources: []string{"storageclasses.storage.k8s.io"}}, gr: schema.GroupResource{Group: "storage.k8s.io", Resource: "storageclasses"}, want: true},
		{name: "names are compared without case", sel: adapters.ResourceSelector{IncludedResources: []string{"Deployments.Apps"}}, gr: deploys, namespace: "app", want: true},
		{name: "resource not included", sel: adapters.ResourceSelector{IncludedResources: []string{"pods"}}, gr: configMaps, namespace: "app", want: false},
		{name: "star includes every resource", sel: adapters.ResourceSelector{IncludedResources: []string{"*"}}, gr: deploys, namespace: "app", want: true},
		{name: "star beside names includes every resource", sel: adapters.ResourceSelector{IncludedResources: []string{"pods", "*"}}, gr: configMaps, namespace: "app", want: true},
		{name: "excluded resource, no includes", sel: adapters.ResourceSelector{ExcludedResources: []string{"secrets"}}, gr: schema.GroupResource{Resource: "secrets"}, namespace: "app", want: false},
		{name: "other resource passes an exclude list", sel: adapters.ResourceSelector{ExcludedResources: []string{"secrets"}}, gr: configMaps, namespace: "app", want: true},
		{name: "exclude wins over include", sel: adapters.ResourceSelector{IncludedResources: []string{"pods"}, ExcludedResources: []string{"pods"}}, gr: pods, namespace: "app", want: false},
		{name: "exclude wins over star", sel: adapters.ResourceSelector{IncludedResources: []string{"*"}, ExcludedResources: []string{"deployments.apps"}}, gr: deploys, namespace: "app", want: false},
		{name: "excluded star excludes every resource", sel: adapters.ResourceSelector{ExcludedResources: []string{"*"}}, gr: pods, namespace: "app", want: false},

		// Namespaces.
		{name: "included namespace", sel: adapters.ResourceSelector{IncludedNamespaces: []string{"app", "db"}}, gr: pods, namespace: "db", want: true},
		{name: "namespace not included", sel: adapters.ResourceSelector{IncludedNamespaces: []string{"app"}}, gr: pods, namespace: "other", want: false},
		{name: "namespaces match exactly", sel: adapters.ResourceSelector{IncludedNamespaces: []string{"app"}}, gr: pods, namespace: "App", want: false},
		{name: "excluded namespace", sel: adapters.ResourceSelector{ExcludedNamespaces: []string{"kube-system"}}, gr: pods, namespace: "kube-system", want: false},
		{name: "other namespace passes an exclude list", sel: adapters.ResourceSelector{ExcludedNamespaces: []string{"kube-system"}}, gr: pods, namespace: "app", want: true},
		{name: "namespace exclude wins over star", sel: adapters.ResourceSelector{IncludedNamespaces: []string{"*"}, ExcludedNamespaces: []string{"app"}}, gr: pods, namespace: "app", want: false},
		{name: "excluded star excludes every namespace", sel: adapters.ResourceSelector{ExcludedNamespaces: []string{"*"}}, gr: pods, namespace: "app", want: false},
		{name: "star beside names includes every namespaced item", sel: adapters.ResourceSelector{IncludedNamespaces: []string{"*", "app"}}, gr: pods, namespace: "other", want: true},
		{name: "empty namespace name selects no namespaced item", sel: adapters.ResourceSelector{IncludedNamespaces: []string{""}}, gr: pods, namespace: "app", want: false},

		// Cluster-scoped items.
		{name: "cluster-scoped item, namespaces included by name", sel: adapters.ResourceSelector{IncludedNamespaces: []string{"app"}}, gr: schema.GroupResource{Resource: "persistentvolumes"}, want: false},
		{name: "cluster-scoped item, namespaces included by star", sel: adapters.ResourceSelector{IncludedNamespaces: []string{"*"}}, gr: schema.GroupResource{Resource: "persistentvolumes"}, want: true},
		{name: "cluster-scoped item, star repeated is still every namespace", sel: adapters.ResourceSelector{IncludedNamespaces: []string{"*", "*"}}, gr: schema.GroupResource{Resource: "persistentvolumes"}, want: true},
		{name: "cluster-scoped item, star beside names (as Velero)", sel: adapters.ResourceSelector{IncludedNamespaces: []string{"*", "app"}}, gr: schema.GroupResource{Resource: "persistentvolumes"}, want: false},
		{name: "cluster-scoped item, some namespace excluded", sel: adapters.ResourceSelector{ExcludedNamespaces: []string{"kube-system"}}, gr: schema.GroupResource{Resource: "persistentvolumes"}, want: false},
		{name: "namespace object is cluster-scoped", sel: adapters.ResourceSelector{IncludedNamespaces: []string{"app"}}, gr: schema.GroupResource{Resource: "namespaces"}, want: false},
		{name: "cluster-scoped item still needs its resource", sel: adapters.ResourceSelector{IncludedResources: []string{"pods"}}, gr: schema.GroupResource{Resource: "persistentvolumes"}, want: false},

		// Labels.
		{name: "label selector matches", sel: adapters.ResourceSelector{LabelSelector: "app=web"}, gr: pods, namespace: "app", labels: web, want: true},
		{name: "label selector does not match", sel: adapters.ResourceSelector{LabelSelector: "app=db"}, gr: pods, namespace: "app", labels: web, want: false},
		{name: "label selector, item without labels", sel: adapters.ResourceSelector{LabelSelector: "app=web"}, gr: pods, namespace: "app", want: false},
		{name: "label absent required", sel: adapters.ResourceSelector{LabelSelector: "!velero.io/exclude-from-backup"}, gr: pods, namespace: "app", want: true},
		{name: "set-based selector", sel: adapters.ResourceSelector{LabelSelector: "tier in (front, back),app"}, gr: pods, namespace: "app", labels: web, want: true},
		{name: "label selector applies to cluster-scoped items", sel: adapters.ResourceSelector{LabelSelector: "app=web"}, gr: schema.GroupResource{Resource: "persistentvolumes"}, want: false},
		{name: "every condition together", sel: adapters.ResourceSelector{IncludedResources: []string{"pods"}, IncludedNamespaces: []string{"app"}, LabelSelector: "tier=front"}, gr: pods, namespace: "app", labels: web, want: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := adapters.NewMatcher(tc.sel)
			require.NoError(t, err)
			item := obj(tc.namespace, "x", tc.labels)
			if got := m.MatchesItem(tc.gr, item); got != tc.want {
				t.Errorf("MatchesItem(%v, %s/x %v) = %v, want %v", tc.gr, tc.namespace, tc.labels, got, tc.want)
			}
		})
	}
}

func TestMatcherMatches(t *testing.T) {
	m, err := adapters.NewMatcher(adapters.ResourceSelector{IncludedNamespaces: []string{"target"}, LabelSelector: "app=web"})
	require.NoError(t, err)
	tests := []struct {
		name      string
		namespace string
		lbls      labels.Labels
		want      bool
	}{
		{name: "labels match", namespace: "target", lbls: labels.Set{"app": "web"}, want: true},
		{name: "labels do not match", namespace: "target", lbls: labels.Set{"app": "db"}, want: false},
		{name: "empty labels do not match", namespace: "target", lbls: labels.Set{}, want: false},
		{name: "nil labels skip the label condition", namespace: "target", lbls: nil, want: true},
		{name: "nil labels do not skip the namespace condition", namespace: "source", lbls: nil, want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := m.Matches(pods, tc.namespace, tc.lbls); got != tc.want {
				t.Errorf("Matches(pods, %q, %v) = %v, want %v", tc.namespace, tc.lbls, got, tc.want)
			}
		})
	}
}

func TestMatchesItemOddContent(t *testing.T) {
	m, err := adapters.NewMatcher(adapters.ResourceSelector{LabelSelector: "app"})
	require.NoError(t, err)
	tests := []struct {
		name string
		item map[string]interface{}
		want bool
	}{
		{name: "nil item", item: nil, want: false},
		{name: "no metadata is a cluster-scoped object without labels", item: map[string]interface{}{}, want: false},
		{name: "label value that is not a string is no label", item: map[string]interface{}{"metadata": map[string]interface{}{"labels": map[string]interface{}{"app": 1}}}, want: false},
		{name: "string label value", item: map[string]interface{}{"metadata": map[string]interface{}{"labels": map[string]interface{}{"app": "x"}}}, want: true},
		{name: "namespace that is not a string is cluster-scoped", item: map[string]interface{}{"metadata": map[string]interface{}{"namespace": 3, "labels": map[string]interface{}{"app": "x"}}}, want: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got bool
			if tc.item == nil {
				got = m.MatchesItem(pods, nil)
			} else {
				got = m.MatchesItem(pods, &unstructured.Unstructured{Object: tc.item})
			}
			if got != tc.want {
				t.Errorf("MatchesItem = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNewMatcherInvalidSelector(t *testing.T) {
	for _, sel := range []string{"a b", "tier in (x", "app=web!", "=web"} {
		t.Run(sel, func(t *testing.T) {
			m, err := adapters.NewMatcher(adapters.ResourceSelector{LabelSelector: sel})
			require.ErrorIs(t, err, adapters.ErrInvalidSelector)
			require.Nil(t, m)
		})
	}
}

func TestNewMatcherCopiesLists(t *testing.T) {
	sel := adapters.ResourceSelector{IncludedResources: []string{"pods"}, IncludedNamespaces: []string{"app"}}
	m, err := adapters.NewMatcher(sel)
	require.NoError(t, err)
	sel.IncludedResources[0], sel.IncludedNamespaces[0] = "configmaps", "other"
	require.True(t, m.MatchesItem(pods, obj("app", "x", nil)), "the matcher changed with the selector's slices")
	require.False(t, m.MatchesItem(configMaps, obj("other", "x", nil)))
}

func TestZeroMatcherSelectsEverything(t *testing.T) {
	var m adapters.Matcher
	require.True(t, m.MatchesItem(pods, obj("app", "p", map[string]string{"a": "b"})))
	require.True(t, m.MatchesItem(deploys, obj("", "cluster-scoped", nil)))
}

// BenchmarkMatchesItem measures the cost of reading an item's labels into a labels.Set
// (impl=item) against matching labels the caller already holds as a labels.Set
// (impl=set, the baseline), and an item matched without a label condition
// (impl=no-selector, which copies nothing).
func BenchmarkMatchesItem(b *testing.B) {
	item := &unstructured.Unstructured{Object: map[string]interface{}{
		"metadata": map[string]interface{}{
			"name": "web-0", "namespace": "shop",
			"labels": map[string]interface{}{
				"app": "web", "tier": "front", "release": "stable",
				"app.kubernetes.io/name": "web", "app.kubernetes.io/part-of": "shop", "pod-template-hash": "5d8f7b9c4",
			},
		},
	}}
	set := labels.Set{
		"app": "web", "tier": "front", "release": "stable",
		"app.kubernetes.io/name": "web", "app.kubernetes.io/part-of": "shop", "pod-template-hash": "5d8f7b9c4",
	}
	withLabels, err := adapters.NewMatcher(adapters.ResourceSelector{LabelSelector: "app=web,tier in (front,back)"})
	require.NoError(b, err)
	plain, err := adapters.NewMatcher(adapters.ResourceSelector{IncludedNamespaces: []string{"shop"}})
	require.NoError(b, err)

	b.Run("impl=set", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if !withLabels.Matches(pods, "shop", set) {
				b.Fatal("not matched")
			}
		}
	})
	b.Run("impl=item", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if !withLabels.MatchesItem(pods, item) {
				b.Fatal("not matched")
			}
		}
	})
	b.Run("impl=no-selector", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if !plain.MatchesItem(pods, item) {
				b.Fatal("not matched")
			}
		}
	})
}
