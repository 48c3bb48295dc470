// Command dropin installs the itemops drop-in into a Velero source tree: Velero's backup
// and restore operations controllers and its item-operations maps become thin shims
// over github.com/itemops/itemops/integrations/velero, which holds their logic. Run it
// through the apply script next to it:
//
//	integrations/velero/dropin/apply [-module-version VERSION] VELERO_DIR
//
// It changes, in VELERO_DIR:
//
//   - pkg/controller/backup_operations_controller.go and restore_operations_controller.go:
//     the bodies of Reconcile and of getBackupItemOperationProgress /
//     getRestoreItemOperationProgress call the bridge; updateBackupAndOperationsJSON and
//     updateRestoreAndOperationsJSON are removed; the imports follow. The types,
//     constructors, SetupWithManager and the rest stay as they are.
//   - pkg/itemoperationmap/backup_operation_map.go and restore_operation_map.go: the map
//     types become the bridge's BackupOperations and RestoreOperations, so the server, the
//     controllers and the download-request controller share them as they shared the maps.
//   - go.mod and go.sum: the bridge and itemops are required, with what building them
//     needs: replaced by the itemops checkout given with -checkout (the apply script
//     gives its own), or, with -module-version, at that version with no replace, so that
//     the tree builds wherever it is cloned. The bridge's requirement goes in the block
//     of Velero's direct requirements, the others in the block of its indirect ones.
//
// Nothing else is changed. A file that already imports the bridge is left alone, so
// applying twice changes nothing more. When a function the drop-in replaces is missing
// (a fork whose controllers diverged), it stops before writing anything and names it.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/mod/modfile"
)

const (
	bridgePath = "github.com/itemops/itemops/integrations/velero"
	rootPath   = "github.com/itemops/itemops"
	bridgeName = "itemvelero"
	veleroPath = "github.com/vmware-tanzu/velero"
)

func main() {
	checkout := flag.String("checkout", "", "replace the modules of itemops and its Velero bridge by this itemops checkout, at version v0.0.0")
	version := flag.String("module-version", "", "require this version of itemops and of its Velero bridge, with no replace: a tag, a pseudo-version or a commit, as go get takes it (default: latest)")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: dropin [-checkout DIR | -module-version VERSION] VELERO_DIR")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 || *checkout != "" && *version != "" {
		flag.Usage()
		os.Exit(2)
	}
	if err := apply(flag.Arg(0), *checkout, *version); err != nil {
		fmt.Fprintln(os.Stderr, "apply:", err)
		os.Exit(1)
	}
}

// apply installs the drop-in in the Velero tree at dir; see the package documentation.
func apply(dir, checkout, version string) error {
	if err := editFiles(dir); err != nil {
		return err
	}
	return requireBridge(dir, checkout, version)
}

// editFiles rewrites the Velero files of the drop-in in the tree at dir, all or none.
func editFiles(dir string) error {
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return err
	}
	if modulePath(mod) != veleroPath {
		return fmt.Errorf("%s: not a Velero source tree (its go.mod is not module %s)", dir, veleroPath)
	}
	files := map[string][]byte{}
	for _, f := range []struct {
		path string
		edit func(path string, src []byte) ([]byte, error)
	}{
		{"pkg/controller/backup_operations_controller.go", backupController},
		{"pkg/controller/restore_operations_controller.go", restoreController},
		{"pkg/itemoperationmap/backup_operation_map.go", mapFile("Backup")},
		{"pkg/itemoperationmap/restore_operation_map.go", mapFile("Restore")},
	} {
		path := filepath.Join(dir, filepath.FromSlash(f.path))
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.Contains(src, []byte(strconv.Quote(bridgePath))) {
			fmt.Printf("%s: already applied\n", f.path)
			continue
		}
		out, err := f.edit(f.path, src)
		if err != nil {
			return err
		}
		files[path] = out
	}
	for path, out := range files { // every edit succeeded: write them
		if err := os.WriteFile(path, out, 0o644); err != nil {
			return err
		}
		fmt.Printf("%s: rewritten\n", path)
	}
	return nil
}

// requireBridge makes the go.mod of dir require the bridge and itemops, at version,
// and adds to go.sum what building them needs, with go get, which changes nothing else
// of the module (go mod tidy would also need every test dependency of every
// dependency, which Velero's graph does not always offer); then requireDirect moves
// the bridge's requirement to the block of the direct ones. When checkout is set, both
// modules are replaced by that itemops checkout and required at v0.0.0, so the go.mod
// names a directory of this machine; otherwise they are required at version, "latest"
// when it is empty. It fails, with go's message, when go get does.
func requireBridge(dir, checkout, version string) error {
	if checkout != "" {
		abs, err := filepath.Abs(checkout)
		if err != nil {
			return err
		}
		mod, err := os.ReadFile(filepath.Join(abs, "go.mod"))
		if err != nil || modulePath(mod) != rootPath {
			return fmt.Errorf("%s: not an itemops checkout", checkout)
		}
		if err := goCmd(dir, "mod", "edit",
			"-replace="+rootPath+"="+abs, "-replace="+bridgePath+"="+filepath.Join(abs, "integrations", "velero")); err != nil {
			return err
		}
		version = "v0.0.0"
	}
	if version == "" {
		version = "latest"
	}
	if err := goCmd(dir, "get", bridgePath+"@"+version, rootPath+"@"+version); err != nil {
		return err
	}
	return requireDirect(filepath.Join(dir, "go.mod"), bridgePath)
}

// requireDirect rewrites the go.mod file at path with the requirement of the module
// mpath marked direct, and moved to the block of the direct requirements, as go mod
// tidy would: go get marks a module it adds indirect, as it does not read which
// packages of the main module import it, and the drop-in's files import the bridge.
// It fails when the file cannot be read, parsed or written.
func requireDirect(path, mpath string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	f, err := modfile.Parse(path, data, nil)
	if err != nil {
		return err
	}
	reqs := make([]*modfile.Require, len(f.Require))
	for i, r := range f.Require {
		reqs[i] = &modfile.Require{Mod: r.Mod, Indirect: r.Indirect && r.Mod.Path != mpath}
	}
	f.SetRequireSeparateIndirect(reqs)
	f.Cleanup()
	out, err := f.Format()
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o644)
}

func goCmd(dir string, args ...string) error {
	cmd := exec.Command("go", args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

// modulePath returns the module path of the go.mod content mod.
func modulePath(mod []byte) string {
	for _, line := range strings.Split(string(mod), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`)
		}
	}
	return ""
}

// backupController rewrites backup_operations_controller.go.
func backupController(path string, src []byte) ([]byte, error) {
	return controller(path, src, "backupOperationsReconciler", "updateBackupAndOperationsJSON",
		"getBackupItemOperationProgress", "BackupItemOperationProgress",
		func(recv, ctx, req string) string {
			return fmt.Sprintf(`{
	return %[1]s.itemOperationsMap.Reconcile(%[2]s, %[4]s.BackupEnv{Client: %[1]s.Client, Logger: %[1]s.logger,
		NewPluginManager: %[1]s.newPluginManager, BackupStoreGetter: %[1]s.backupStoreGetter, Metrics: %[1]s.metrics}, %[3]s)
}`, recv, ctx, req, bridgeName)
		})
}

// restoreController rewrites restore_operations_controller.go.
func restoreController(path string, src []byte) ([]byte, error) {
	return controller(path, src, "restoreOperationsReconciler", "updateRestoreAndOperationsJSON",
		"getRestoreItemOperationProgress", "RestoreItemOperationProgress",
		func(recv, ctx, req string) string {
			return fmt.Sprintf(`{
	return %[1]s.itemOperationsMap.Reconcile(%[2]s, %[4]s.RestoreEnv{Client: %[1]s.Client, Logger: %[1]s.logger,
		NewPluginManager: %[1]s.newPluginManager, BackupStoreGetter: %[1]s.backupStoreGetter,
		BackupLocation: func(name string) (*velerov1api.BackupStorageLocation, error) {
			info, err := %[1]s.fetchBackupInfo(name)
			return info.location, err
		}}, %[3]s)
}`, recv, ctx, req, bridgeName)
		})
}

// An edit replaces src[start:end] with text.
type edit struct {
	start, end int
	text       string
}

// controller rewrites an operations controller's file: the body of recvType's
// Reconcile becomes reconcile(receiver, ctx, req), the method update is removed, and
// the body of the function progress calls the bridge's bridgeProgress.
func controller(path string, src []byte, recvType, update, progress, bridgeProgress string, reconcile func(recv, ctx, req string) string) ([]byte, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	off := func(p token.Pos) int { return fset.Position(p).Offset }
	var edits []edit
	find := func(recv, name string) (*ast.FuncDecl, error) {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if ok && fd.Name.Name == name && receiver(fd) == recv && fd.Body != nil {
				return fd, nil
			}
		}
		what := name
		if recv != "" {
			what = "(*" + recv + ")." + name
		}
		return nil, fmt.Errorf("%s: no %s, which the drop-in replaces: the fork's controller has diverged; apply the drop-in by hand (docs/velero-fork.md)", path, what)
	}

	fd, err := find(recvType, "Reconcile")
	if err != nil {
		return nil, err
	}
	names := paramNames(fd.Type.Params)
	if len(fd.Recv.List[0].Names) != 1 || len(names) != 2 {
		return nil, fmt.Errorf("%s: Reconcile is not Velero's (want a named receiver and (ctx, req))", path)
	}
	edits = append(edits, edit{off(fd.Body.Lbrace), off(fd.Body.Rbrace) + 1, reconcile(fd.Recv.List[0].Names[0].Name, names[0], names[1])})

	fd, err = find(recvType, update)
	if err != nil {
		return nil, err
	}
	start := fd.Pos()
	if fd.Doc != nil {
		start = fd.Doc.Pos()
	}
	end := off(fd.End())
	for end < len(src) && src[end] == '\n' { // with the blank lines after it
		end++
	}
	edits = append(edits, edit{off(start), end, ""})

	fd, err = find("", progress)
	if err != nil {
		return nil, err
	}
	names = paramNames(fd.Type.Params)
	if len(names) != 3 {
		return nil, fmt.Errorf("%s: %s is not Velero's (want three parameters)", path, progress)
	}
	edits = append(edits, edit{off(fd.Body.Lbrace), off(fd.Body.Rbrace) + 1,
		fmt.Sprintf("{\n\treturn %s.%s(%s)\n}", bridgeName, bridgeProgress, strings.Join(names, ", "))})

	out := splice(src, edits)
	out, err = fixImports(path, out)
	if err != nil {
		return nil, err
	}
	return format.Source(out)
}

// receiver returns the type name of fd's receiver, or "" for a function.
func receiver(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return ""
	}
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

func paramNames(fl *ast.FieldList) []string {
	var names []string
	for _, f := range fl.List {
		for _, n := range f.Names {
			names = append(names, n.Name)
		}
	}
	return names
}

// splice applies edits, which do not overlap, to src.
func splice(src []byte, edits []edit) []byte {
	slices.SortFunc(edits, func(a, b edit) int { return a.start - b.start })
	var out bytes.Buffer
	last := 0
	for _, e := range edits {
		out.Write(src[last:e.start])
		out.WriteString(e.text)
		last = e.end
	}
	out.Write(src[last:])
	return out.Bytes()
}

// fixImports removes the imports src no longer uses and adds the bridge's.
func fixImports(path string, src []byte) ([]byte, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
	if err != nil {
		return nil, fmt.Errorf("%s after the edit: %w", path, err)
	}
	used := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok {
				used[id.Name] = true
			}
		}
		return true
	})
	off := func(p token.Pos) int { return fset.Position(p).Offset }
	var edits []edit
	var decl *ast.GenDecl
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.IMPORT {
			continue
		}
		if decl == nil && gd.Lparen.IsValid() {
			decl = gd
		}
		for _, s := range gd.Specs {
			is := s.(*ast.ImportSpec)
			name := importName(is)
			if name == "_" || name == "." || used[name] {
				continue
			}
			start, end := off(is.Pos()), off(is.End())
			for start > 0 && src[start-1] != '\n' { // the whole line
				start--
			}
			for end < len(src) && src[end] != '\n' {
				end++
			}
			edits = append(edits, edit{start, end + 1, ""})
		}
	}
	if decl == nil {
		return nil, errors.New(path + ": no import block")
	}
	rp := off(decl.Rparen)
	edits = append(edits, edit{rp, rp, "\n\t" + bridgeName + " " + strconv.Quote(bridgePath) + "\n"})
	return splice(src, edits), nil
}

// importName is the name a file refers to the import is by: its own name, or the last
// element of its path (before a major version suffix).
func importName(is *ast.ImportSpec) string {
	if is.Name != nil {
		return is.Name.Name
	}
	p, _ := strconv.Unquote(is.Path.Value)
	parts := strings.Split(p, "/")
	name := parts[len(parts)-1]
	if len(parts) > 1 && len(name) > 1 && name[0] == 'v' && strings.Trim(name[1:], "0123456789") == "" {
		name = parts[len(parts)-2]
	}
	return strings.ReplaceAll(name, "-", "")
}

// mapFile returns the rewrite of the item-operations map of kind ("Backup" or
// "Restore"): the file keeps its license header and package clause, and its types
// become the bridge's.
func mapFile(kind string) func(path string, src []byte) ([]byte, error) {
	return func(path string, src []byte) ([]byte, error) {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, src, parser.ParseComments|parser.PackageClauseOnly)
		if err != nil {
			return nil, err
		}
		if f.Name.Name != "itemoperationmap" {
			return nil, fmt.Errorf("%s: package %s, want itemoperationmap", path, f.Name.Name)
		}
		head := src[:fset.Position(f.Name.End()).Offset]
		out := fmt.Sprintf(`%s

import %s %q

// %[4]sItemOperationsMap holds the operations of the %[5]ss waiting for their plugins: with
// the itemops drop-in, an itemops store (see %[3]s).
type %[4]sItemOperationsMap = %[2]s.%[4]sOperations

// New%[4]sItemOperationsMap returns an empty %[4]sItemOperationsMap.
func New%[4]sItemOperationsMap() *%[4]sItemOperationsMap { return %[2]s.New%[4]sOperations() }
`, head, bridgeName, bridgePath, kind, strings.ToLower(kind))
		return format.Source([]byte(out))
	}
}
