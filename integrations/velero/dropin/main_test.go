package main

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The files the drop-in changes, and the files it reads besides.
var dropinFiles = []string{
	"pkg/controller/backup_operations_controller.go",
	"pkg/controller/restore_operations_controller.go",
	"pkg/itemoperationmap/backup_operation_map.go",
	"pkg/itemoperationmap/restore_operation_map.go",
	"go.mod",
	"go.sum",
}

// veleroMain is the source snapshot of Velero's main branch: the directory that
// ITEMOPS_VELERO_MAIN names (.ci/velero sets it, since it tests a copy of this module
// kept elsewhere), or else the one kept next to the repository (../shared from its
// root, five levels up from this package).
var veleroMain = func() string {
	if dir := os.Getenv("ITEMOPS_VELERO_MAIN"); dir != "" {
		return dir
	}
	return filepath.Join("..", "..", "..", "..", "shared", "velero-main")
}()

// copyTree copies the files the drop-in touches from Velero's tree src into a new
// directory.
func copyTree(t *testing.T, src string) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range dropinFiles {
		data, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func read(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, f := range dropinFiles {
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f)))
		if err != nil {
			t.Fatal(err)
		}
		out[f] = data
	}
	return out
}

// TestEditVeleroMain rewrites the files of Velero main that the drop-in changes, and
// checks the shims, that Velero's constructors and helpers are kept, that the result is
// gofmt-clean Go, and that a second run changes nothing. It needs the snapshot of Velero
// main next to the repository. The go.mod step, and building and testing whole trees
// with the drop-in, are CI's (.ci/velero).
func TestEditVeleroMain(t *testing.T) {
	if _, err := os.Stat(filepath.Join(veleroMain, "go.mod")); errors.Is(err, fs.ErrNotExist) {
		t.Skipf("needs Velero main's source snapshot at %s (../shared/velero-main next to the repository, or the directory ITEMOPS_VELERO_MAIN names), which is absent", veleroMain)
	}
	dir := copyTree(t, veleroMain)
	if err := editFiles(dir); err != nil {
		t.Fatal(err)
	}
	got := read(t, dir)
	for f, want := range map[string][]string{
		"pkg/controller/backup_operations_controller.go": {
			"func NewBackupOperationsReconciler(", "func wrapErrMsg(", "defaultBackupOperationsFrequency",
			"return c.itemOperationsMap.Reconcile(ctx, itemvelero.BackupEnv{",
			"return itemvelero.BackupItemOperationProgress(backup, pluginManager, operationsList)",
		},
		"pkg/controller/restore_operations_controller.go": {
			"func NewRestoreOperationsReconciler(", "func (r *restoreOperationsReconciler) fetchBackupInfo(",
			"return r.itemOperationsMap.Reconcile(ctx, itemvelero.RestoreEnv{",
			"return itemvelero.RestoreItemOperationProgress(restore, pluginManager, operationsList)",
		},
		"pkg/itemoperationmap/backup_operation_map.go":  {"Licensed under the Apache License", "type BackupItemOperationsMap = itemvelero.BackupOperations"},
		"pkg/itemoperationmap/restore_operation_map.go": {"type RestoreItemOperationsMap = itemvelero.RestoreOperations"},
	} {
		for _, w := range want {
			if !bytes.Contains(got[f], []byte(w)) {
				t.Errorf("%s: no %q", f, w)
			}
		}
	}
	for _, f := range []string{"pkg/controller/backup_operations_controller.go", "pkg/controller/restore_operations_controller.go"} {
		for _, gone := range []string{"updateBackupAndOperationsJSON", "updateRestoreAndOperationsJSON", "OperationsForBackup{", "OperationsForRestore{"} {
			if bytes.Contains(got[f], []byte(gone)) {
				t.Errorf("%s still has %s", f, gone)
			}
		}
	}
	cmd := exec.Command("gofmt", "-l", dir)
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) != 0 {
		t.Errorf("gofmt -l: %v\n%s", err, out)
	}

	if err := editFiles(dir); err != nil {
		t.Fatal(err)
	}
	for f, data := range read(t, dir) {
		if !bytes.Equal(got[f], data) {
			t.Errorf("%s: a second apply changed it", f)
		}
	}
}

// TestApplyStopsOnDivergedFork checks that a tree whose controller lacks a function the
// drop-in replaces is refused with its name, and that nothing is written.
func TestApplyStopsOnDivergedFork(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"go.mod": "module github.com/vmware-tanzu/velero\n\ngo 1.23.0\n",
		"pkg/controller/backup_operations_controller.go": `package controller

import "context"

type backupOperationsReconciler struct{}

func (c *backupOperationsReconciler) Reconcile(ctx context.Context, req int) (int, error) { return 0, nil }

func (c *backupOperationsReconciler) updateBackupAndOperationsJSON() error { return nil }
`,
		"pkg/controller/restore_operations_controller.go": "package controller\n",
		"pkg/itemoperationmap/backup_operation_map.go":    "package itemoperationmap\n",
		"pkg/itemoperationmap/restore_operation_map.go":   "package itemoperationmap\n",
	}
	for f, content := range files {
		path := filepath.Join(dir, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	err := apply(dir, "", "latest")
	if err == nil || !strings.Contains(err.Error(), "no getBackupItemOperationProgress") {
		t.Fatalf("apply = %v, want an error naming getBackupItemOperationProgress", err)
	}
	for f, content := range files {
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f)))
		if err != nil {
			t.Fatal(err)
		}
		if string(data) != content {
			t.Errorf("%s was written", f)
		}
	}

	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/other\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := apply(dir, "", "latest"); err == nil || !strings.Contains(err.Error(), "not a Velero source tree") {
		t.Errorf("apply on another module = %v, want a refusal", err)
	}
}

// TestRequireDirect checks that requireDirect moves the bridge's requirement, which go
// get writes among the indirect ones, to the block of the direct ones, unmarked, and
// leaves every other line of a go.mod laid out as Velero's is as it was, and that a
// second run changes nothing.
func TestRequireDirect(t *testing.T) {
	const pseudo = "v0.0.0-20261127095805-8a4d4f3d4ee0"
	in := `module github.com/vmware-tanzu/velero

go 1.24.0

require (
	github.com/aws/aws-sdk-go-v2 v1.36.3
	github.com/vmware-tanzu/crash-diagnostics v0.3.7
	sigs.k8s.io/yaml v1.6.0
)

require (
	cel.dev/expr v0.25.1 // indirect
	github.com/itemops/itemops ` + pseudo + ` // indirect
	github.com/itemops/itemops/integrations/velero ` + pseudo + ` // indirect
	github.com/looplab/fsm v1.0.3 // indirect
	sigs.k8s.io/structured-merge-diff/v6 v6.3.0 // indirect
)

replace github.com/kopia/kopia => github.com/project-velero/kopia v0.0.0-20260512025144-908c5c098101
`
	want := `module github.com/vmware-tanzu/velero

go 1.24.0

require (
	github.com/aws/aws-sdk-go-v2 v1.36.3
	github.com/itemops/itemops/integrations/velero ` + pseudo + `
	github.com/vmware-tanzu/crash-diagnostics v0.3.7
	sigs.k8s.io/yaml v1.6.0
)

require (
	cel.dev/expr v0.25.1 // indirect
	github.com/itemops/itemops ` + pseudo + ` // indirect
	github.com/looplab/fsm v1.0.3 // indirect
	sigs.k8s.io/structured-merge-diff/v6 v6.3.0 // indirect
)

replace github.com/kopia/kopia => github.com/project-velero/kopia v0.0.0-20260512025144-908c5c098101
`
	path := filepath.Join(t.TempDir(), "go.mod")
	if err := os.WriteFile(path, []byte(in), 0o644); err != nil {
		t.Fatal(err)
	}
	for run := 1; run <= 2; run++ {
		if err := requireDirect(path, bridgePath); err != nil {
			t.Fatalf("run %d: requireDirect: %v", run, err)
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, string(got)); diff != "" {
			t.Errorf("run %d: go.mod (-want +got):\n%s", run, diff)
		}
	}

	if err := os.WriteFile(path, []byte("module m\nrequire (\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := requireDirect(path, bridgePath); err == nil {
		t.Error("requireDirect on a go.mod that does not parse: nil error")
	}
	if got, _ := os.ReadFile(path); string(got) != "module m\nrequire (\n" {
		t.Errorf("requireDirect wrote a go.mod that does not parse: %q", got)
	}
}
