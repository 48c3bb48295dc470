package kv_test

import (
	"errors"
	"testing"

	"github.com/itemops/itemops/storage/kv"
)

// Limits.Check takes a Commit exactly at each limit and refuses it one condition or
// write, or one byte, beyond, counting the bytes of keys, values and range ends; a zero
// limit takes anything.
func TestLimitsCheck(t *testing.T) {
	conds := []kv.Condition{{Key: []byte("c1")}, {Key: []byte("cond2"), Version: 9}}
	writes := []kv.Write{
		{Key: []byte("k"), Value: []byte("value")},
		{Key: []byte("del"), Delete: true},
		{Key: []byte("a"), End: []byte("b"), Delete: true},
	}
	const ops, bytes = 5, 2 + 5 + 1 + 5 + 3 + 1 + 1
	for _, maxOps := range []int{0, ops - 1, ops, ops + 1} {
		for _, maxBytes := range []int{0, bytes - 1, bytes, bytes + 1} {
			l := kv.Limits{MaxOps: maxOps, MaxBytes: maxBytes}
			want := maxOps == ops-1 || maxBytes == bytes-1
			err := l.Check(conds, writes)
			if got := errors.Is(err, kv.ErrTooLarge); got != want || (err != nil && !got) {
				t.Errorf("%+v.Check(a commit of %d operations and %d bytes) = %v, want ErrTooLarge: %v", l, ops, bytes, err, want)
			}
		}
	}
	if err := (kv.Limits{MaxOps: 1, MaxBytes: 1}).Check(nil, nil); err != nil {
		t.Errorf("Check of an empty commit = %v, want nil", err)
	}
}
