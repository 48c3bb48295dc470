package seqmerge

import (
	"slices"
	"testing"
)

// list returns a List of the numbers seqs, each item its own number.
func list(seqs ...uint64) List[uint64] {
	var l List[uint64]
	for _, s := range seqs {
		l.Add(s, s)
	}
	return l
}

func TestMerge(t *testing.T) {
	for _, tc := range []struct {
		a, b List[uint64]
		want []uint64
	}{
		{list(), list(), []uint64{}},
		{list(1, 4, 9), list(), []uint64{1, 4, 9}},
		{list(), list(2, 3), []uint64{2, 3}},
		{list(1, 4, 9), list(2, 3, 10), []uint64{1, 2, 3, 4, 9, 10}},
		{list(5), list(1, 2, 3), []uint64{1, 2, 3, 5}},
	} {
		got := Merge(tc.a, tc.b)
		if got == nil || !slices.Equal(got, tc.want) {
			t.Errorf("Merge(%v, %v) = %#v, want %v", tc.a.Seqs, tc.b.Seqs, got, tc.want)
		}
	}
}

// On equal numbers a's item comes first.
func TestMergeTies(t *testing.T) {
	var a, b List[string]
	a.Add(1, "a1")
	a.Add(2, "a2")
	b.Add(1, "b1")
	b.Add(2, "b2")
	if got, want := Merge(a, b), []string{"a1", "b1", "a2", "b2"}; !slices.Equal(got, want) {
		t.Errorf("Merge = %v, want %v", got, want)
	}
}
