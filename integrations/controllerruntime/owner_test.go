package controllerruntime

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

func TestOwnerOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		obj  metav1.ObjectMeta
		want operations.Owner
	}{
		{"namespaced", metav1.ObjectMeta{Namespace: "shop", Name: "nightly", UID: "u1"}, operations.Owner{Kind: phase.Backup, Name: "shop/nightly", UID: "u1"}},
		{"cluster-scoped", metav1.ObjectMeta{Name: "all", UID: "u2"}, operations.Owner{Kind: phase.Backup, Name: "all", UID: "u2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := &corev1.ConfigMap{ObjectMeta: tc.obj}
			got := OwnerOf(phase.Backup, obj)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("OwnerOf (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(types.NamespacedName{Namespace: tc.obj.Namespace, Name: tc.obj.Name}, ObjectKey(got)); diff != "" {
				t.Errorf("ObjectKey(OwnerOf) (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzObjectKey: any namespace and name Kubernetes could give (no "/") survive the round
// trip, and ObjectKey never fails on a stored name.
func FuzzObjectKey(f *testing.F) {
	f.Add("shop", "nightly")
	f.Add("", "cluster-wide")
	f.Fuzz(func(t *testing.T, ns, name string) {
		obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		key := ObjectKey(OwnerOf(phase.Restore, obj))
		validName := name != "" && !strings.Contains(ns, "/") && !strings.Contains(name, "/")
		if validName && key != (types.NamespacedName{Namespace: ns, Name: name}) {
			t.Fatalf("ObjectKey(OwnerOf(%q/%q)) = %v", ns, name, key)
		}
		_ = ObjectKey(operations.Owner{Kind: phase.Backup, Name: ns + name}) // any stored name
	})
}
