package adapters

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// A ResourceSelector says which items an item action applies to, with the fields of
// Velero's ResourceSelector. The zero ResourceSelector selects every item. A
// ResourceSelector is plain data; [NewMatcher] checks it and makes it ready to match.
//
// The rules, Velero's unless said otherwise:
//
//   - Resources: an item's resource must be included (IncludedResources empty, or
//     holding "*" or the resource) and not excluded (ExcludedResources holding the
//     resource). A name is "resource" or "resource.group" ("deployments.apps",
//     "storageclasses.storage.k8s.io"), compared without regard to case. A name with a
//     group matches that group only; a bare name matches the resource of that name in
//     every group. Velero resolves names through discovery, which maps a bare name to
//     one preferred group and also knows short and singular names ("svc", "pvc"); there
//     is no discovery here, so name the group where two groups serve a resource of the
//     same name, and give plural names.
//   - Namespaces: an item in a namespace must be in an included namespace
//     (IncludedNamespaces empty, or holding "*" or the namespace) and not in an excluded
//     one. Names match exactly.
//   - Cluster-scoped items (no namespace, Namespace objects included) are selected only
//     when the selector includes every namespace: IncludedNamespaces empty or exactly
//     "*", and ExcludedNamespaces empty. As in Velero, a list holding "*" and other
//     names selects every namespaced item but no cluster-scoped one.
//   - Labels: an item must match LabelSelector, in the syntax of [labels.Parse]; empty
//     means no condition.
//   - "*" in an exclude list excludes everything. Velero forbids it in a backup's or
//     restore's own exclude lists and, in a plugin's, compares it as a literal name that
//     matches nothing (though it still keeps cluster-scoped items out); here it means
//     what it says.
type ResourceSelector struct {
	// IncludedNamespaces lists the namespaces to select; empty selects all.
	IncludedNamespaces []string
	// ExcludedNamespaces lists namespaces not to select, even if included.
	ExcludedNamespaces []string
	// IncludedResources lists the resources to select; empty selects all.
	IncludedResources []string
	// ExcludedResources lists resources not to select, even if included.
	ExcludedResources []string
	// LabelSelector is a label selector in the syntax of [labels.Parse]; empty selects
	// every item.
	LabelSelector string
}

// A Matcher is a [ResourceSelector] ready to match items, made by [NewMatcher]. It is
// immutable and safe for concurrent use. The zero Matcher, like the zero selector,
// selects every item.
type Matcher struct {
	resources  resourceSet
	namespaces nameSet
	selector   labels.Selector // nil: no label condition
}

// NewMatcher checks s and returns its Matcher. It fails with an error wrapping
// [ErrInvalidSelector] when s.LabelSelector does not parse. The Matcher keeps no
// reference to s's slices.
func NewMatcher(s ResourceSelector) (*Matcher, error) {
	m := &Matcher{
		resources:  newResourceSet(s.IncludedResources, s.ExcludedResources),
		namespaces: newNameSet(s.IncludedNamespaces, s.ExcludedNamespaces),
	}
	if s.LabelSelector != "" {
		sel, err := labels.Parse(s.LabelSelector)
		if err != nil {
			return nil, fmt.Errorf("label selector %q: %w: %v", s.LabelSelector, ErrInvalidSelector, err)
		}
		if !sel.Empty() {
			m.selector = sel
		}
	}
	return m, nil
}

// Matches reports whether an object of resource gr, in namespace (empty for a
// cluster-scoped object) and with labels lbls, is selected. A nil lbls skips the label
// condition, as Velero does for an object whose metadata it does not have.
func (m *Matcher) Matches(gr schema.GroupResource, namespace string, lbls labels.Labels) bool {
	if !m.resources.includes(gr) {
		return false
	}
	if namespace == "" {
		if !m.namespaces.everything() {
			return false
		}
	} else if !m.namespaces.includes(namespace) {
		return false
	}
	return m.selector == nil || lbls == nil || m.selector.Matches(lbls)
}

// MatchesItem reports whether item, an object of resource gr, is selected, reading its
// namespace and labels from its metadata (metadata.namespace and metadata.labels of
// [runtime.Unstructured.UnstructuredContent]). Labels are copied into a [labels.Set] only
// when the Matcher has a label condition. A nil item is never selected. To match an item
// under another namespace than its own (a restore's target namespace, for instance),
// call [Matcher.Matches].
func (m *Matcher) MatchesItem(gr schema.GroupResource, item runtime.Unstructured) bool {
	if item == nil {
		return false
	}
	meta, _ := item.UnstructuredContent()["metadata"].(map[string]interface{})
	namespace, _ := meta["namespace"].(string)
	if m.selector == nil {
		return m.Matches(gr, namespace, nil)
	}
	content, _ := meta["labels"].(map[string]interface{})
	return m.Matches(gr, namespace, labelSet(content))
}

// labelSet copies the labels of an object's content into a labels.Set, the type that
// apimachinery keeps implementing labels.Labels as that interface grows. Values that are
// not strings do not count as labels. The result is never nil, so an object without
// labels is still held to the label condition.
func labelSet(content map[string]interface{}) labels.Set {
	set := make(labels.Set, len(content))
	for k, v := range content {
		if s, ok := v.(string); ok {
			set[k] = s
		}
	}
	return set
}

// nameSet applies an include list and an exclude list of namespace names.
type nameSet struct {
	include, exclude map[string]bool // nil when the list is empty
}

func newNameSet(include, exclude []string) nameSet {
	return nameSet{include: toSet(include), exclude: toSet(exclude)}
}

func toSet(names []string) map[string]bool {
	if len(names) == 0 {
		return nil
	}
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

func (s nameSet) includes(name string) bool {
	if s.exclude["*"] || s.exclude[name] {
		return false
	}
	return s.include == nil || s.include["*"] || s.include[name]
}

// everything reports whether every namespace, and so every cluster-scoped object, is
// selected.
func (s nameSet) everything() bool {
	return s.exclude == nil && (s.include == nil || (len(s.include) == 1 && s.include["*"]))
}

// resourceSet applies an include list and an exclude list of resource names.
type resourceSet struct {
	include, exclude resourceNames
}

// resourceNames is a list of resource names: bare names match in any group, names with a
// group in theirs only.
type resourceNames struct {
	set  bool // the list was not empty
	all  bool // it holds "*"
	bare map[string]bool
	full map[schema.GroupResource]bool
}

func newResourceSet(include, exclude []string) resourceSet {
	return resourceSet{include: newResourceNames(include), exclude: newResourceNames(exclude)}
}

func newResourceNames(names []string) resourceNames {
	r := resourceNames{set: len(names) > 0}
	for _, n := range names {
		n = strings.ToLower(n)
		switch gr := schema.ParseGroupResource(n); {
		case n == "*":
			r.all = true
		case gr.Group == "":
			if r.bare == nil {
				r.bare = make(map[string]bool)
			}
			r.bare[gr.Resource] = true
		default:
			if r.full == nil {
				r.full = make(map[schema.GroupResource]bool)
			}
			r.full[gr] = true
		}
	}
	return r
}

func (r resourceNames) has(gr schema.GroupResource) bool {
	return r.all || r.bare[gr.Resource] || r.full[gr]
}

func (s resourceSet) includes(gr schema.GroupResource) bool {
	gr = schema.GroupResource{Group: strings.ToLower(gr.Group), Resource: strings.ToLower(gr.Resource)}
	if s.exclude.has(gr) {
		return false
	}
	return !s.include.set || s.include.has(gr)
}
