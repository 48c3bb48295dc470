package restoreorder_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/itemops/itemops/restoreorder"
)

// fixtureObject is one object of the realistic backup.
type fixtureObject struct {
	resource, namespace, name string
	apiVersion, kind          string
	labels                    map[string]string
	// otherVersions are API versions besides the preferred one, written only to
	// <version>/ directories when the backup has version directories.
	otherVersions []string
}

// fixtureObjects is a small cluster: a shop app, its database, and kube-system, with
// CRDs, namespaces, cluster-scoped and namespaced resources of 20 kinds, labels, and two
// resources with a second API version.
func fixtureObjects() []fixtureObject {
	web := map[string]string{"app": "web"}
	db := map[string]string{"app": "db"}
	dns := map[string]string{"k8s-app": "kube-dns"}
	shop := map[string]string{"team": "shop"}
	return []fixtureObject{
		{"customresourcedefinitions.apiextensions.k8s.io", "", "widgets.example.com", "apiextensions.k8s.io/v1", "CustomResourceDefinition", nil, nil},
		{"namespaces", "", "app", "v1", "Namespace", shop, nil},
		{"namespaces", "", "db", "v1", "Namespace", shop, nil},
		{"namespaces", "", "kube-system", "v1", "Namespace", nil, nil},
		{"storageclasses.storage.k8s.io", "", "standard", "storage.k8s.io/v1", "StorageClass", nil, nil},
		{"storageclasses.storage.k8s.io", "", "fast", "storage.k8s.io/v1", "StorageClass", nil, nil},
		{"persistentvolumes", "", "pv-db", "v1", "PersistentVolume", db, nil},
		{"clusterroles.rbac.authorization.k8s.io", "", "viewer", "rbac.authorization.k8s.io/v1", "ClusterRole", nil, nil},
		{"clusterrolebindings.rbac.authorization.k8s.io", "", "viewer-binding", "rbac.authorization.k8s.io/v1", "ClusterRoleBinding", nil, nil},
		{"priorityclasses.scheduling.k8s.io", "", "high", "scheduling.k8s.io/v1", "PriorityClass", nil, nil},
		{"serviceaccounts", "app", "default", "v1", "ServiceAccount", nil, nil},
		{"serviceaccounts", "db", "default", "v1", "ServiceAccount", nil, nil},
		{"serviceaccounts", "kube-system", "coredns", "v1", "ServiceAccount", dns, nil},
		{"secrets", "app", "tls", "v1", "Secret", web, nil},
		{"secrets", "db", "creds", "v1", "Secret", db, nil},
		{"configmaps", "app", "settings", "v1", "ConfigMap", web, nil},
		{"configmaps", "db", "init", "v1", "ConfigMap", db, nil},
		{"configmaps", "kube-system", "coredns", "v1", "ConfigMap", dns, nil},
		{"persistentvolumeclaims", "db", "data", "v1", "PersistentVolumeClaim", db, nil},
		{"pods", "app", "web-5d9-def", "v1", "Pod", web, nil},
		{"pods", "app", "web-5d9-abc", "v1", "Pod", web, nil},
		{"pods", "db", "postgres-0", "v1", "Pod", db, nil},
		{"pods", "kube-system", "coredns-1", "v1", "Pod", dns, nil},
		{"replicasets.apps", "app", "web-5d9", "apps/v1", "ReplicaSet", web, nil},
		{"deployments.apps", "app", "web", "apps/v1", "Deployment", web, nil},
		{"deployments.apps", "kube-system", "coredns", "apps/v1", "Deployment", dns, nil},
		{"statefulsets.apps", "db", "postgres", "apps/v1", "StatefulSet", db, nil},
		{"services", "app", "web", "v1", "Service", web, nil},
		{"services", "db", "postgres", "v1", "Service", db, nil},
		{"services", "kube-system", "kube-dns", "v1", "Service", dns, nil},
		{"endpoints", "app", "web", "v1", "Endpoints", web, nil},
		{"endpoints", "db", "postgres", "v1", "Endpoints", db, nil},
		{"horizontalpodautoscalers.autoscaling", "app", "web", "autoscaling/v2", "HorizontalPodAutoscaler", web, []string{"v1"}},
		{"widgets.example.com", "app", "big-widget", "example.com/v1", "Widget", web, []string{"v1beta1"}},
		{"clusters.cluster.x-k8s.io", "app", "prod", "cluster.x-k8s.io/v1beta1", "Cluster", nil, nil},
	}
}

// fixtureLayout says which directories a fixture backup has.
type fixtureLayout struct {
	classic  bool // resources/<r>/{cluster,namespaces}/...
	versions bool // resources/<r>/<v>-preferredversion/... and resources/<r>/<other>/...
}

// fixtureBackup builds the backup's files as Velero would write them.
func fixtureBackup(layout fixtureLayout) backupFiles {
	files := backupFiles{"metadata/version": "1.1.0"}
	for _, o := range fixtureObjects() {
		scope := "cluster"
		if o.namespace != "" {
			scope = "namespaces/" + o.namespace
		}
		body := func(apiVersion string) string {
			meta := map[string]any{"name": o.name, "uid": fmt.Sprintf("uid-%s-%s", o.namespace, o.name)}
			if o.namespace != "" {
				meta["namespace"] = o.namespace
			}
			if o.labels != nil {
				meta["labels"] = o.labels
			}
			b, err := json.MarshalIndent(map[string]any{
				"apiVersion": apiVersion, "kind": o.kind, "metadata": meta,
				"spec": map[string]any{"note": strings.Repeat("x", 40)},
			}, "", "  ")
			if err != nil {
				panic(err)
			}
			return string(b)
		}
		file := scope + "/" + o.name + ".json"
		if layout.classic {
			files["resources/"+o.resource+"/"+file] = body(o.apiVersion)
		}
		if layout.versions {
			group, preferred, _ := strings.Cut(o.apiVersion, "/")
			if preferred == "" {
				preferred = group
			}
			files["resources/"+o.resource+"/"+preferred+"-preferredversion/"+file] = body(o.apiVersion)
			for _, v := range o.otherVersions {
				other := strings.TrimSuffix(o.apiVersion, preferred) + v
				files["resources/"+o.resource+"/"+v+"/"+file] = body(other)
			}
		}
	}
	return files
}

// fixtureWantAll is the whole fixture in the order of DefaultPriorities.
var fixtureWantAll = []string{
	"customresourcedefinitions.apiextensions.k8s.io widgets.example.com",
	"namespaces app", "namespaces db", "namespaces kube-system", // cluster-scoped, as in Velero
	"storageclasses.storage.k8s.io fast", "storageclasses.storage.k8s.io standard",
	"persistentvolumes pv-db",
	"persistentvolumeclaims db/data",
	"clusterroles.rbac.authorization.k8s.io viewer",
	"serviceaccounts app/default", "serviceaccounts db/default", "serviceaccounts kube-system/coredns",
	"clusterrolebindings.rbac.authorization.k8s.io viewer-binding",
	"secrets app/tls", "secrets db/creds",
	"configmaps app/settings", "configmaps db/init", "configmaps kube-system/coredns",
	"priorityclasses.scheduling.k8s.io high",
	"pods app/web-5d9-abc", "pods app/web-5d9-def", "pods db/postgres-0", "pods kube-system/coredns-1",
	"replicasets.apps app/web-5d9",
	"endpoints app/web", "endpoints db/postgres",
	"services app/web", "services db/postgres", "services kube-system/kube-dns",
	// not in the priorities: sorted
	"deployments.apps app/web", "deployments.apps kube-system/coredns",
	"horizontalpodautoscalers.autoscaling app/web",
	"statefulsets.apps db/postgres",
	"widgets.example.com app/big-widget",
	// low priority
	"clusters.cluster.x-k8s.io app/prod",
}

var fixtureWantCounts = []restoreorder.ResourceCount{
	{Resource: "customresourcedefinitions.apiextensions.k8s.io", Items: 1},
	{Resource: "namespaces", Items: 3},
	{Resource: "storageclasses.storage.k8s.io", Items: 2},
	{Resource: "persistentvolumes", Items: 1},
	{Resource: "persistentvolumeclaims", Items: 1},
	{Resource: "clusterroles.rbac.authorization.k8s.io", Items: 1},
	{Resource: "serviceaccounts", Items: 3},
	{Resource: "clusterrolebindings.rbac.authorization.k8s.io", Items: 1},
	{Resource: "secrets", Items: 2},
	{Resource: "configmaps", Items: 3},
	{Resource: "priorityclasses.scheduling.k8s.io", Items: 1},
	{Resource: "pods", Items: 4},
	{Resource: "replicasets.apps", Items: 1},
	{Resource: "endpoints", Items: 2},
	{Resource: "services", Items: 3},
	{Resource: "deployments.apps", Items: 2},
	{Resource: "horizontalpodautoscalers.autoscaling", Items: 1},
	{Resource: "statefulsets.apps", Items: 1},
	{Resource: "widgets.example.com", Items: 1},
	{Resource: "clusters.cluster.x-k8s.io", Items: 1},
}

func TestFixtureBackup(t *testing.T) {
	shopFilter := func(t *testing.T) restoreorder.Filter {
		return restoreorder.Filter{
			IncludedNamespaces: []string{"app"},
			NamespaceMapping:   map[string]string{"app": "shop"},
			OrLabelSelectors:   []labels.Selector{selector(t, "app=web"), selector(t, "team=shop")},
		}
	}
	// No namespace object: Velero collects none for a restore of some namespaces.
	shopWant := []string{
		"secrets app→shop/tls",
		"configmaps app→shop/settings",
		"pods app→shop/web-5d9-abc", "pods app→shop/web-5d9-def",
		"replicasets.apps app→shop/web-5d9",
		"endpoints app→shop/web",
		"services app→shop/web",
		"deployments.apps app→shop/web",
		"horizontalpodautoscalers.autoscaling app→shop/web",
		"widgets.example.com app→shop/big-widget",
	}
	layouts := []struct {
		name   string
		layout fixtureLayout
		// dir is where the items are read from: the classic directories win when present.
		dir func(resource, apiVersion string) string
	}{
		{
			name:   "format 1.0: classic directories only",
			layout: fixtureLayout{classic: true},
			dir:    func(r, _ string) string { return "resources/" + r + "/" },
		},
		{
			name:   "format 1.1: classic and version directories",
			layout: fixtureLayout{classic: true, versions: true},
			dir:    func(r, _ string) string { return "resources/" + r + "/" },
		},
		{
			name:   "version directories only: the preferred one",
			layout: fixtureLayout{versions: true},
			dir: func(r, apiVersion string) string {
				_, v, ok := strings.Cut(apiVersion, "/")
				if !ok {
					v = apiVersion
				}
				return "resources/" + r + "/" + v + "-preferredversion/"
			},
		},
	}
	apiVersions := map[string]string{}
	for _, o := range fixtureObjects() {
		apiVersions[o.resource+"/"+o.namespace+"/"+o.name] = o.apiVersion
	}
	for _, l := range layouts {
		for srcName, src := range fixtureBackup(l.layout).sources(t) {
			t.Run(l.name+"/"+srcName, func(t *testing.T) {
				ctx := context.Background()
				c, err := restoreorder.Collect(ctx, src, restoreorder.DefaultPriorities(), restoreorder.Filter{})
				require.NoError(t, err)
				if diff := cmp.Diff(fixtureWantAll, describeAll(c)); diff != "" {
					t.Errorf("collected order (-want +got):\n%s", diff)
				}
				require.Equal(t, len(fixtureWantAll), c.Total())
				if diff := cmp.Diff(fixtureWantCounts, c.Resources()); diff != "" {
					t.Errorf("per-resource totals (-want +got):\n%s", diff)
				}

				// Pass two: every item reads back as itself, in its preferred version,
				// from the directory the layout rules choose.
				for it := range c.Items() {
					key := it.Resource + "/" + it.OriginalNamespace + "/" + it.Name
					if it.Resource == "namespaces" {
						key = it.Resource + "//" + it.Name
					}
					require.True(t, strings.HasPrefix(it.Path, l.dir(it.Resource, apiVersions[key])), "path %s", it.Path)
					data, err := restoreorder.ReadItem(ctx, src, it.Path)
					require.NoError(t, err)
					var obj struct {
						APIVersion string `json:"apiVersion"`
						Metadata   struct{ Name, Namespace string }
					}
					require.NoError(t, json.Unmarshal(data, &obj))
					require.Equal(t, it.Name, obj.Metadata.Name)
					require.Equal(t, apiVersions[key], obj.APIVersion, "%s", it.Path)
				}

				shop, err := restoreorder.Collect(ctx, src, restoreorder.DefaultPriorities(), shopFilter(t))
				require.NoError(t, err)
				if diff := cmp.Diff(shopWant, describeAll(shop)); diff != "" {
					t.Errorf("filtered order (-want +got):\n%s", diff)
				}
				require.Equal(t, len(shopWant), shop.Total())
			})
		}
	}
}
