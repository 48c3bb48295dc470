package adapters

import "errors"

// ErrUnknownPlugin is returned when no plugin is registered under the requested name, or
// none of the kind an operation needs (a restore's operation names a plugin registered
// only for backups).
var ErrUnknownPlugin = errors.New("unknown plugin")

// ErrDuplicatePlugin is returned when a plugin is registered under a name that already
// holds a plugin of the same version, or a backup item action and a volume snapshotter
// would share a name.
var ErrDuplicatePlugin = errors.New("plugin already registered")

// ErrInvalidPlugin is returned when a plugin cannot be registered or used: it is nil, or
// its name is empty. The adapters of a nil v1 plugin return it from every method but
// Name.
var ErrInvalidPlugin = errors.New("invalid plugin")

// ErrInvalidSelector is returned when a [ResourceSelector]'s label selector does not parse.
var ErrInvalidSelector = errors.New("invalid resource selector")

// ErrItemsNotReady is returned by [WaitForAdditionalItems] when the timeout passes before
// the action reports its additional items ready.
var ErrItemsNotReady = errors.New("additional items not ready")
