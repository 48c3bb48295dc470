// Package restoreorder is pass one of a two-pass restore: it reads what a Velero backup
// holds, applies a restore's filters, and lists the items to restore in the order to
// restore them, so that the total is known before the first item is restored.
//
//	src, err := restoreorder.FromTarGz(file)                 // or FromFS(os.DirFS(dir))
//	c, err := restoreorder.Collect(ctx, src, restoreorder.DefaultPriorities(), filter)
//	counter.Collected(c.Total())                             // package progress
//	for it := range c.Items() {                              // pass two
//		data, err := restoreorder.ReadItem(ctx, src, it.Path)
//		...
//	}
//
// # Backups
//
// A [Source] is a backup's contents: group-resources, then namespaces (or cluster
// scope), then items. [FromFS] reads an extracted backup tarball and [FromTarGz] the
// .tar.gz itself, in memory. Both understand Velero's layouts:
//
//	resources/<resource>/cluster/<name>.json
//	resources/<resource>/namespaces/<namespace>/<name>.json
//	resources/<resource>/<version>-preferredversion/...   (format 1.1, same shape)
//	resources/<resource>/<version>/...                     (format 1.1, other API versions)
//
// Version directories: when a resource has the classic cluster/ and namespaces/
// directories, those are used. Every Velero backup writes them, they hold the preferred
// API version, and they are what Velero restores unless its EnableAPIGroupVersions
// feature is on. A resource with only version directories uses its
// <version>-preferredversion one. Other versions encode the same objects again and are
// never used, so no item is counted twice; a backup that holds a resource only in
// non-preferred versions, or in two preferred ones, is refused with [ErrMalformed].
// To restore another API version from an extracted backup, open
// resources/<resource>/<version>/... in place of [Item.Path] (a FromFS source opens any
// file of the tree); FromTarGz keeps only the items it uses, so implement a Source for
// that.
//
// # Order
//
// [Collect] orders resources as Velero does: the high priorities, the backup's other
// resources sorted, the low priorities ([Priorities], [DefaultPriorities], Velero's text
// form with [ParsePriorities], and [Priorities.Merge] to keep defaults a user list left
// out). Where Velero walks namespaces in map order, which changes from run to run,
// Collect sorts them, cluster scope first, and sorts items by name.
//
// Priority and filter names are matched to the backup's group-resources with
// [ResolveName]: exactly, or as the one "<name>.<group>" of the backup. Velero's default
// list names "volumesnapshotclass.snapshot.storage.k8s.io" in the singular, which only
// discovery resolves; pass a [Resolver] backed by discovery with [WithResolver] to match
// it, or it is reported by [Collection.Unresolved] and volume snapshot classes are
// restored among the unprioritised resources.
//
// # Caveats
//
// Label selectors need each candidate item's labels, which means reading the item:
// [Collect] does so only when a selector is set, only for items that pass every other
// rule, and decodes nothing but metadata.labels. A [LabelSource] can serve labels more
// cheaply. [FromTarGz] holds all item bytes in memory, bounded by [WithMaxBytes], which
// also counts every entry's path and 512 bytes for its header, so that an archive of
// countless tiny entries is refused early; [FromFS] holds only names. FromTarGz reads a
// tarball to its end-of-archive marker and fails with [ErrMalformed] if it is cut at
// any byte before it, so a backup that was not written whole never restores a part of
// its items silently.
package restoreorder
