package restoreorder

import (
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/labels"
)

// Filter chooses the items of a backup to restore, with the names and meaning of
// Velero's RestoreSpec. The zero Filter selects everything.
//
//   - Resources: an item's resource must be included (IncludedResources empty, or
//     holding "*" or the resource) and not excluded (ExcludedResources holding neither
//     "*" nor the resource). Names are resolved to the backup's group-resources as
//     priorities are (see [Collect]), so "deployments" selects "deployments.apps";
//     a name that resolves to nothing selects nothing. "*" in ExcludedResources
//     excludes everything; Velero's restorer ignores it there, but its restore
//     controller refuses such a restore first.
//   - Namespaces: an item in a namespace must pass IncludedNamespaces and
//     ExcludedNamespaces the same way. "*" means every namespace; other names match
//     exactly (Velero also reads them as glob patterns, such as "ns-*").
//   - Cluster-scoped items: when IncludeClusterResources is nil, they are restored only
//     if every namespace is (IncludedNamespaces empty or holding "*", and
//     ExcludedNamespaces empty); true restores them always; false never. Velero counts
//     a list holding "*" and other names as not every namespace; here "*" anywhere
//     means every namespace, as it does for the namespace rule itself.
//   - Namespace objects (the "namespaces" resource) are cluster-scoped items, as in
//     Velero: a restore of some namespaces (IncludeClusterResources nil or false)
//     collects none of them, since Velero creates a namespace when it restores the
//     first item in it. With NamespaceObjectsFollowNamespaces, they follow the
//     namespace rules instead, by their own name, so that a restore of some namespaces
//     brings exactly those namespace objects; IncludeClusterResources then does not
//     apply to them.
//   - Labels: an item must match LabelSelector (nil: no condition) and, when
//     OrLabelSelectors is not empty, at least one of them (a nil one matches all).
//     Velero refuses a restore that sets both; here both apply.
//   - NamespaceMapping moves an item from its original namespace to the mapped one.
//     A namespace object is a cluster-scoped item (OriginalNamespace and
//     TargetNamespace ClusterScope) whose restorer renames it by the mapping, as Velero
//     does; with NamespaceObjectsFollowNamespaces its Item carries its own name and
//     the mapped one instead. The filters above look at the original namespace.
//     A mapping from or to "" is an error ([ErrInvalidFilter]).
//
// A Filter is read, never changed, by [Collect].
type Filter struct {
	IncludedResources, ExcludedResources   []string
	IncludedNamespaces, ExcludedNamespaces []string
	LabelSelector                          labels.Selector   // nil: no label filter
	OrLabelSelectors                       []labels.Selector // an item matching any one is kept
	NamespaceMapping                       map[string]string // original → target
	IncludeClusterResources                *bool
	// NamespaceObjectsFollowNamespaces makes the namespace rules, not the
	// cluster-resource rules, select the objects of the "namespaces" resource, by
	// their own name, and gives each Item its name as OriginalNamespace and its mapped
	// name as TargetNamespace. The default, false, is Velero's behaviour.
	NamespaceObjectsFollowNamespaces bool
}

// includesExcludes applies an include list and an exclude list, with "*" for all.
type includesExcludes struct {
	includes, excludes map[string]bool
}

func newIncludesExcludes(includes, excludes []string, resolve func(string) string) includesExcludes {
	set := func(names []string) map[string]bool {
		if len(names) == 0 {
			return nil
		}
		m := make(map[string]bool, len(names))
		for _, n := range names {
			if n != "*" && resolve != nil {
				n = resolve(n)
			}
			m[n] = true
		}
		return m
	}
	return includesExcludes{includes: set(includes), excludes: set(excludes)}
}

func (ie includesExcludes) shouldInclude(s string) bool {
	if ie.excludes["*"] || ie.excludes[s] {
		return false
	}
	return len(ie.includes) == 0 || ie.includes["*"] || ie.includes[s]
}

// includeEverything reports whether every name passes.
func (ie includesExcludes) includeEverything() bool {
	return len(ie.excludes) == 0 && (len(ie.includes) == 0 || ie.includes["*"])
}

// compiledFilter is a Filter ready to apply to one backup.
type compiledFilter struct {
	resources, namespaces includesExcludes
	mapping               map[string]string
	cluster               *bool
	nsObjects             bool              // NamespaceObjectsFollowNamespaces
	selector              labels.Selector   // nil: none
	ors                   []labels.Selector // nil: none
}

func compileFilter(f Filter, resolve func(string) string) (*compiledFilter, error) {
	keys := make([]string, 0, len(f.NamespaceMapping))
	for k := range f.NamespaceMapping {
		keys = append(keys, k)
	}
	sort.Strings(keys) // report the same offending entry every time
	for _, from := range keys {
		if to := f.NamespaceMapping[from]; from == "" || to == "" {
			return nil, fmt.Errorf("restoreorder: namespace mapping %q → %q: %w: a namespace is never empty", from, to, ErrInvalidFilter)
		}
	}
	c := &compiledFilter{
		resources:  newIncludesExcludes(f.IncludedResources, f.ExcludedResources, resolve),
		namespaces: newIncludesExcludes(f.IncludedNamespaces, f.ExcludedNamespaces, nil),
		mapping:    f.NamespaceMapping,
		cluster:    f.IncludeClusterResources,
		nsObjects:  f.NamespaceObjectsFollowNamespaces,
	}
	if f.LabelSelector != nil && !f.LabelSelector.Empty() {
		c.selector = f.LabelSelector
	}
	for _, s := range f.OrLabelSelectors {
		if s == nil || s.Empty() {
			c.ors = nil // one alternative matches everything: the OR is always true
			break
		}
		c.ors = append(c.ors, s)
	}
	return c, nil
}

// needsLabels reports whether items must be read to apply the filter.
func (c *compiledFilter) needsLabels() bool { return c.selector != nil || len(c.ors) > 0 }

// matchLabels applies the label conditions.
func (c *compiledFilter) matchLabels(m map[string]string) bool {
	set := labels.Set(m)
	if c.selector != nil && !c.selector.Matches(set) {
		return false
	}
	if len(c.ors) == 0 {
		return true
	}
	for _, s := range c.ors {
		if s.Matches(set) {
			return true
		}
	}
	return false
}

// target returns where items of the original namespace go.
func (c *compiledFilter) target(namespace string) string {
	if t, ok := c.mapping[namespace]; ok {
		return t
	}
	return namespace
}

// includeCluster reports whether cluster-scoped items are restored.
func (c *compiledFilter) includeCluster() bool {
	if c.cluster != nil {
		return *c.cluster
	}
	return c.namespaces.includeEverything()
}
