// Package opsfile reads and writes Velero's itemoperations files: the gzip'd JSON array
// in which Velero keeps a backup's or a restore's plugin operations in the object store,
// under [BackupOperationsKey] or [RestoreOperationsKey]. [Encode] and [Decode] read and
// write these files whole; [Encoder] and [Decoder] do it one record at a time, in memory
// that does not grow with the number of records. The records are the
// [operations.Operation] values of package operations, which opsfile builds on and which
// never imports it.
//
// # Itemoperations files
//
// The encoder writes what Velero writes: the decompressed text is, byte for byte, what
// encoding/json's Encoder writes for Velero's slice of BackupOperation or
// RestoreOperation (an array of {"spec":{…},"status":{…}} objects, then a newline), and
// it is compressed as Velero compresses it, by compress/gzip's writer at its default
// level with no name and no time stamp (so, built with the same Go release, even the
// compressed bytes are Velero's). A backup's spec has the keys backupName, backupUID,
// backupItemAction, resourceIdentifier (with the keys Group, Resource, Namespace and
// Name), operationID and postOperationItems, which is null for a nil list and [] for an
// empty one; a restore's has restoreName, restoreUID, restoreItemAction,
// resourceIdentifier and operationID. The status keys phase, error, nCompleted, nTotal,
// operationUnits, description, created, started and updated are left out when empty;
// times are written in UTC, in RFC 3339 to the second. Strings are escaped as
// encoding/json escapes them by default: <, > and & as \u003c, \u003e and \u0026,
// U+2028 and U+2029 as \u2028 and \u2029, and invalid UTF-8 as \ufffd, which
// therefore does not survive a round trip. That is what encoding/json wrote up to Go
// 1.26, with which Velero v1.16 to v1.18 are built; from Go 1.27 it writes invalid UTF-8
// as the character U+FFFD itself, which decodes to the same string. The codec keeps the
// escape, so its bytes do not depend on the Go it is built with.
//
// The decoder reads Velero's files and anything encoding/json would read into Velero's
// types. Records in the form the encoders write (keys in order, no white space, no
// escapes) are read by a fast path that avoids reflection and shares strings that repeat
// from record to record; any other record goes through encoding/json, with the same
// result. These decisions apply to both:
//
//   - The kind of a record is told by its keys: backup keys (a backup name, UID or
//     plugin, or a postOperationItems list) or restore keys, never both. The kind of the
//     file is that of its first record, unless [ExpectKind] names it, and every record
//     must have it. Unknown keys are ignored, and keys match case-insensitively, as
//     encoding/json matches them.
//   - Each record must pass [operations.Operation.Validate]: an owner name, an operation
//     ID, one of the four operation phases, and times in years 0000 to 9999 in UTC (a
//     time such as "9999-12-31T23:00:00-02:00" is RFC 3339 but falls in year 10000 in
//     UTC, where it could not be written again). Times must be RFC 3339 (or null, for
//     unset) and are returned in UTC with fractions of a second dropped, so that decoding
//     what was encoded gives the same records.
//   - Input is refused beyond a decompressed size ([WithSizeLimit], [DefaultSizeLimit])
//     and beyond a record size ([WithRecordSizeLimit], [DefaultRecordSizeLimit]), so a
//     gzip bomb costs at most the limit in reading and a small multiple of the record
//     limit in memory. The default record limit holds the record of any operation that
//     passes [operations.Operation.Validate], whose limits (operations.MaxNameBytes,
//     operations.MaxTextBytes, operations.MaxSpecBytes) bound what a store accepts: a
//     record written from a store is read back with the defaults. The size limit is
//     of the whole file, whose number of records no store bounds: a file of more than
//     DefaultSizeLimit bytes needs a larger WithSizeLimit.
//   - The whole file is checked: one JSON array, nothing but white space after it, and a
//     gzip stream that ends with a good checksum (concatenated gzip members are read as
//     one stream, as gzip -d reads them). A file that holds JSON null, which
//     encoding/json reads as a nil slice, is an empty file. A record that is JSON null,
//     which encoding/json reads as a nil pointer that Velero's controllers would
//     dereference, is refused. A failure is a [*DecodeError] that names the
//     record and the offset in the decompressed JSON text, and wraps [ErrMalformed],
//     [ErrTooLarge], [operations.ErrInvalid] or the reader's own error.
package opsfile
