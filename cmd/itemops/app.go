package main

import (
	"fmt"
	"hash/fnv"
	"path"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// An appItem is one object of the demo's synthetic application.
type appItem struct {
	gr      schema.GroupResource
	version string // the API version of the group, "v1"
	obj     *unstructured.Unstructured
}

// key names the item for hashing and messages: "persistentvolumeclaims shop/data-0".
func (it appItem) key() string {
	if ns := it.obj.GetNamespace(); ns != "" {
		return it.gr.String() + " " + ns + "/" + it.obj.GetName()
	}
	return it.gr.String() + " " + it.obj.GetName()
}

// tarPaths returns where a backup tarball keeps the item: the classic directory and the
// preferred-version directory of format 1.1.
func (it appItem) tarPaths() []string {
	res := it.gr.String()
	scope := path.Join("cluster", it.obj.GetName()+".json")
	if ns := it.obj.GetNamespace(); ns != "" {
		scope = path.Join("namespaces", ns, it.obj.GetName()+".json")
	}
	return []string{
		path.Join("resources", res, scope),
		path.Join("resources", res, it.version+"-preferredversion", scope),
	}
}

// namespaceNames are the namespaces of the synthetic application, used in turn; more
// are numbered.
var namespaceNames = []string{"shop", "blog", "analytics", "auth"}

// kinds of namespaced filler objects, used in turn.
var fillers = []struct {
	gr      schema.GroupResource
	version string
	kind    string
	prefix  string
}{
	{schema.GroupResource{Resource: "configmaps"}, "v1", "ConfigMap", "config"},
	{schema.GroupResource{Resource: "secrets"}, "v1", "Secret", "secret"},
	{schema.GroupResource{Resource: "services"}, "v1", "Service", "svc"},
	{schema.GroupResource{Group: "apps", Resource: "deployments"}, "v1", "Deployment", "web"},
	{schema.GroupResource{Group: "apps", Resource: "replicasets"}, "v1", "ReplicaSet", "web"},
	{schema.GroupResource{Resource: "pods"}, "v1", "Pod", "web"},
	{schema.GroupResource{Resource: "serviceaccounts"}, "v1", "ServiceAccount", "sa"},
}

var (
	grNamespaces   = schema.GroupResource{Resource: "namespaces"}
	grStorageClass = schema.GroupResource{Group: "storage.k8s.io", Resource: "storageclasses"}
	grPV           = schema.GroupResource{Resource: "persistentvolumes"}
	grPVC          = schema.GroupResource{Resource: "persistentvolumeclaims"}
)

// minItems is the fewest items an application of claims volume claims has: a storage
// class, the namespaces, and a claim and its volume per claim.
func minItems(claims int) int {
	return 1 + namespaceCount(claims) + 2*claims
}

// namespaceCount is how many namespaces an application of claims volume claims spreads
// over: two claims per namespace, at least one namespace and at most all the names.
func namespaceCount(claims int) int {
	return min(max((claims+1)/2, 1), len(namespaceNames))
}

// syntheticApp returns an application of n objects (at least minItems(claims)) holding
// claims persistent volume claims, each bound to a persistent volume, spread over a few
// namespaces with config maps, secrets, services, deployments, replica sets, pods and
// service accounts. The same arguments always give the same objects, in the order a
// backup visits them: cluster-scoped objects, then each namespace's.
func syntheticApp(n, claims int) []appItem {
	nsCount := namespaceCount(claims)
	namespaces := make([]string, nsCount)
	for i := range namespaces {
		namespaces[i] = namespaceNames[i%len(namespaceNames)]
	}
	var items []appItem
	add := func(gr schema.GroupResource, version, kind, namespace, name string, set func(u *unstructured.Unstructured)) {
		u := &unstructured.Unstructured{Object: map[string]any{}}
		apiVersion := version
		if gr.Group != "" {
			apiVersion = gr.Group + "/" + version
		}
		u.SetAPIVersion(apiVersion)
		u.SetKind(kind)
		u.SetName(name)
		if namespace != "" {
			u.SetNamespace(namespace)
			u.SetLabels(map[string]string{"app.kubernetes.io/part-of": namespace})
		}
		if set != nil {
			set(u)
		}
		items = append(items, appItem{gr: gr, version: version, obj: u})
	}

	add(grStorageClass, "v1", "StorageClass", "", "standard", func(u *unstructured.Unstructured) {
		u.Object["provisioner"] = "demo.itemops.io/disk"
	})
	for _, ns := range namespaces {
		add(grNamespaces, "v1", "Namespace", "", ns, nil)
	}
	// Claims go to the namespaces in turn; each has a volume of 1 to 8 GiB.
	claimsOf := make([][]string, nsCount)
	for i := range claims {
		ns := i % nsCount
		claim := fmt.Sprintf("data-%d", len(claimsOf[ns]))
		claimsOf[ns] = append(claimsOf[ns], claim)
		size := fmt.Sprintf("%dGi", 1+hash32(namespaces[ns]+"/"+claim)%8)
		volume := fmt.Sprintf("pv-%s-%s", namespaces[ns], claim)
		add(grPV, "v1", "PersistentVolume", "", volume, func(u *unstructured.Unstructured) {
			u.Object["spec"] = map[string]any{
				"capacity":         map[string]any{"storage": size},
				"storageClassName": "standard",
				"claimRef":         map[string]any{"namespace": namespaces[ns], "name": claim},
			}
		})
	}
	// The rest of the items are filler objects, spread evenly over the namespaces.
	filler := n - len(items) - claims
	for i, ns := range namespaces {
		for _, claim := range claimsOf[i] {
			volume := fmt.Sprintf("pv-%s-%s", ns, claim)
			size := fmt.Sprintf("%dGi", 1+hash32(ns+"/"+claim)%8)
			add(grPVC, "v1", "PersistentVolumeClaim", ns, claim, func(u *unstructured.Unstructured) {
				u.Object["spec"] = map[string]any{
					"accessModes":      []any{"ReadWriteOnce"},
					"storageClassName": "standard",
					"volumeName":       volume,
					"resources":        map[string]any{"requests": map[string]any{"storage": size}},
				}
			})
		}
		share := filler / nsCount
		if i < filler%nsCount {
			share++
		}
		for j := range share {
			f := fillers[j%len(fillers)]
			name := fmt.Sprintf("%s-%d", f.prefix, j/len(fillers))
			add(f.gr, f.version, f.kind, ns, name, func(u *unstructured.Unstructured) {
				u.Object["data"] = map[string]any{"note": "synthetic object " + name + " of " + ns}
			})
		}
	}
	return items
}

// hash32 is a stable hash of s, for choices that must not change from run to run.
func hash32(s string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(s))
	return h.Sum32()
}

// unitHash maps s to a number in [0, 1), stably.
func unitHash(s string) float64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return float64(h.Sum64()>>11) / (1 << 53)
}
