package kubestore

import "embed"

// RBAC holds, as YAML, the rights the store needs (see the package documentation,
// "Rights"): rbac/role.yaml, the Role itemops-kubestore that a store's user needs in the
// store's namespace; rbac/viewer-role.yaml, the Role itemops-kubestore-viewer that the
// user of a store opened with [Options.ReadOnly] needs there (get and list on the
// store's two resources); and rbac/install-clusterrole.yaml, the ClusterRole
// itemops-kubestore-install that [InstallCRDs] needs. A store needs no right outside its
// namespace.
//
//go:embed rbac/*.yaml
var RBAC embed.FS
