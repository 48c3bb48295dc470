package kubestore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/itemops/itemops/internal/testutil/scalebench"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/kubestore"
)

// counter counts the requests a client sends through it and the bytes of their bodies
// each way.
type counter struct {
	next                http.RoundTripper
	requests, sent, got atomic.Int64
}

func (c *counter) RoundTrip(req *http.Request) (*http.Response, error) {
	c.requests.Add(1)
	if req.ContentLength > 0 {
		c.sent.Add(req.ContentLength)
	}
	resp, err := c.next.RoundTrip(req)
	if err == nil {
		resp.Body = &countedBody{ReadCloser: resp.Body, n: &c.got}
	}
	return resp, err
}

func (c *counter) counts() map[string]int64 {
	return map[string]int64{"requests": c.requests.Load(), "sent-B": c.sent.Load(), "received-B": c.got.Load()}
}

// countedBody adds the bytes read from a response body to n.
type countedBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countedBody) Read(p []byte) (int, error) {
	k, err := b.ReadCloser.Read(p)
	b.n.Add(int64(k))
	return k, err
}

// counted returns a copy of cfg whose requests c counts.
func counted(cfg *rest.Config, c *counter) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { c.next = rt; return c })
	return cfg
}

// BenchmarkObjectsAndMemory measures what a store puts on the API server, once whatever
// b.N is: "runs=1000x100" loads 1,000 waiting backups of 100 operations each (the
// workload of BenchmarkMonitorScale) and reports the objects and bytes of JSON per run
// that the namespace holds, and the resident memory, in MiB, of the API server's and
// etcd's processes before and after the load; "runs=1x10000" does the same for one run
// of 10,000 operations, each with a description of its own, which spills. It reads
// /proc, so it runs on Linux only.
func BenchmarkObjectsAndMemory(b *testing.B) {
	b.Run("runs=1000x100", func(b *testing.B) {
		const runs = 1000
		cfg := config(b)
		before := serverMemory(b)
		s, _, ns := newStoreIn(b, nil)
		scalebench.Load(b, s, runs)
		reportObjects(b, cfg, ns, runs)
		after := serverMemory(b)
		for _, name := range []string{"kube-apiserver", "etcd"} {
			b.ReportMetric(float64(before[name])/(1<<20), name+"-MiB-before")
			b.ReportMetric(float64(after[name])/(1<<20), name+"-MiB-after")
		}
	})
	b.Run("runs=1x10000", func(b *testing.B) {
		s, cfg, ns := newStoreIn(b, nil)
		o := operations.Owner{Kind: phase.Backup, Name: "big", UID: "uid-big"}
		if err := s.CreateRunWithOperations(context.Background(), waitingRun(b, o), testOps(o, 10_000, operations.OperationInProgress)); err != nil {
			b.Fatalf("CreateRunWithOperations: %v", err)
		}
		reportObjects(b, cfg, ns, 1)
	})
}

// reportObjects reports the objects of each resource of the store that namespace ns
// holds, and their bytes of JSON, per run of its runs (the chunks count the format
// marker).
func reportObjects(b *testing.B, cfg *rest.Config, ns string, runs int) {
	b.Helper()
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	for _, resource := range []string{"itemopsruns", "itemopschunks"} {
		res := schema.GroupVersionResource{Group: kubestore.Group, Version: kubestore.Version, Resource: resource}
		list, err := dyn.Resource(res).Namespace(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			b.Fatalf("list %s: %v", resource, err)
		}
		var size int
		for _, o := range list.Items {
			raw, err := json.Marshal(o.Object)
			if err != nil {
				b.Fatal(err)
			}
			size += len(raw)
		}
		b.ReportMetric(float64(len(list.Items))/float64(runs), resource+"/run")
		b.ReportMetric(float64(size)/float64(runs), resource+"-JSON-B/run")
	}
}

// serverMemory returns the resident memory, in bytes, of this process's children
// named kube-apiserver and etcd: the test's API server and its etcd.
func serverMemory(t testing.TB) map[string]int64 {
	t.Helper()
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("read /proc: %v", err)
	}
	self := strconv.Itoa(os.Getpid())
	out := map[string]int64{}
	for _, dir := range dirs {
		status, err := os.ReadFile(filepath.Join(dir, "status"))
		if err != nil {
			continue // the process has ended
		}
		var name, ppid string
		var rss int64
		for _, line := range strings.Split(string(status), "\n") {
			key, value, _ := strings.Cut(line, ":")
			value = strings.TrimSpace(value)
			switch key {
			case "Name":
				name = value
			case "PPid":
				ppid = value
			case "VmRSS":
				kib, _ := strconv.ParseInt(strings.TrimSuffix(value, " kB"), 10, 64)
				rss = kib << 10
			}
		}
		if ppid == self && (name == "kube-apiserver" || name == "etcd") {
			out[name] += rss
		}
	}
	for _, name := range []string{"kube-apiserver", "etcd"} {
		if out[name] == 0 {
			t.Fatalf("found no process %s among this process's children: %v", name, fmt.Sprint(out))
		}
	}
	return out
}
