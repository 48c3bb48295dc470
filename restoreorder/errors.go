package restoreorder

import "errors"

// ErrInvalidPriorities is returned by [ParsePriorities] for text that is not a priority
// list: an empty name, or more than one "-" separator.
var ErrInvalidPriorities = errors.New("invalid resource priorities")

// ErrMalformed is returned when a backup archive or tree cannot be read as a Velero
// backup: a stream that is not gzip or tar, or is cut short or damaged, an entry whose
// path escapes the archive (".." or absolute), a link or device entry, the same path
// twice, a path that is both a file and a directory, a file where the layout wants a
// directory or the other way round, an item file whose name is not <name>.json for an
// object's name (".json", "..json" and "...json" are not), a resource whose only items
// are in non-preferred version directories, or no resources directory at all.
var ErrMalformed = errors.New("malformed backup")

// ErrTooLarge is returned by [FromTarGz] when the item files of an archive add up to
// more bytes than its limit (see [WithMaxBytes]).
var ErrTooLarge = errors.New("backup too large")

// ErrInvalidItem is returned when an item file is not a JSON object, or its
// metadata.labels is not an object of strings.
var ErrInvalidItem = errors.New("invalid item")

// ErrInvalidFilter is returned by [Collect] for a [Filter] that cannot be applied: a
// namespace mapping from or to the empty namespace.
var ErrInvalidFilter = errors.New("invalid filter")

// ErrSourceContract is returned by [Collect] when a [Source] breaks its contract: names
// out of order or repeated.
var ErrSourceContract = errors.New("source broke its contract")
