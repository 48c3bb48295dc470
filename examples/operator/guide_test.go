package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/itemops/itemops/integrations/controllerruntime"
	"github.com/itemops/itemops/internal/testutil/racebuild"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// TestGuideCodeBlocks holds the Go blocks of docs/operators.md to this package: each must
// appear, verbatim, in its sources, which the build compiles and the tests run.
func TestGuideCodeBlocks(t *testing.T) {
	guide, err := os.ReadFile("../../docs/operators.md")
	require.NoError(t, err)
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	var src strings.Builder
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		src.Write(b)
	}
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(guide), -1)
	require.NotEmpty(t, blocks)
	for _, b := range blocks {
		require.Contains(t, src.String(), b[1], "a code block of docs/operators.md is not in examples/operator")
	}
}

// TestGuideShellBlocks runs the shell blocks of docs/operators.md as a reader would. Those
// of "1. A module" run in an empty directory beside a checkout of this repository (this
// one, linked as ../itemops); then this package's sources, and the CRD manifest under
// config that cluster.go embeds, are copied into the module they made, which takes the versions of the examples module, and go mod tidy, go build and go
// test must pass there, as the guide says. A shell block in any other section fails
// the test, which would not know where to run it; the command of "10. On a cluster",
// which needs a cluster, is in a block that is not run, and must be main's. It needs the module proxy, or a module
// cache holding what the operator needs.
func TestGuideShellBlocks(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and tests an operator's module; run without -short")
	}
	guide, err := os.ReadFile("../../docs/operators.md")
	require.NoError(t, err)
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.Symlink(root, filepath.Join(dir, "itemops")))
	where := map[string]string{"## 1. A module": dir}
	scripts := map[string]string{}
	section := ""
	for _, part := range regexp.MustCompile("(?ms)^(## [^\n]*)$|^```sh\n(.*?)^```").FindAllStringSubmatch(string(guide), -1) {
		if part[1] != "" {
			section = part[1]
			continue
		}
		_, ok := where[section]
		require.True(t, ok, "docs/operators.md has a shell block under %q, which this test does not run", section)
		scripts[section] += part[2]
	}
	require.Len(t, scripts, len(where), "a section of docs/operators.md that this test runs has lost its shell blocks")

	shell(t, dir, scripts["## 1. A module"])
	module := filepath.Join(dir, "appbackup")
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	for _, f := range files {
		if f == "guide_test.go" { // reads the guide by its path in this repository
			continue
		}
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(module, f), b, 0o644))
	}
	require.NoError(t, os.CopyFS(filepath.Join(module, "config"), os.DirFS("config")), "the CRD that cluster.go embeds")
	// The module takes the versions the examples module selects, so that its build reuses
	// the packages the examples' own build left in the cache; the guide's go mod tidy then
	// adds nothing newer, since the examples module is tidy.
	var examples struct {
		Require []struct{ Path, Version string }
	}
	require.NoError(t, json.Unmarshal([]byte(shell(t, "..", "go mod edit -json")), &examples))
	pin := "go mod edit"
	for _, r := range examples.Require {
		if !strings.HasPrefix(r.Path, "github.com/itemops/") {
			pin += " -require=" + r.Path + "@" + r.Version
		}
	}
	flags := strings.Join(racebuild.Flags(), " ") // built as this test was, to reuse its packages
	shell(t, module, pin+"\ngo mod tidy\ngo build "+flags+" ./...\ngo test "+flags+" ./...\n")

	// "10. On a cluster" gives the command that runs main on a cluster, which needs one:
	// it must be the command of main's package comment, whose path TestClusterExample
	// runs on the test API server.
	mainDoc, err := os.ReadFile("main.go")
	require.NoError(t, err)
	const command = "go run ./operator -cluster -kubeconfig ~/.kube/config"
	require.Contains(t, string(mainDoc), "//\t"+command+"\n", "main's package comment")
	require.Contains(t, string(guide), "\n"+command+"\n", "docs/operators.md, 10. On a cluster")
}

// shell runs script with bash in dir, stopping at the first command that fails, and
// fails the test with its output then; it returns the output.
func shell(t *testing.T, dir, script string) string {
	t.Helper()
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(racebuild.Environ(), "GOWORK=off")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "in %s:\n%s\n%s", dir, script, out)
	return string(out)
}

// TestGuideStatusSchema holds the status schema that docs/operators.md gives (its one
// yaml block) to the status of the example's CRD, config/crd/appbackups.yaml. Then it
// installs a CRD of a kind of its own, with the guide's schema as its status, on the
// test API server, writes through its status subresource a status that RunStatus.Set
// filled, every field of the schema set and the texts of its operations cut, and reads
// it back whole: the API server pruned nothing and refused nothing.
func TestGuideStatusSchema(t *testing.T) {
	guide, err := os.ReadFile("../../docs/operators.md")
	require.NoError(t, err)
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(guide), -1)
	require.Len(t, blocks, 1, "docs/operators.md gives the status's schema in one yaml block")
	var fromGuide map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(blocks[0][1]), &fromGuide))
	require.Len(t, fromGuide, 1)
	schema, ok := fromGuide["status"].(map[string]any)
	require.True(t, ok, "the block is the property status")

	crd := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal(crdManifest, &crd.Object))
	versions, _, err := unstructured.NestedSlice(crd.Object, "spec", "versions")
	require.NoError(t, err)
	require.Len(t, versions, 1)
	example, _, err := unstructured.NestedMap(versions[0].(map[string]any), "schema", "openAPIV3Schema", "properties", "status")
	require.NoError(t, err)
	if diff := cmp.Diff(example, schema); diff != "" {
		t.Fatalf("the status schema of config/crd/appbackups.yaml (-) and of docs/operators.md (+) differ:\n%s", diff)
	}

	// The status to write: every field set, the operations' texts too long.
	long := strings.Repeat("é", 3000)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	o := operations.Owner{Kind: phase.Backup, Name: "shop/nightly", UID: "u1"}
	run := operations.Run{Owner: o, Phase: phase.New, Created: t0, Errors: 1, Warnings: 2}
	require.NoError(t, run.SetPhase(phase.InProgress, "main run started", t0))
	require.NoError(t, run.SetPhase(phase.WaitingForPluginOperationsPartiallyFailed, "an operation failed", t0.Add(time.Minute)))
	run.FailureReason = "not failed, but every field is shown"
	item := operations.ResourceIdentifier{Resource: "persistentvolumeclaims", Namespace: "shop", Name: "data-0"}
	ops := []operations.Operation{
		{Owner: o, Action: "example.io/upload", ID: "upload-0", Resource: item, Status: operations.Status{Phase: operations.OperationCompleted,
			NCompleted: 10, NTotal: 10, OperationUnits: "MiB", Created: t0, Updated: t0.Add(2 * time.Minute)}},
		{Owner: o, Action: "example.io/upload", ID: "upload-1", Resource: item, Status: operations.Status{Phase: operations.OperationInProgress,
			NCompleted: 3, NTotal: 10, OperationUnits: "MiB", Description: long, Created: t0, Updated: t0.Add(3 * time.Minute)},
			Monitor: operations.MonitorState{Attempts: 1, ErrorSince: t0.Add(3 * time.Minute), LastError: "upload service unavailable"}},
		{Owner: o, Action: "example.io/upload", ID: "upload-2", Resource: item, Status: operations.Status{Phase: operations.OperationFailed,
			Error: long, NCompleted: 1, NTotal: 10, OperationUnits: "MiB", Description: "uploading", Created: t0, Updated: t0.Add(90 * time.Second)}},
	}
	var status controllerruntime.RunStatus
	status.Set(run, ops, 1)
	status.SetBlocked(errors.New(long), 1, t0.Add(4*time.Minute))
	want := asMap(t, status)
	requireEvery(t, schema, want, "status")

	cfg := kube.Config(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	scheme, err := newScheme()
	require.NoError(t, err)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	require.NoError(t, err)
	// A kind of the test's own, so that the schema under test is the guide's alone.
	guideCRD := crd.DeepCopy()
	guideCRD.SetName("guidestatuses.example.itemops.io")
	require.NoError(t, unstructured.SetNestedStringMap(guideCRD.Object, map[string]string{
		"kind": "GuideStatus", "listKind": "GuideStatusList", "plural": "guidestatuses", "singular": "guidestatus"}, "spec", "names"))
	version := versions[0].(map[string]any)
	require.NoError(t, unstructured.SetNestedField(version, schema, "schema", "openAPIV3Schema", "properties", "status"))
	require.NoError(t, unstructured.SetNestedSlice(guideCRD.Object, []any{version}, "spec", "versions"))
	require.NoError(t, c.Create(ctx, guideCRD))
	t.Cleanup(func() { _ = c.Delete(context.Background(), guideCRD) })
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "guide-"}}
	require.NoError(t, c.Create(ctx, ns))

	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion("example.itemops.io/v1")
	obj.SetKind("GuideStatus")
	obj.SetNamespace(ns.Name)
	obj.SetName("nightly")
	eventually(t, "GuideStatus served", func() bool { return c.Create(ctx, obj) == nil })
	obj.Object["status"] = want
	require.NoError(t, c.Status().Update(ctx, obj), "the API server refuses the status")
	got := &unstructured.Unstructured{}
	got.SetAPIVersion("example.itemops.io/v1")
	got.SetKind("GuideStatus")
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(obj), got))
	if diff := cmp.Diff(want, asMap(t, got.Object["status"])); diff != "" {
		t.Errorf("the status written (-) and read back (+) differ:\n%s", diff)
	}
}

// asMap returns v as the JSON of a status holds it: maps, slices, strings, float64s.
func asMap(t *testing.T, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	return m
}

// requireEvery fails the test unless value, an object of schema, sets every property of
// schema, and of its objects' schemas in turn (the first item of an array).
func requireEvery(t *testing.T, schema map[string]any, value any, path string) {
	t.Helper()
	props, _ := schema["properties"].(map[string]any)
	names := make([]string, 0, len(props))
	for name := range props {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		v, ok := value.(map[string]any)[name]
		require.True(t, ok, "the status to write sets %s.%s", path, name)
		sub := props[name].(map[string]any)
		switch sub["type"] {
		case "object":
			requireEvery(t, sub, v, path+"."+name)
		case "array":
			require.NotEmpty(t, v, path+"."+name)
			if items, ok := sub["items"].(map[string]any); ok && items["type"] == "object" {
				requireEvery(t, items, v.([]any)[0], path+"."+name+"[0]")
			}
		}
	}
}
