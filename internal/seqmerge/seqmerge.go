// Package seqmerge merges lists that are each in ascending order of a sequence number,
// as the storage engine and boltstore's migration keep a run's unfinished and finished
// operations.
package seqmerge

// A List holds items in ascending order of sequence number; Seqs[i] is the number of
// Items[i]. The zero List is empty and ready to use.
type List[T any] struct {
	Items []T
	Seqs  []uint64
}

// Add appends item, whose sequence number seq is above every number in l.
func (l *List[T]) Add(seq uint64, item T) {
	l.Items = append(l.Items, item)
	l.Seqs = append(l.Seqs, seq)
}

// Merge returns the items of a and b in ascending order of sequence number; on equal
// numbers a's item comes first. When one list is empty it returns the other's Items as
// they are, without a copy (an empty, non-nil slice when both are empty).
func Merge[T any](a, b List[T]) []T {
	switch {
	case len(b.Items) == 0 && a.Items != nil:
		return a.Items
	case len(b.Items) == 0:
		return []T{}
	case len(a.Items) == 0:
		return b.Items
	}
	out := make([]T, 0, len(a.Items)+len(b.Items))
	i, j := 0, 0
	for i < len(a.Items) || j < len(b.Items) {
		if j == len(b.Items) || (i < len(a.Items) && a.Seqs[i] <= b.Seqs[j]) {
			out, i = append(out, a.Items[i]), i+1
		} else {
			out, j = append(out, b.Items[j]), j+1
		}
	}
	return out
}
