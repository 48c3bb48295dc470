package seqmerge

import (
	"slices"
	"testing"
)

func TestMerge(t *testing.T) {
	id := func(n int) uint64 { return uint64(n) }
	for _, tc := range []struct{ a, b, want []int }{
		{nil, nil, []int{}},
		{[]int{1, 4, 9}, nil, []int{1, 4, 9}},
		{nil, []int{2, 3}, []int{2, 3}},
		{[]int{1, 4, 9}, []int{2, 3, 10}, []int{1, 2, 3, 4, 9, 10}},
	} {
		if got := Merge(tc.a, tc.b, id); !slices.Equal(got, tc.want) {
			t.Errorf("Merge(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}
