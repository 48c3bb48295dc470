// Package seqmerge merges lists that are each in ascending order of a sequence number,
// as the storage engine and boltstore's migration keep a run's unfinished and finished
// operations.
package seqmerge

// Merge returns the elements of a and b, each in ascending order of seq, in ascending
// order of seq; on equal numbers a's element comes first.
func Merge[T any](a, b []T, seq func(T) uint64) []T {
	out := make([]T, 0, len(a)+len(b))
	for len(a) > 0 || len(b) > 0 {
		if len(b) == 0 || (len(a) > 0 && seq(a[0]) <= seq(b[0])) {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return out
}
