package faulttest

import (
	"math/rand"
	"time"
)

// disturb pauses and restarts srv as [Server]'s documentation says, until stop is
// closed, and counts in rep what it did. A pause under way when stop is closed ends
// first, so the server runs when disturb returns, unless a method failed.
func disturb(rng *rand.Rand, srv Server, stop <-chan struct{}, rep *Report) error {
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int63n(int64(hi-lo))) }
	for n := 0; ; n++ {
		select {
		case <-stop:
			return nil
		case <-time.After(between(300*time.Millisecond, 700*time.Millisecond)):
		}
		if n == 1 || n > 1 && rng.Intn(3) == 0 {
			if err := srv.Restart(); err != nil {
				return err
			}
			rep.Restarts++
			continue
		}
		if err := srv.Pause(); err != nil {
			return err
		}
		rep.Pauses++
		time.Sleep(between(50*time.Millisecond, 500*time.Millisecond))
		if err := srv.Resume(); err != nil {
			return err
		}
	}
}
