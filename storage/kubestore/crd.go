package kubestore

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
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

// installPoll is how often InstallCRDs looks whether the API server has established
// the resources it installed.
const installPoll = 100 * time.Millisecond

// InstallCRDs creates the CustomResourceDefinitions of [CRDs] on the API server that cfg
// reaches, where they are absent, and waits until the server has established both. It
// needs the rights of the ClusterRole itemops-kubestore-install in [RBAC]. It is
// idempotent: a definition that is already the module's (as InstallCRDs, or kubectl
// apply of CRDs, left it) is left alone, and a second call writes nothing.
//
// InstallCRDs never changes a definition it finds: one whose spec is not the module's,
// installed by hand or by another version of this module, fails it with an error that
// wraps [ErrForeignCRD] and names the definition and the parts of its spec that differ.
// Changing the definitions under running stores is an administrator's act, described in
// the package documentation ("Installing and upgrading"). To tell, InstallCRDs asks the
// server to update the definition to the module's with dryRun=All, which writes nothing
// and gives the spec with the server's defaults, and compares that with the spec found.
//
// It fails with the API server's error, wrapped, when the server refuses a request, and
// with ctx.Err() (wrapped) when ctx ends first; either may leave one of the definitions
// installed and the other not, which a later call completes.
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
	for _, crd := range crds {
		err := wait.PollUntilContextCancel(ctx, installPoll, true, func(ctx context.Context) (bool, error) {
			cur, err := client.Get(ctx, crd.GetName(), metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return established(cur), nil
		})
		if err != nil {
			return fmt.Errorf("kubestore: install CRD %s: wait until it is established: %w", crd.GetName(), err)
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

// installCRD creates crd where no definition has its name, or else checks that the
// spec of the one there is crd's (see InstallCRDs), looking again when another
// installer creates or changes it meanwhile.
func installCRD(ctx context.Context, client dynamic.NamespaceableResourceInterface, crd *unstructured.Unstructured) error {
	for {
		cur, err := client.Get(ctx, crd.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = client.Create(ctx, crd, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				continue
			}
			return err
		}
		if err != nil {
			return err
		}
		want := cur.DeepCopy()
		want.Object["spec"] = crd.Object["spec"]
		defaulted, err := client.Update(ctx, want, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		switch {
		case apierrors.IsConflict(err):
			continue
		case apierrors.IsInvalid(err):
			// The server refuses the module's spec in place of this one: a definition
			// that stores versions the module's does not serve, say.
			return fmt.Errorf("the module's definition cannot replace it: %v: %w", err, ErrForeignCRD)
		case err != nil:
			return err
		}
		if diff := specDiff(cur, defaulted); len(diff) > 0 {
			return fmt.Errorf("its %s differ from the module's definition: %w", strings.Join(diff, ", "), ErrForeignCRD)
		}
		return nil
	}
}

// specDiff returns the fields of the spec of a (as "spec.versions") whose values differ
// from b's, in order.
func specDiff(a, b *unstructured.Unstructured) []string {
	as, _, _ := unstructured.NestedMap(a.Object, "spec")
	bs, _, _ := unstructured.NestedMap(b.Object, "spec")
	keys := maps.Clone(as)
	maps.Copy(keys, bs)
	var out []string
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if !equality.Semantic.DeepEqual(as[k], bs[k]) {
			out = append(out, "spec."+k)
		}
	}
	return out
}

// established reports whether the definition crd has the condition Established, which
// the API server sets once it serves the resource.
func established(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		c, _ := c.(map[string]any)
		if c["type"] == "Established" && c["status"] == "True" {
			return true
		}
	}
	return false
}
