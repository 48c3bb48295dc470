package kubestore

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// CRDs holds the CustomResourceDefinitions of the store's resources as YAML, one per
// file (crd/itemopsruns.yaml, crd/itemopschunks.yaml), for those who install them with
// their own tools; [InstallCRDs] installs them from code.
//
//go:embed crd/*.yaml
var CRDs embed.FS

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// installPoll is how often InstallCRDs looks whether the API server serves the
// resources it installed.
const installPoll = 100 * time.Millisecond

// InstallCRDs creates the CustomResourceDefinitions of [CRDs] on the API server that cfg
// reaches, or updates them to CRDs' spec where they exist, and waits until the server
// serves both resources. It is idempotent. It needs the right to get, create and update
// customresourcedefinitions. It fails with the API server's error, wrapped, when the
// server refuses a request, and with ctx.Err() (wrapped) when ctx ends first, which may
// leave some of the definitions installed.
func InstallCRDs(ctx context.Context, cfg *rest.Config) error {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("kubestore: install CRDs: %w", err)
	}
	crds, err := loadCRDs()
	if err != nil {
		return err
	}
	client := dyn.Resource(crdResource)
	for _, crd := range crds {
		if err := installCRD(ctx, client, crd); err != nil {
			return fmt.Errorf("kubestore: install CRD %s: %w", crd.GetName(), err)
		}
	}
	for _, res := range []schema.GroupVersionResource{runsResource, chunksResource} {
		err := wait.PollUntilContextCancel(ctx, installPoll, true, func(ctx context.Context) (bool, error) {
			_, err := dyn.Resource(res).List(ctx, metav1.ListOptions{Limit: 1})
			return err == nil, nil
		})
		if err != nil {
			return fmt.Errorf("kubestore: install CRDs: wait for %s: %w", res.Resource, err)
		}
	}
	return nil
}

// loadCRDs returns the definitions of CRDs.
func loadCRDs() ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, name := range []string{"crd/itemopsruns.yaml", "crd/itemopschunks.yaml"} {
		data, err := CRDs.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("kubestore: %w", err)
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), len(data)).Decode(&obj.Object); err != nil {
			return nil, fmt.Errorf("kubestore: %s: %w", name, err)
		}
		out = append(out, obj)
	}
	return out, nil
}

// installCRD creates crd, or sets the spec of the definition of its name to crd's,
// reading it again when an update loses a race.
func installCRD(ctx context.Context, client dynamic.NamespaceableResourceInterface, crd *unstructured.Unstructured) error {
	if _, err := client.Create(ctx, crd, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		return err
	}
	for {
		cur, err := client.Get(ctx, crd.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Object["spec"] = crd.Object["spec"]
		_, err = client.Update(ctx, cur, metav1.UpdateOptions{})
		if !apierrors.IsConflict(err) {
			return err
		}
	}
}
