package restoreorder

import (
	"slices"
	"sort"
	"strings"
)

// A Resolver maps a name given in [Priorities] or in a [Filter]'s resource lists to one
// of the backup's group-resources, which it is given sorted. It reports false when the
// name stands for none of them. A Resolver backed by discovery can map short names
// ("po") and singular ones ("volumesnapshotclass") that [ResolveName] cannot.
type Resolver func(name string, resources []string) (resource string, ok bool)

// ResolveName is the default [Resolver]. It matches name to resources as Velero's
// discovery would for a backup's own resources: an exact match ("pods",
// "replicasets.apps"), else the one resource named "<name>.<group>"
// ("customresourcedefinitions" → "customresourcedefinitions.apiextensions.k8s.io").
// It reports false when no resource matches, or when several groups have a resource of
// that name. resources must be sorted.
func ResolveName(name string, resources []string) (string, bool) {
	if name == "" {
		return "", false
	}
	if _, ok := slices.BinarySearch(resources, name); ok {
		return name, true
	}
	prefix := name + "."
	i := sort.SearchStrings(resources, prefix)
	if i < len(resources) && strings.HasPrefix(resources[i], prefix) &&
		(i+1 == len(resources) || !strings.HasPrefix(resources[i+1], prefix)) {
		return resources[i], true
	}
	return "", false
}

// An Option configures [Collect].
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	resolve   Resolver
	itemError func(Item, error) error
}

// WithResolver makes [Collect] resolve priority and filter names with r instead of
// [ResolveName]. A name r maps to something the backup does not hold resolves to
// nothing. A nil r keeps the default.
func WithResolver(r Resolver) Option {
	return optionFunc(func(c *config) {
		if r != nil {
			c.resolve = r
		}
	})
}

// WithItemErrors sets what [Collect] does when the labels of an item cannot be read (it
// is not a JSON object, or the source fails to open it): f is called with the item and
// the error; if f returns nil the item is left out and Collect goes on, otherwise Collect
// fails with what f returned. By default Collect fails with the error. Velero leaves
// such items out and counts an error; pass a function that counts to do the same.
func WithItemErrors(f func(it Item, err error) error) Option {
	return optionFunc(func(c *config) { c.itemError = f })
}
