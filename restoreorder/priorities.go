package restoreorder

import (
	"fmt"
	"slices"
	"strings"
)

// Priorities says which resources are restored first and which last: the High list in
// its order before everything else, the Low list in its order after everything else.
// Names are group-resources as a backup names them ("pods", "replicasets.apps") or names
// a resolver maps onto them (see [Collect]). The zero Priorities orders nothing.
type Priorities struct {
	High, Low []string
}

// separator splits the high list from the low list in the text form.
const separator = "-"

// DefaultPriorities returns Velero's restore priorities, in fresh slices the caller may
// change. Cluster-wide prerequisites come first (CRDs, namespaces, storage classes,
// snapshot classes and contents, persistent volumes and claims, RBAC, secrets, config
// maps), then pods, replica sets and services, and the Tanzu and Cluster API objects
// that must see everything else restored come last.
func DefaultPriorities() Priorities {
	return Priorities{
		High: []string{
			"customresourcedefinitions",
			"namespaces",
			"storageclasses",
			"volumesnapshotclass.snapshot.storage.k8s.io",
			"volumesnapshotcontents.snapshot.storage.k8s.io",
			"volumesnapshots.snapshot.storage.k8s.io",
			"datauploads.velero.io",
			"persistentvolumes",
			"persistentvolumeclaims",
			"clusterroles",
			"roles",
			"serviceaccounts",
			"clusterrolebindings",
			"rolebindings",
			"secrets",
			"configmaps",
			"limitranges",
			"priorityclasses",
			"pods",
			"replicasets.apps",
			"clusterclasses.cluster.x-k8s.io",
			"endpoints",
			"services",
		},
		Low: []string{
			"clusterbootstraps.run.tanzu.vmware.com",
			"clusters.cluster.x-k8s.io",
			"clusterresourcesets.addons.cluster.x-k8s.io",
			"apps.kappctrl.k14s.io",
			"packageinstalls.packaging.carvel.dev",
		},
	}
}

// ParsePriorities reads Velero's text form of priorities: names separated by commas,
// with a lone "-" between the high and the low list ("a,b,-,c,d"). A leading "-" gives
// only a low list, a trailing one only a high list, and none only a high list. Spaces
// around names are trimmed. The empty string gives the zero Priorities. It fails with
// [ErrInvalidPriorities] for an empty name or more than one "-".
//
// For names without commas or surrounding spaces, other than "-",
// ParsePriorities(p.String()) gives p back (with nil for an empty list).
func ParsePriorities(s string) (Priorities, error) {
	if strings.TrimSpace(s) == "" {
		return Priorities{}, nil
	}
	names := strings.Split(s, ",")
	sep := -1
	for i, n := range names {
		n = strings.TrimSpace(n)
		names[i] = n
		switch {
		case n == "":
			return Priorities{}, fmt.Errorf("restoreorder: parse priorities %q: name %d is empty: %w", s, i+1, ErrInvalidPriorities)
		case n == separator && sep >= 0:
			return Priorities{}, fmt.Errorf("restoreorder: parse priorities %q: more than one %q: %w", s, separator, ErrInvalidPriorities)
		case n == separator:
			sep = i
		}
	}
	if sep < 0 {
		return Priorities{High: names}, nil
	}
	var p Priorities
	if sep > 0 {
		p.High = names[:sep:sep]
	}
	if sep < len(names)-1 {
		p.Low = names[sep+1:]
	}
	return p, nil
}

// String returns the text form [ParsePriorities] reads: the high names, then "-" and the
// low names if there are any, joined by commas. The zero Priorities gives "".
func (p Priorities) String() string {
	names := slices.Clip(slices.Clone(p.High))
	if len(p.Low) > 0 {
		names = append(names, separator)
		names = append(names, p.Low...)
	}
	return strings.Join(names, ",")
}

// Merge returns p with every name of required that p lacks, and the names it added in
// the order of required. A name is lacking when it is in neither of p's lists; a name
// the user moved to the other list stays where the user put it.
//
// Each added name goes into the list it has in required, right after the nearest name
// before it in required that the list already holds, so that required's relative order
// is kept around the user's choices. When no earlier required name is in the list, it
// goes before the nearest later one; when neither is, it goes at the start of the list,
// ahead of the user's names, since required names are prerequisites. Merge does not
// change p or required.
//
//	user, _ := ParsePriorities("pods,namespaces")
//	merged, added := user.Merge(DefaultPriorities())
func (p Priorities) Merge(required Priorities) (merged Priorities, added []string) {
	present := make(map[string]bool, len(p.High)+len(p.Low))
	for _, n := range p.High {
		present[n] = true
	}
	for _, n := range p.Low {
		present[n] = true
	}
	merged.High, added = mergeList(slices.Clone(p.High), required.High, present, added)
	merged.Low, added = mergeList(slices.Clone(p.Low), required.Low, present, added)
	return merged, added
}

// mergeList inserts into list the names of req that present lacks, marking them
// present and appending them to added.
func mergeList(list, req []string, present map[string]bool, added []string) ([]string, []string) {
	for i, name := range req {
		if present[name] {
			continue
		}
		at := 0
		if j := lastIndexOfAny(list, req[:i]); j >= 0 {
			at = j + 1
		} else if j := firstIndexOfAny(list, req[i+1:]); j >= 0 {
			at = j
		}
		list = slices.Insert(list, at, name)
		present[name] = true
		added = append(added, name)
	}
	return list, added
}

// lastIndexOfAny returns the index in list of the last name of names (scanning names
// from the end) that list holds, or -1.
func lastIndexOfAny(list, names []string) int {
	for k := len(names) - 1; k >= 0; k-- {
		if j := slices.Index(list, names[k]); j >= 0 {
			return j
		}
	}
	return -1
}

// firstIndexOfAny returns the index in list of the first name of names that list holds,
// or -1.
func firstIndexOfAny(list, names []string) int {
	for _, n := range names {
		if j := slices.Index(list, n); j >= 0 {
			return j
		}
	}
	return -1
}
