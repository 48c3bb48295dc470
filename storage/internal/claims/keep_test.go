package claims

import "testing"

// The shares of the claim sessions add up to the runs and differ by at most one, however
// many runs and sessions there are.
func TestSharesAddUp(t *testing.T) {
	for runs := int64(0); runs <= 50; runs++ {
		for n := int64(1); n <= 7; n++ {
			var total, least, most int
			least = int(runs) + 1
			for rank := range n {
				s := Share(runs, n, rank)
				total += s
				least, most = min(least, s), max(most, s)
			}
			if total != int(runs) || most-least > 1 {
				t.Errorf("%d runs over %d sessions: shares add up to %d (want %d), from %d to %d", runs, n, total, runs, least, most)
			}
		}
	}
}
