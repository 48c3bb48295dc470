package restoreorder

import (
	"context"
	"fmt"
	"iter"
	"slices"
)

// namespacesResource is the group-resource of namespace objects.
const namespacesResource = "namespaces"

// An Item is one item of a [Collection]: what pass two restores. A namespace object
// (Resource "namespaces") is a cluster-scoped item, as in Velero, unless the filter's
// NamespaceObjectsFollowNamespaces is set: then its OriginalNamespace is its own name
// and its TargetNamespace the name it is restored under, after the mapping.
type Item struct {
	Resource          string // the group-resource, as the backup names it
	OriginalNamespace string // the namespace in the backup; ClusterScope ("") for cluster-scoped items
	TargetNamespace   string // where the item goes: OriginalNamespace after the filter's mapping
	Name              string // the item's name in the backup
	Path              string // where the Source finds the item: pass it to Source.Open or ReadItem
}

// A ResourceCount is the number of items of one resource in a [Collection].
type ResourceCount struct {
	Resource string
	Items    int
}

// A Collection is the result of pass one: the items to restore, in the order to restore
// them, with their totals. It is immutable, so safe for concurrent use.
type Collection struct {
	groups     []group
	counts     []ResourceCount
	total      int
	unresolved []string
}

// group is a run of items that share resource and namespaces. Its entries are the
// source's own slice when nothing in it was filtered out.
type group struct {
	resource, original, target string
	entries                    []Entry
}

// Total returns the number of items in the collection; a nil Collection has none.
func (c *Collection) Total() int {
	if c == nil {
		return 0
	}
	return c.total
}

// Items returns the items in pass-two order (see [Collect]). Walking it allocates
// nothing per item; it may be walked any number of times, concurrently.
//
//	for it := range c.Items() {
//		data, err := restoreorder.ReadItem(ctx, src, it.Path)
//		...
//	}
func (c *Collection) Items() iter.Seq[Item] {
	return func(yield func(Item) bool) {
		if c == nil {
			return
		}
		for i := range c.groups {
			g := &c.groups[i]
			for _, e := range g.entries {
				if !yield(Item{Resource: g.resource, OriginalNamespace: g.original, TargetNamespace: g.target, Name: e.Name, Path: e.Path}) {
					return
				}
			}
		}
	}
}

// Resources returns the number of items of each resource that has any, in pass-two
// order. The slice is the caller's.
func (c *Collection) Resources() []ResourceCount {
	if c == nil {
		return nil
	}
	return slices.Clone(c.counts)
}

// ResourceTotal returns the number of items of resource in the collection.
func (c *Collection) ResourceTotal(resource string) int {
	if c == nil {
		return 0
	}
	for _, rc := range c.counts {
		if rc.Resource == resource {
			return rc.Items
		}
	}
	return 0
}

// Unresolved returns the priority names that matched no resource of the backup, in the
// order of the priorities, for logging: Velero logs and skips such names too. The slice
// is the caller's.
func (c *Collection) Unresolved() []string {
	if c == nil {
		return nil
	}
	return slices.Clone(c.unresolved)
}

// Collect is pass one of a restore: it walks src and returns the items f selects, in the
// order to restore them, so that the total is known before anything is restored.
//
// Order. Resources come in three parts: the High priorities in their order, then the
// backup's other resources sorted by name, then the Low priorities in their order. A
// priority name is resolved to one of the backup's group-resources by [ResolveName] or
// the [WithResolver] option; a name that resolves to nothing is skipped (see
// [Collection.Unresolved]). A resource named twice, in one list or both, or both named
// and present, is collected once, at its first place. Within a resource, cluster-scoped
// items come first, then namespaces in byte order of their original name; within a
// namespace, items in byte order of their name. The same source, priorities and filter
// always give the same order.
//
// Filtering follows [Filter]. Label conditions need each item's labels; Collect reads
// them only when the filter has a non-empty selector, and only for items that passed
// every other rule. It asks a [LabelSource] when src is one, and otherwise reads the
// item through one reused buffer, decoding nothing but metadata.labels. Without label
// conditions no item is opened, and the collection shares the source's lists.
//
// Collect fails with an error wrapping [ErrInvalidFilter] for a bad filter,
// [ErrSourceContract] if src returns unsorted or repeated names, [ErrInvalidItem] (or the
// source's error) if an item's labels cannot be read, unless [WithItemErrors] says
// otherwise, and the source's own errors wrapped. It checks ctx between namespaces and
// every few hundred items read, and returns ctx.Err() once ctx is done.
func Collect(ctx context.Context, src Source, p Priorities, f Filter, opts ...Option) (*Collection, error) {
	cfg := config{resolve: ResolveName}
	for _, o := range opts {
		o.apply(&cfg)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	resources, err := src.Resources(ctx)
	if err != nil {
		return nil, fmt.Errorf("restoreorder: list resources: %w", err)
	}
	if i := unsorted(resources, identity); i > 0 {
		return nil, contractError("resources", resources[i-1], resources[i])
	}
	resolve := func(name string) (string, bool) {
		r, ok := cfg.resolve(name, resources)
		if !ok {
			return "", false
		}
		if _, held := slices.BinarySearch(resources, r); !held {
			return "", false
		}
		return r, true
	}
	cf, err := compileFilter(f, func(name string) string {
		if r, ok := resolve(name); ok {
			return r
		}
		return name
	})
	if err != nil {
		return nil, err
	}

	c := &Collection{}
	order := orderResources(resources, p, resolve, &c.unresolved)
	col := collector{ctx: ctx, src: src, f: cf, cfg: &cfg, labels: labelReader{src: src}}
	for _, resource := range order {
		if !cf.resources.shouldInclude(resource) {
			continue
		}
		start := len(c.groups)
		if c.groups, err = col.resource(resource, c.groups); err != nil {
			return nil, err
		}
		n := 0
		for _, g := range c.groups[start:] {
			n += len(g.entries)
		}
		if n > 0 {
			c.counts = append(c.counts, ResourceCount{Resource: resource, Items: n})
			c.total += n
		}
	}
	return c, nil
}

// orderResources returns the backup's resources in restore order, each once: resolved
// High priorities, the others sorted, resolved Low priorities. Names that resolve to
// nothing are appended to unresolved.
func orderResources(resources []string, p Priorities, resolve func(string) (string, bool), unresolved *[]string) []string {
	order := make([]string, 0, len(resources))
	seen := make(map[string]bool, len(resources))
	resolveAll := func(names []string) []string {
		var out []string
		for _, n := range names {
			if r, ok := resolve(n); ok {
				out = append(out, r)
				seen[r] = true
			} else {
				*unresolved = append(*unresolved, n)
			}
		}
		return out
	}
	high, low := resolveAll(p.High), resolveAll(p.Low)
	added := make(map[string]bool, len(resources))
	add := func(r string) {
		if !added[r] {
			added[r] = true
			order = append(order, r)
		}
	}
	for _, r := range high {
		add(r)
	}
	for _, r := range resources {
		if !seen[r] {
			add(r)
		}
	}
	for _, r := range low {
		add(r)
	}
	return order
}

// collector gathers the groups of one resource at a time.
type collector struct {
	ctx    context.Context
	src    Source
	f      *compiledFilter
	cfg    *config
	labels labelReader
	reads  int // items read for labels, to pace ctx checks
}

func (c *collector) resource(resource string, groups []group) ([]group, error) {
	namespaces, err := c.src.Namespaces(c.ctx, resource)
	if err != nil {
		return groups, fmt.Errorf("restoreorder: list namespaces of %s: %w", resource, err)
	}
	if i := unsorted(namespaces, identity); i > 0 {
		return groups, contractError("namespaces of "+resource, namespaces[i-1], namespaces[i])
	}
	for _, ns := range namespaces {
		if err := c.ctx.Err(); err != nil {
			return groups, err
		}
		objects := c.f.nsObjects && resource == namespacesResource && ns == ClusterScope
		switch {
		case objects:
		case ns != ClusterScope && !c.f.namespaces.shouldInclude(ns):
			continue
		case ns == ClusterScope && !c.f.includeCluster():
			continue
		}
		entries, err := c.src.Items(c.ctx, resource, ns)
		if err != nil {
			return groups, fmt.Errorf("restoreorder: list items of %s in %q: %w", resource, ns, err)
		}
		if i := unsorted(entries, entryName); i > 0 {
			return groups, contractError(fmt.Sprintf("items of %s in %q", resource, ns), entries[i-1].Name, entries[i].Name)
		}
		if objects {
			groups, err = c.namespaceObjects(entries, groups)
		} else {
			groups, err = c.items(group{resource: resource, original: ns, target: c.f.target(ns), entries: entries}, groups)
		}
		if err != nil {
			return groups, err
		}
	}
	return groups, nil
}

// items appends g, less the items the label conditions leave out, to groups.
func (c *collector) items(g group, groups []group) ([]group, error) {
	if len(g.entries) == 0 {
		return groups, nil
	}
	if !c.f.needsLabels() {
		return append(groups, g), nil
	}
	kept := g.entries[:0:0]
	for i, e := range g.entries {
		ok, err := c.matches(Item{Resource: g.resource, OriginalNamespace: g.original, TargetNamespace: g.target, Name: e.Name, Path: e.Path})
		if err != nil {
			return groups, err
		}
		switch {
		case ok && len(kept) == i:
			// Everything so far is kept: keep sharing the source's slice.
			kept = g.entries[:i+1]
		case ok:
			kept = append(kept, e)
		case len(kept) == i:
			kept = slices.Clone(kept) // stop sharing before leaving one out
		}
	}
	if len(kept) == 0 {
		return groups, nil
	}
	g.entries = kept
	return append(groups, g), nil
}

// namespaceObjects appends one group per namespace object that the namespace rules and
// label conditions keep, restored under its mapped name.
func (c *collector) namespaceObjects(entries []Entry, groups []group) ([]group, error) {
	for i := range entries {
		e := &entries[i]
		if !c.f.namespaces.shouldInclude(e.Name) {
			continue
		}
		g := group{resource: namespacesResource, original: e.Name, target: c.f.target(e.Name), entries: entries[i : i+1 : i+1]}
		var err error
		if groups, err = c.items(g, groups); err != nil {
			return groups, err
		}
	}
	return groups, nil
}

// matches applies the label conditions to it, reading its labels.
func (c *collector) matches(it Item) (bool, error) {
	c.reads++
	if c.reads%256 == 0 {
		if err := c.ctx.Err(); err != nil {
			return false, err
		}
	}
	m, err := c.labels.labels(c.ctx, it.Path)
	if err != nil {
		if ctxErr := c.ctx.Err(); ctxErr != nil {
			return false, ctxErr
		}
		if c.cfg.itemError != nil {
			if err := c.cfg.itemError(it, err); err != nil {
				return false, err
			}
			return false, nil
		}
		return false, err
	}
	return c.f.matchLabels(m), nil
}

// unsorted returns the first i at which the keys of list fail to increase strictly, or 0
// when they increase throughout.
func unsorted[T any](list []T, key func(T) string) int {
	for i := 1; i < len(list); i++ {
		if key(list[i-1]) >= key(list[i]) {
			return i
		}
	}
	return 0
}

// contractError describes keys a and b of what, found in the wrong order.
func contractError(what, a, b string) error {
	return fmt.Errorf("restoreorder: %s: %w: %q before %q", what, ErrSourceContract, a, b)
}

func identity(s string) string { return s }

func entryName(e Entry) string { return e.Name }
