package recipes_test

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/itemops/itemops/integrations/controllerruntime/apiservertest"
)

var kube = apiservertest.New(apiservertest.Options{})

func TestMain(m *testing.M) { os.Exit(kube.StopAfter(m).Run()) }

func TestFinalizerHoldsDeletion(t *testing.T) {
	c, err := client.New(kube.Config(t), client.Options{}) // skips without kube-apiserver and etcd
	require.NoError(t, err)
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Namespace: "default", GenerateName: "held-", Finalizers: []string{"example.com/hold"},
	}}
	require.NoError(t, c.Create(ctx, cm))
	require.NoError(t, c.Delete(ctx, cm))

	// The API server keeps the object, marked for deletion, until the finalizer goes.
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(cm), cm))
	require.NotNil(t, cm.DeletionTimestamp)
	stale := cm.DeepCopy()
	cm.Finalizers = nil
	require.NoError(t, c.Update(ctx, cm))
	require.True(t, apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(cm), cm)))

	// A write from a copy read before then: the object is gone.
	stale.Labels = map[string]string{"late": "true"}
	require.True(t, apierrors.IsNotFound(c.Update(ctx, stale)))
}
