package itemops_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestExportedNames keeps the naming rules of docs/architecture.md "Names" over the
// exported names of every package of every module but internal ones. It parses every
// non-test Go file and fails on each name that begins with its package's name (phase.Set,
// not phase.PhaseSet), and on each package-level constant or variable that a field or a
// method of the same package also names (monitor.TimeoutMessage beside the field
// FinalizeStats.TimedOut).
func TestExportedNames(t *testing.T) {
	type pkgNames struct {
		values  map[string]string // constant or variable → where it is declared
		members map[string]string // field or method → its type and where it is declared
	}
	pkgs := map[string]*pkgNames{} // by directory
	var stutters []string
	files := parseSources(t, func(path string, fset *token.FileSet, f *ast.File) {
		dir := filepath.ToSlash(filepath.Dir(path))
		if isInternal(dir+"/") || f.Name.Name == "main" {
			return
		}
		p := pkgs[dir]
		if p == nil {
			p = &pkgNames{values: map[string]string{}, members: map[string]string{}}
			pkgs[dir] = p
		}
		at := func(n ast.Node) string { return fset.Position(n.Pos()).String() }
		stutter := func(id *ast.Ident) {
			if id.IsExported() && repeatsPackage(f.Name.Name, id.Name) {
				stutters = append(stutters, fmt.Sprintf("%s: %s.%s", at(id), f.Name.Name, id.Name))
			}
		}
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.FuncDecl:
				switch {
				case decl.Recv == nil:
					stutter(decl.Name)
				case decl.Name.IsExported():
					p.members[decl.Name.Name] = fmt.Sprintf("a method (%s)", at(decl.Name))
				}
			case *ast.GenDecl:
				for _, spec := range decl.Specs {
					switch spec := spec.(type) {
					case *ast.TypeSpec:
						stutter(spec.Name)
						st, ok := spec.Type.(*ast.StructType)
						if !ok || !spec.Name.IsExported() {
							continue
						}
						for _, field := range st.Fields.List {
							for _, id := range field.Names {
								if id.IsExported() {
									p.members[id.Name] = fmt.Sprintf("the field %s.%s (%s)", spec.Name.Name, id.Name, at(id))
								}
							}
						}
					case *ast.ValueSpec:
						for _, id := range spec.Names {
							stutter(id)
							if id.IsExported() {
								p.values[id.Name] = at(id)
							}
						}
					}
				}
			}
		}
	})
	require.Greater(t, files, 100, "non-test Go files parsed")
	assert.Empty(t, stutters, "names that repeat their package (docs/architecture.md \"Names\")")

	var shared []string
	for dir, p := range pkgs {
		for name, at := range p.values {
			if member, ok := p.members[name]; ok {
				shared = append(shared, fmt.Sprintf("%s: %s %s is also %s", at, dir, name, member))
			}
		}
	}
	slices.Sort(shared)
	require.Empty(t, shared, "constants or variables named as a field or method (docs/architecture.md \"Names\")")
}

// TestAPINames keeps docs/api.md true: for each package of every module but commands,
// packages without exported names and those under internal/, its section lists each
// exported top-level name the package declares (types, functions, constants, variables)
// and nothing else, and its heading gives their count. It fails on a package without a
// section, a section without a package, a name missing or invented, a name listed twice,
// and a wrong count.
func TestAPINames(t *testing.T) {
	declared := map[string]map[string]bool{} // package directory → its exported names
	parseSources(t, func(path string, _ *token.FileSet, f *ast.File) {
		dir := filepath.ToSlash(filepath.Dir(path))
		if f.Name.Name == "main" || strings.HasPrefix(dir+"/", "internal/") || strings.Contains(dir+"/", "/internal/") {
			return
		}
		add := func(id *ast.Ident) {
			if !id.IsExported() {
				return
			}
			if declared[dir] == nil {
				declared[dir] = map[string]bool{}
			}
			declared[dir][id.Name] = true
		}
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.FuncDecl:
				if decl.Recv == nil {
					add(decl.Name)
				}
			case *ast.GenDecl:
				for _, spec := range decl.Specs {
					switch spec := spec.(type) {
					case *ast.TypeSpec:
						add(spec.Name)
					case *ast.ValueSpec:
						for _, id := range spec.Names {
							add(id)
						}
					}
				}
			}
		}
	})

	text, err := os.ReadFile("docs/api.md")
	require.NoError(t, err)
	heading := regexp.MustCompile("^### `([^`]+)` \\((\\d+) names?\\)$")
	listed := map[string]map[string]bool{}
	var problems []string
	var section string
	counts := map[string]int{}
	for i, line := range strings.Split(string(text), "\n") {
		if m := heading.FindStringSubmatch(line); m != nil {
			section = m[1]
			if listed[section] != nil {
				problems = append(problems, fmt.Sprintf("docs/api.md:%d: a second section of %s", i+1, section))
			}
			listed[section] = map[string]bool{}
			var n int
			_, err := fmt.Sscan(m[2], &n)
			require.NoError(t, err)
			counts[section] = n
			continue
		}
		if strings.HasPrefix(line, "#") {
			section = ""
			continue
		}
		head, _, ok := strings.Cut(line, ": ")
		if section == "" || !ok || !strings.HasPrefix(head, "- ") {
			continue
		}
		for _, name := range strings.Split(strings.TrimPrefix(head, "- "), ", ") {
			name, ok := strings.CutPrefix(name, "`")
			name, ok2 := strings.CutSuffix(name, "`")
			switch {
			case !ok || !ok2 || !token.IsIdentifier(name):
				problems = append(problems, fmt.Sprintf("docs/api.md:%d: %q is not a name in backquotes", i+1, name))
			case listed[section][name]:
				problems = append(problems, fmt.Sprintf("docs/api.md:%d: %s.%s listed twice", i+1, section, name))
			default:
				listed[section][name] = true
			}
		}
	}
	for section, names := range listed {
		if len(names) != counts[section] {
			problems = append(problems, fmt.Sprintf("docs/api.md: %s lists %d names, its heading says %d", section, len(names), counts[section]))
		}
	}
	slices.Sort(problems)
	require.Empty(t, problems)
	require.Empty(t, cmp.Diff(declared, listed), "exported names (-declared +docs/api.md)")
}

// TestDocLinks keeps a rule of docs/architecture.md "Names" through renames: a doc link
// of a package's comments to a name of its own ([Monitor.Recover], [WithWorkers]) names
// something the package declares, so that a name renamed or removed leaves no link
// behind. It parses every non-test Go file of every module and fails on each link to a
// top-level name, or to a field or method of a type (through the types it embeds), that
// the package does not declare. Links to other packages ([phase.Set]) are left to their
// own package.
func TestDocLinks(t *testing.T) {
	t.Run("BENCHMARKS.md sections", testBenchmarkCitations)
	link := regexp.MustCompile(`\[([A-Z][A-Za-z0-9_]*)(?:\.([A-Z][A-Za-z0-9_]*))?\]`)
	type pkgDecls struct {
		top      map[string]bool     // top-level names
		members  map[string]bool     // "Type.Name" of each field and method
		embedded map[string][]string // the types each struct or interface embeds
		links    []string            // "position: [Name]" or "position: [Type.Name]"
	}
	pkgs := map[string]*pkgDecls{} // by directory
	parseSources(t, func(path string, fset *token.FileSet, f *ast.File) {
		dir := filepath.Dir(path)
		p := pkgs[dir]
		if p == nil {
			p = &pkgDecls{top: map[string]bool{}, members: map[string]bool{}, embedded: map[string][]string{}}
			pkgs[dir] = p
		}
		fields := func(typ string, list *ast.FieldList) {
			for _, field := range list.List {
				for _, id := range field.Names {
					p.members[typ+"."+id.Name] = true
				}
				if len(field.Names) == 0 {
					if id := baseType(field.Type); id != "" {
						p.embedded[typ] = append(p.embedded[typ], id)
					}
				}
			}
		}
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.FuncDecl:
				if decl.Recv == nil {
					p.top[decl.Name.Name] = true
				} else {
					p.members[baseType(decl.Recv.List[0].Type)+"."+decl.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, spec := range decl.Specs {
					switch spec := spec.(type) {
					case *ast.TypeSpec:
						p.top[spec.Name.Name] = true
						switch typ := spec.Type.(type) {
						case *ast.StructType:
							fields(spec.Name.Name, typ.Fields)
						case *ast.InterfaceType:
							fields(spec.Name.Name, typ.Methods)
						}
					case *ast.ValueSpec:
						for _, id := range spec.Names {
							p.top[id.Name] = true
						}
					}
				}
			}
		}
		for _, c := range f.Comments {
			for _, m := range link.FindAllStringSubmatch(c.Text(), -1) {
				name := m[1]
				if m[2] != "" {
					name += "." + m[2]
				}
				p.links = append(p.links, fmt.Sprintf("%s: [%s]", fset.Position(c.Pos()), name))
			}
		}
	})
	var dangling []string
	for _, p := range pkgs {
		var declares func(typ, name string) bool
		declares = func(typ, name string) bool {
			if p.members[typ+"."+name] {
				return true
			}
			return slices.ContainsFunc(p.embedded[typ], func(e string) bool { return declares(e, name) })
		}
		for _, l := range p.links {
			name := l[strings.LastIndex(l, "[")+1 : len(l)-1]
			typ, member, ok := strings.Cut(name, ".")
			if ok && !declares(typ, member) || !ok && !p.top[name] {
				dangling = append(dangling, l)
			}
		}
	}
	slices.Sort(dangling)
	require.Empty(t, dangling, "doc links to names their package does not declare")
}

// testBenchmarkCitations keeps the citations of docs/BENCHMARKS.md's sections true
// through its rewrites: a comment of a Go file (tests included) or a Markdown file of
// the repository that names the page (or links to it) and then, within a few words and
// no end of sentence, a title in double quotes, as docs/BENCHMARKS.md, "A pass that
// reads once", must cite a heading of the page word for word.
func testBenchmarkCitations(t *testing.T) {
	page, err := os.ReadFile("docs/BENCHMARKS.md")
	require.NoError(t, err)
	headings := map[string]bool{}
	fenced := false
	for _, line := range strings.Split(string(page), "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if title, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " "); ok && !fenced && strings.HasPrefix(line, "#") {
			headings[strings.Join(strings.Fields(title), " ")] = true
		}
	}
	cited, dangling := 0, []string{}
	walkRepository(t, func(path string) error {
		if !strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, ".md") {
			return nil
		}
		text, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		texts := []string{string(text)}
		if strings.HasSuffix(path, ".go") {
			f, err := parser.ParseFile(token.NewFileSet(), path, text, parser.ParseComments|parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			texts = texts[:0]
			for _, c := range f.Comments {
				texts = append(texts, c.Text())
			}
		}
		for _, text := range texts {
			for _, title := range benchmarkCitations(text) {
				cited++
				if !headings[title] {
					dangling = append(dangling, fmt.Sprintf("%s: %q", path, title))
				}
			}
		}
		return nil
	})
	require.NotZero(t, cited, "no citation of a section of docs/BENCHMARKS.md found")
	require.Empty(t, dangling, "citations of sections that docs/BENCHMARKS.md does not have (its headings: %v)", slices.Sorted(maps.Keys(headings)))
}

// benchmarkCitation matches a citation of a section of BENCHMARKS.md in text whose lines
// are joined: the file's name (or a Markdown link to it), at most 30 characters that end
// no sentence or parenthesis, and the section's title in double quotes. A list of titles
// may follow, each after a comma, "and" or "or" (nextCitation).
var (
	benchmarkCitation = regexp.MustCompile(`BENCHMARKS\.md(?:\]\([^)]*\))?[^".;)]{0,30}"([^"]+)"`)
	nextCitation      = regexp.MustCompile(`^(?:,? (?:and|or) |, )"([^"]+)"`)
)

// benchmarkCitations returns the titles that text cites as sections of BENCHMARKS.md,
// once its lines are joined by spaces without their indentation and comment markers, so
// that a title may break across the lines of a comment or a paragraph.
func benchmarkCitations(text string) []string {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "//"))
	}
	joined := strings.Join(lines, " ")
	var titles []string
	for _, m := range benchmarkCitation.FindAllStringSubmatchIndex(joined, -1) {
		for {
			titles = append(titles, strings.Join(strings.Fields(joined[m[2]:m[3]]), " "))
			end := m[1]
			if m = nextCitation.FindStringSubmatchIndex(joined[end:]); m == nil {
				break
			}
			for i := range m {
				m[i] += end
			}
		}
	}
	return titles
}

// TestDocLinksBenchmarkCitationForms holds which wordings benchmarkCitations reads as
// citations of sections of BENCHMARKS.md, and which it leaves alone.
func TestDocLinksBenchmarkCitationForms(t *testing.T) {
	for _, tc := range []struct {
		text string
		want []string
	}{
		{"// reads (docs/BENCHMARKS.md, \"What a status\n// reads\"). The time", []string{"What a status reads"}},
		{"takes ([BENCHMARKS.md](BENCHMARKS.md), \"Crash of the\n  leader\"):", []string{"Crash of the leader"}},
		{"[BENCHMARKS.md](BENCHMARKS.md): \"A\" for memstore, \"B\" for boltstore", []string{"A"}},
		{"in [BENCHMARKS.md](BENCHMARKS.md): \"A\", \"B\",\n\"C\" and \"D\". And \"E\"", []string{"A", "B", "C", "D"}},
		{"// figures are in docs/BENCHMARKS.md, kubestore, \"ListRuns reads every run's object\".", []string{"ListRuns reads every run's object"}},
		{"// docs/BENCHMARKS.md (\"Writes of one run\") has", []string{"Writes of one run"}},
		{"// (see docs/BENCHMARKS.md); a done ctx stops it, \"not a title\"", nil},
		{"// See docs/BENCHMARKS.md. \"Not a title\"", nil},
		{"// measures, for docs/BENCHMARKS.md, and much later in the sentence \"a quote\"", nil},
	} {
		require.Equal(t, tc.want, benchmarkCitations(tc.text), "%q", tc.text)
	}
}

// baseType returns the name of the type that a receiver or an embedded field denotes
// (T for *T, T[K] or T), or "" for a type of another package.
func baseType(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return baseType(e.X)
	case *ast.IndexExpr:
		return baseType(e.X)
	case *ast.IndexListExpr:
		return baseType(e.X)
	case *ast.Ident:
		return e.Name
	}
	return ""
}

// repeatsPackage reports whether name begins with the package name pkg, in any case,
// followed by an upper-case letter: PhaseSet in package phase, not Phases or Phase.
func repeatsPackage(pkg, name string) bool {
	if len(name) <= len(pkg) || !strings.EqualFold(name[:len(pkg)], pkg) {
		return false
	}
	r, _ := utf8.DecodeRuneInString(name[len(pkg):])
	return unicode.IsUpper(r)
}

func TestRepeatsPackage(t *testing.T) {
	for _, tc := range []struct {
		pkg, name string
		want      bool
	}{
		{"phase", "PhaseSet", true},
		{"phase", "PhaseSetOf", true},
		{"monitor", "MonitorOption", true},
		{"phase", "Phase", false},  // the package's own type: nothing follows
		{"phase", "Phases", false}, // a plural, not a second word
		{"phase", "Set", false},
		{"kv", "Kvstore", false},
	} {
		require.Equal(t, tc.want, repeatsPackage(tc.pkg, tc.name), "repeatsPackage(%q, %q)", tc.pkg, tc.name)
	}
}
