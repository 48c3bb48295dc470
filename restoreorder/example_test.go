package restoreorder_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"testing/fstest"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/itemops/itemops/progress"
	"github.com/itemops/itemops/restoreorder"
)

func ExampleParsePriorities() {
	p, err := restoreorder.ParsePriorities("namespaces,pods,-,clusters.cluster.x-k8s.io")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(p.High, p.Low)
	fmt.Println(p)

	_, err = restoreorder.ParsePriorities("a,-,b,-,c")
	fmt.Println(errors.Is(err, restoreorder.ErrInvalidPriorities))
	// Output:
	// [namespaces pods] [clusters.cluster.x-k8s.io]
	// namespaces,pods,-,clusters.cluster.x-k8s.io
	// true
}

// A user's list that forgets required resources gets them back next to their neighbours.
func ExamplePriorities_Merge() {
	user, _ := restoreorder.ParsePriorities("namespaces,widgets.example.com,pods")
	required := restoreorder.Priorities{High: []string{"customresourcedefinitions", "namespaces", "persistentvolumes", "pods"}}
	merged, added := user.Merge(required)
	fmt.Println(merged)
	fmt.Println(added)
	// Output:
	// customresourcedefinitions,namespaces,persistentvolumes,widgets.example.com,pods
	// [customresourcedefinitions persistentvolumes]
}

func ExampleResolveName() {
	backup := []string{"customresourcedefinitions.apiextensions.k8s.io", "pods", "replicasets.apps"}
	for _, name := range []string{"pods", "customresourcedefinitions", "replicasets", "deployments"} {
		r, ok := restoreorder.ResolveName(name, backup)
		fmt.Printf("%s → %q %v\n", name, r, ok)
	}
	// Output:
	// pods → "pods" true
	// customresourcedefinitions → "customresourcedefinitions.apiextensions.k8s.io" true
	// replicasets → "replicasets.apps" true
	// deployments → "" false
}

// Pass one over an extracted backup: items come out in priority order, cluster scope
// first within a resource, namespaces and names sorted, with the mapping applied.
func ExampleCollect() {
	item := func(name string, lbls string) *fstest.MapFile {
		return &fstest.MapFile{Data: []byte(`{"metadata":{"name":"` + name + `","labels":{` + lbls + `}}}`)}
	}
	backup := fstest.MapFS{
		"metadata/version":                                    {Data: []byte("1.1.0")},
		"resources/namespaces/cluster/shop.json":              item("shop", ``),
		"resources/pods/namespaces/shop/web-2.json":           item("web-2", `"app":"web"`),
		"resources/pods/namespaces/shop/web-1.json":           item("web-1", `"app":"web"`),
		"resources/pods/namespaces/shop/debug.json":           item("debug", `"app":"debug"`),
		"resources/deployments.apps/namespaces/shop/web.json": item("web", `"app":"web"`),
		"resources/persistentvolumes/cluster/pv-1.json":       item("pv-1", ``),
	}
	src, err := restoreorder.FromFS(backup)
	if err != nil {
		fmt.Println(err)
		return
	}
	notDebug, _ := labels.Parse("app!=debug")
	c, err := restoreorder.Collect(context.Background(), src, restoreorder.DefaultPriorities(), restoreorder.Filter{
		LabelSelector:    notDebug,
		NamespaceMapping: map[string]string{"shop": "shop-copy"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for it := range c.Items() {
		fmt.Printf("%-18s %-10q → %-11q %s\n", it.Resource, it.OriginalNamespace, it.TargetNamespace, it.Name)
	}
	fmt.Println("total:", c.Total(), c.Resources())
	// Output:
	// namespaces         ""         → ""          shop
	// persistentvolumes  ""         → ""          pv-1
	// pods               "shop"     → "shop-copy" web-1
	// pods               "shop"     → "shop-copy" web-2
	// deployments.apps   "shop"     → "shop-copy" web
	// total: 5 [{namespaces 1} {persistentvolumes 1} {pods 2} {deployments.apps 1}]
}

// FromTarGz reads the backup's .tar.gz without extracting it; the two passes then run
// with a progress.Counter.
func ExampleFromTarGz() {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, f := range []struct{ name, body string }{
		{"metadata/version", "1.1.0"},
		{"resources/configmaps/namespaces/app/settings.json", `{"metadata":{"name":"settings"}}`},
		{"resources/secrets/namespaces/app/tls.json", `{"metadata":{"name":"tls"}}`},
		{"resources/secrets/v1-preferredversion/namespaces/app/tls.json", `{"metadata":{"name":"tls"}}`},
	} {
		_ = tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.body)), Typeflag: tar.TypeReg})
		_, _ = tw.Write([]byte(f.body))
	}
	_ = tw.Close()
	_ = zw.Close()

	ctx := context.Background()
	src, err := restoreorder.FromTarGz(&buf)
	if err != nil {
		fmt.Println(err)
		return
	}
	c, err := restoreorder.Collect(ctx, src, restoreorder.DefaultPriorities(), restoreorder.Filter{})
	if err != nil {
		fmt.Println(err)
		return
	}

	var counter progress.Counter
	counter.Collected(c.Total())
	counter.SetPass(progress.PassProcessing)
	for it := range c.Items() {
		data, err := restoreorder.ReadItem(ctx, src, it.Path)
		if err != nil {
			counter.Skipped()
			continue
		}
		fmt.Println(it.Path, len(data), "bytes")
		counter.Done()
	}
	counter.SetPass(progress.PassDone)
	fmt.Println(counter.Snapshot())
	// Output:
	// resources/secrets/namespaces/app/tls.json 27 bytes
	// resources/configmaps/namespaces/app/settings.json 32 bytes
	// done: 2/2 items
}
