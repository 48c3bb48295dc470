package apiservertest

import "fmt"

// missingError is why [Server.Config] found no kube-apiserver or no etcd to start: the
// one failure that skips a test outside CI. Its message says how to provide them.
type missingError struct {
	looked string // where the binaries were looked for and what was missing there
}

func (e *missingError) Error() string {
	return fmt.Sprintf("no kube-apiserver and etcd for envtest: %s; set KUBEBUILDER_ASSETS "+
		"to a directory that holds both (setup-envtest use -p path prints one; see "+
		"sigs.k8s.io/controller-runtime/tools/setup-envtest), or, in a checkout of "+
		"github.com/itemops/itemops, put kube-apiserver.xz and SHA256SUMS in ../shared/kube "+
		"beside the checkout, with xz installed, and let the tests build etcd, which "+
		"needs the Go module proxy, or put etcd 3.5 or later on PATH", e.looked)
}
