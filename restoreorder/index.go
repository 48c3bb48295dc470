package restoreorder

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// The layout of a Velero backup, format 1.0 and 1.1:
//
//	resources/<resource>/cluster/<name>.json
//	resources/<resource>/namespaces/<namespace>/<name>.json
//	resources/<resource>/<version>-preferredversion/{cluster,namespaces}/...   (1.1)
//	resources/<resource>/<version>/{cluster,namespaces}/...                    (1.1, other versions)
const (
	resourcesDir      = "resources"
	clusterDir        = "cluster"
	namespacesDir     = "namespaces"
	preferredSuffix   = "-preferredversion"
	itemFileExtension = ".json"
)

// index is the catalogue of a backup's items, built from the paths of its files.
type index struct {
	resources  []string
	byResource map[string]*resourceIndex
}

type resourceIndex struct {
	namespaces []string           // sorted; ClusterScope first when present
	items      map[string][]Entry // namespace → entries sorted by name
}

func (x *index) Resources(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return x.resources, nil
}

func (x *index) Namespaces(ctx context.Context, resource string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if r := x.byResource[resource]; r != nil {
		return r.namespaces, nil
	}
	return nil, nil
}

func (x *index) Items(ctx context.Context, resource, namespace string) ([]Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if r := x.byResource[resource]; r != nil {
		return r.items[namespace], nil
	}
	return nil, nil
}

// builder gathers item paths into an index.
type builder struct {
	// resources maps a resource to its version directories ("" for the classic one),
	// each to its namespaces, each to its entries.
	resources map[string]map[string]map[string][]Entry
}

func newBuilder() *builder {
	return &builder{resources: make(map[string]map[string]map[string][]Entry)}
}

// malformed returns an error wrapping ErrMalformed about path.
func malformed(path, format string, args ...any) error {
	return fmt.Errorf("restoreorder: %s: %w: %s", path, ErrMalformed, fmt.Sprintf(format, args...))
}

// add records the regular file at p, a valid io/fs path. It reports whether p is an
// item; files outside resources/ are not, and are ignored. A file under resources/ that
// does not fit the layout is an error.
func (b *builder) add(p string) (bool, error) {
	parts := strings.Split(p, "/")
	if parts[0] != resourcesDir {
		return false, nil
	}
	if len(parts) < 4 {
		return false, malformed(p, "a file where the layout wants a directory")
	}
	resource, rest := parts[1], parts[2:]
	version := ""
	if rest[0] != clusterDir && rest[0] != namespacesDir {
		version, rest = rest[0], rest[1:]
	}
	var namespace, file string
	switch {
	case rest[0] == clusterDir && len(rest) == 2:
		namespace, file = ClusterScope, rest[1]
	case rest[0] == namespacesDir && len(rest) == 3:
		namespace, file = rest[1], rest[2]
	default:
		return false, malformed(p, "not resources/<resource>/[<version>/]{cluster/<name>.json,namespaces/<namespace>/<name>.json}")
	}
	name, ok := strings.CutSuffix(file, itemFileExtension)
	if !ok || !validItemName(name) {
		return false, malformed(p, `an item file is named <name>.json, where <name> is an object's name: not empty, "." or ".."`)
	}
	versions := b.resources[resource]
	if versions == nil {
		versions = make(map[string]map[string][]Entry)
		b.resources[resource] = versions
	}
	namespaces := versions[version]
	if namespaces == nil {
		namespaces = make(map[string][]Entry)
		versions[version] = namespaces
	}
	namespaces[namespace] = append(namespaces[namespace], Entry{Name: name, Path: p})
	return true, nil
}

// validItemName reports whether name, the name of an item file without ".json", can
// be an object's name. Kubernetes refuses the names "", "." and ".." for every resource,
// so Velero never writes the files ".json", "..json" and "...json"; a name taken as a
// path element by whoever restores the item must not be one of them. A name is one
// element of a slash-separated path, so it holds no "/" (a file deeper in the layout is
// refused as such). A backslash is kept: it is an ordinary character in a tar or io/fs
// path, and in the names that Kubernetes checks as path segments.
func validItemName(name string) bool {
	return name != "" && name != "." && name != ".."
}

// build chooses one version directory per resource, sorts everything and returns the
// index, with keep reporting, for each item path, whether the index uses it.
//
// The classic directory (no version) wins when it holds items: every Velero backup has
// it, Velero restores it unless asked for other API versions, and it holds the preferred
// version. Otherwise the one <version>-preferredversion directory is used. Items of
// other versions are alternative encodings of the same objects and are never used; a
// resource that has nothing else is malformed, as are two preferred versions.
func (b *builder) build() (*index, func(path string) bool, error) {
	x := &index{byResource: make(map[string]*resourceIndex, len(b.resources))}
	chosen := make(map[string]string, len(b.resources)) // resource → version directory
	for resource, versions := range b.resources {
		version, err := chooseVersion(resource, versions)
		if err != nil {
			return nil, nil, err
		}
		chosen[resource] = version
		r := &resourceIndex{items: versions[version]}
		for ns, entries := range r.items {
			r.namespaces = append(r.namespaces, ns)
			slices.SortFunc(entries, func(a, b Entry) int { return cmp.Compare(a.Name, b.Name) })
			for i := 1; i < len(entries); i++ {
				if entries[i].Name == entries[i-1].Name {
					return nil, nil, malformed(entries[i].Path, "the same item twice")
				}
			}
		}
		sort.Strings(r.namespaces)
		x.byResource[resource] = r
		x.resources = append(x.resources, resource)
	}
	sort.Strings(x.resources)
	keep := func(path string) bool {
		parts := strings.SplitN(path, "/", 4)
		if len(parts) < 4 || parts[0] != resourcesDir {
			return false
		}
		version := parts[2]
		if version == clusterDir || version == namespacesDir {
			version = ""
		}
		v, ok := chosen[parts[1]]
		return ok && v == version
	}
	return x, keep, nil
}

func chooseVersion(resource string, versions map[string]map[string][]Entry) (string, error) {
	if _, ok := versions[""]; ok {
		return "", nil
	}
	var preferred, others []string
	for v := range versions {
		if strings.HasSuffix(v, preferredSuffix) {
			preferred = append(preferred, v)
		} else {
			others = append(others, v)
		}
	}
	sort.Strings(preferred)
	sort.Strings(others)
	dir := resourcesDir + "/" + resource
	switch {
	case len(preferred) == 1:
		return preferred[0], nil
	case len(preferred) > 1:
		return "", malformed(dir, "more than one preferred version: %s", strings.Join(preferred, ", "))
	}
	return "", malformed(dir, "items only in non-preferred version directories: %s", strings.Join(others, ", "))
}
