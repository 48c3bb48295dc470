package controllerruntime

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/internal/testutil/racebuild"
)

// operatorGoMod is the go.mod of an operator at the floor of the range this module
// supports: go 1.23 and controller-runtime v0.19.0 with the Kubernetes modules it pairs
// with.
const operatorGoMod = `module example.com/operator

go 1.23.0

require (
	github.com/prometheus/client_golang v1.19.1
	github.com/stretchr/testify v1.9.0
	k8s.io/api v0.31.0
	k8s.io/apimachinery v0.31.0
	k8s.io/client-go v0.31.0
	sigs.k8s.io/controller-runtime v0.19.0
)
`

// operatorTest is a test of the operator's, on testify.
const operatorTest = `package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMain(t *testing.T) { require.True(t, true) }
`

// operatorMain uses what an operator uses of controller-runtime and Prometheus.
const operatorMain = `package main

import (
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
%s)

func main() {
	_ = ctrl.Options{}
	_ = fake.NewClientBuilder()
	_ = corev1.ConfigMap{}
	_ = metrics.Registry.(prometheus.Registerer)
}
`

// TestOperatorAtTheFloorKeepsItsVersions holds the promise of docs/operators.md
// "Supported versions": an operator on controller-runtime v0.19.0 and go 1.23, with tests
// on testify v1.9.0, that adds this module (and so the itemops library, its boltstore
// included) and storage/kubestore keeps its go line and the version of every module its
// go.mod required, but those the table of that section lists, which move to the versions
// it gives, required by the module it names. The test tidies such an operator, adds the
// modules with their packages imported, tidies again and compares. It needs the module
// proxy (or a module cache that holds what the operator needs). CI runs it on this
// module's own go.mod only: a copy raised to the newest controller-runtime is not at
// the floor.
func TestOperatorAtTheFloorKeepsItsVersions(t *testing.T) {
	if testing.Short() {
		t.Skip("tidies an operator's module twice; run without -short")
	}
	here, err := os.Getwd()
	require.NoError(t, err)
	root := filepath.Join(here, "..", "..")
	dir := t.TempDir()
	write := func(name, content string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	write("go.mod", operatorGoMod)
	write("main.go", strings.Replace(operatorMain, "%s", "", 1))
	write("main_test.go", operatorTest)
	goRun(t, dir, "mod", "tidy")
	before := selection(t, dir)

	write("main.go", strings.Replace(operatorMain, "%s", `
	_ "github.com/itemops/itemops/integrations/controllerruntime"
	_ "github.com/itemops/itemops/integrations/controllerruntime/prommetrics"
	_ "github.com/itemops/itemops/operations/monitor"
	_ "github.com/itemops/itemops/storage/boltstore"
	_ "github.com/itemops/itemops/storage/kubestore"
`, 1))
	goRun(t, dir, "mod", "edit",
		"-require=github.com/itemops/itemops/integrations/controllerruntime@v0.0.0", "-replace=github.com/itemops/itemops/integrations/controllerruntime="+here,
		"-require=github.com/itemops/itemops/storage/kubestore@v0.0.0", "-replace=github.com/itemops/itemops/storage/kubestore="+filepath.Join(root, "storage", "kubestore"),
		"-require=github.com/itemops/itemops@v0.0.0", "-replace=github.com/itemops/itemops="+root)
	goRun(t, dir, "mod", "tidy")
	// Built as this test was, from the packages its own build left in the cache.
	build := append([]string{"build", "-o", os.DevNull}, racebuild.Flags()...)
	goRun(t, dir, append(build, ".")...)
	after := selection(t, dir)
	moved := map[string]move{}
	for path, v := range before {
		if after[path] != v {
			moved[path] = move{From: v, To: after[path]}
		}
	}
	want := documentedMoves(t, filepath.Join(root, "docs", "operators.md"))
	if d := cmp.Diff(want, moved, cmpopts.IgnoreFields(move{}, "By")); d != "" {
		t.Errorf("adding the integration to an operator on controller-runtime v0.19.0 moved other versions than docs/operators.md says (-doc +moved):\n%s", d)
	}
	graph := string(goRun(t, dir, "mod", "graph"))
	for path, m := range want {
		if !strings.Contains(graph, "\n"+m.By+" "+path+"@"+m.To+"\n") {
			t.Errorf("docs/operators.md says %s requires %s %s; go mod graph does not", m.By, path, m.To)
		}
	}
}

// A move is a module's version before and after the integration was added, and the
// module@version that requires the version after (documented only).
type move struct{ From, To, By string }

// documentedMoves reads the table of docs/operators.md whose rows are
// "| `module` | before | after | `requirer` version |".
func documentedMoves(t *testing.T, doc string) map[string]move {
	t.Helper()
	b, err := os.ReadFile(doc)
	require.NoError(t, err)
	rows := regexp.MustCompile("(?m)^\\| `([^`]+)` \\| (v\\S+) \\| (v\\S+) \\| `([^`]+)` (v\\S+) \\|$").FindAllStringSubmatch(string(b), -1)
	require.NotEmpty(t, rows, "no table of the versions the integration moves in %s", doc)
	moves := map[string]move{}
	for _, r := range rows {
		moves[r[1]] = move{From: r[2], To: r[3], By: r[4] + "@" + r[5]}
	}
	return moves
}

// selection returns the go line of the module in dir and the version its go.mod requires
// of every module.
func selection(t *testing.T, dir string) map[string]string {
	t.Helper()
	var mod struct {
		Go      string
		Require []struct{ Path, Version string }
	}
	require.NoError(t, json.Unmarshal(goRun(t, dir, "mod", "edit", "-json"), &mod))
	sel := map[string]string{"go": mod.Go}
	for _, r := range mod.Require {
		sel[r.Path] = r.Version
	}
	require.Contains(t, sel, "sigs.k8s.io/controller-runtime")
	return sel
}

// goRun runs the go command in dir, a module of its own that may update its go.mod and
// go.sum, and fails the test with its output if it fails.
func goRun(t *testing.T, dir string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off", "GOTOOLCHAIN=local")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go %s (in %s):\n%s", strings.Join(args, " "), dir, stderr.String())
	return out
}
