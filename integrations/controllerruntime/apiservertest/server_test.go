package apiservertest

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var kube = New(Options{})

// disturbed is a server of TestPauseAndRestart's own, which it pauses and whose etcd it
// restarts.
var disturbed = New(Options{})

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(kube.StopAfter(disturbed.StopAfter(m)))
}

// TestConfigServesARealAPIServer writes an object and reads it back, and a write with a
// stale resourceVersion gets the 409 Conflict that only a real API server gives.
func TestConfigServesARealAPIServer(t *testing.T) {
	c, err := client.New(kube.Config(t), client.Options{})
	require.NoError(t, err)
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "apiservertest"}, Data: map[string]string{"k": "1"}}
	require.NoError(t, c.Create(ctx, cm))
	stale := cm.DeepCopy()
	cm.Data["k"] = "2"
	require.NoError(t, c.Update(ctx, cm))
	stale.Data["k"] = "3"
	err = c.Update(ctx, stale)
	require.True(t, apierrors.IsConflict(err), "Update with a stale resourceVersion = %v, want a 409 Conflict", err)
	var got corev1.ConfigMap
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(cm), &got))
	require.Equal(t, "2", got.Data["k"])
	// Config returns a copy each time: changing one leaves the next as it was.
	first := kube.Config(t)
	first.Host = "changed"
	require.NotEqual(t, "changed", kube.Config(t).Host)
}

// TestUserConfig: the server takes a client of UserConfig for the user and groups it
// names, and lets it do only what RBAC grants: a read of ConfigMaps is forbidden until a
// RoleBinding to one of its groups allows it, in that namespace alone.
func TestUserConfig(t *testing.T) {
	ctx := context.Background()
	admin, err := kubernetes.NewForConfig(kube.Config(t))
	require.NoError(t, err)
	user, err := kubernetes.NewForConfig(kube.UserConfig(t, "alice", "readers", "auditors"))
	require.NoError(t, err)

	review, err := user.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	require.NoError(t, err)
	want := authenticationv1.UserInfo{Username: "alice", Groups: []string{"readers", "auditors", "system:authenticated"}}
	got := review.Status.UserInfo
	got.Extra = nil // the server adds the certificate's hash
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the server sees the user as (-want +got):\n%s", diff)
	}

	const ns = "default"
	_, err = user.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	require.True(t, apierrors.IsForbidden(err), "List before any binding = %v, want Forbidden", err)
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "read-configmaps"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list"}}},
	}
	_, err = admin.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{})
	require.NoError(t, err)
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "readers-read-configmaps"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "readers"}},
	}
	_, err = admin.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := user.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		return err == nil
	}, time.Minute, 50*time.Millisecond, "the group's binding never let the user list ConfigMaps")
	_, err = user.CoreV1().ConfigMaps("kube-system").List(ctx, metav1.ListOptions{})
	require.True(t, apierrors.IsForbidden(err), "List in another namespace = %v, want Forbidden", err)
	_, err = user.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "alice"}}, metav1.CreateOptions{})
	require.True(t, apierrors.IsForbidden(err), "Create, which the Role does not grant, = %v, want Forbidden", err)
}

// recorder is a TB that records how a test ended, as testing's Skip and Fatal end it.
type recorder struct {
	skipped, failed bool
	msg             string
}

func (r *recorder) Helper() {}
func (r *recorder) Skip(args ...any) {
	r.skipped, r.msg = true, fmt.Sprint(args...)
	runtime.Goexit()
}
func (r *recorder) Fatal(args ...any) {
	r.failed, r.msg = true, fmt.Sprint(args...)
	runtime.Goexit()
}

// configOf calls s.Config on a goroutine of its own, which Skip and Fatal end, and
// returns how the call ended.
func configOf(s *Server) recorder {
	var r recorder
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Config(&r)
	}()
	<-done
	return r
}

// TestConfigWithoutBinaries: with KUBEBUILDER_ASSETS naming a directory that lacks the
// binaries, Config skips and says how to provide them, but fails under CI=true.
func TestConfigWithoutBinaries(t *testing.T) {
	for _, tc := range []struct {
		name         string
		ci           string
		skip, failed bool
	}{
		{name: "outside CI the test skips", ci: "", skip: true},
		{name: "CI=false counts as outside CI", ci: "false", skip: true},
		{name: "under CI=true the test fails", ci: "true", failed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("KUBEBUILDER_ASSETS", t.TempDir())
			t.Setenv("CI", tc.ci)
			s := New(Options{})
			r := configOf(s)
			require.Equal(t, tc.skip, r.skipped, "skipped")
			require.Equal(t, tc.failed, r.failed, "failed")
			require.Contains(t, r.msg, "set KUBEBUILDER_ASSETS to a directory that holds both")
			require.Contains(t, r.msg, "kube-apiserver: no such file or directory")
			require.Equal(t, 0, s.StopAfter(runFunc(func() int { return 0 })).Run(), "StopAfter with no server started")
		})
	}
}

// TestConfigWithAMissingCRD: a CRD path that does not exist fails the tests that ask for
// the server, CI or not, and the server that started is stopped.
func TestConfigWithAMissingCRD(t *testing.T) {
	kube.Config(t) // skips, as the tests that need the server do, without the binaries
	s := New(Options{CRDDirectoryPaths: []string{"testdata/missing"}})
	r := configOf(s)
	require.True(t, r.failed, "failed")
	require.Contains(t, r.msg, "install the CRDs of [testdata/missing]")
	require.Equal(t, 0, s.StopAfter(runFunc(func() int { return 0 })).Run(), "StopAfter of the server that started")
}

// TestPauseAndRestart pauses kube-apiserver, which then answers nothing until resumed,
// and restarts its etcd, after which the server serves the objects it had and takes
// writes again.
func TestPauseAndRestart(t *testing.T) {
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(disturbed.Config(t))
	require.NoError(t, err)
	cms := cs.CoreV1().ConfigMaps("default")
	_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kept"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	require.NoError(t, err)

	require.NoError(t, disturbed.PauseAPIServer())
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = cms.Get(short, "kept", metav1.GetOptions{})
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded, "a read from a paused server")
	require.NoError(t, disturbed.ResumeAPIServer())
	_, err = cms.Get(ctx, "kept", metav1.GetOptions{})
	require.NoError(t, err, "a read from a resumed server")
	require.NoError(t, disturbed.ResumeAPIServer(), "resuming a server that runs")

	before, err := childWithArg("--data-dir=" + disturbed.data)
	require.NoError(t, err)
	require.NoError(t, disturbed.RestartEtcd())
	after, err := childWithArg("--data-dir=" + disturbed.data)
	require.NoError(t, err)
	require.NotEqual(t, before, after, "etcd's process after RestartEtcd")
	// kube-apiserver reconnects to etcd on its own, after a moment.
	require.Eventually(t, func() bool {
		_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after"}}, metav1.CreateOptions{})
		return err == nil || apierrors.IsAlreadyExists(err)
	}, time.Minute, 100*time.Millisecond, "a write after etcd restarted")
	got, err := cms.Get(ctx, "kept", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"k": "v"}, got.Data, "an object written before etcd restarted")
}

// TestCPUTime checks that the processor time of the server's processes is counted and
// grows with the work they do: 200 LISTs make kube-apiserver and etcd work.
func TestCPUTime(t *testing.T) {
	cs, err := kubernetes.NewForConfig(disturbed.Config(t))
	require.NoError(t, err)
	api0, etcd0, err := disturbed.CPUTime()
	require.NoError(t, err)
	require.Positive(t, api0, "kube-apiserver's time since it started")
	for range 200 {
		_, err := cs.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{})
		require.NoError(t, err)
	}
	api1, etcd1, err := disturbed.CPUTime()
	require.NoError(t, err)
	require.Greater(t, api1, api0, "kube-apiserver's time after 200 requests")
	require.GreaterOrEqual(t, etcd1, etcd0, "etcd's time never goes down")
	_, _, err = New(Options{}).CPUTime()
	require.ErrorContains(t, err, "did not start")
}
