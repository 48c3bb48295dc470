package monitor

import (
	"context"

	"github.com/itemops/itemops/operations"
)

// claim claims the run of o when the store is a RunClaimer; otherwise every run is the
// Monitor's to work on.
func (m *Monitor) claim(ctx context.Context, o operations.Owner) (release func(), ok bool, err error) {
	if m.claimer == nil {
		return func() {}, true, nil
	}
	release, ok, err = m.claimer.ClaimRun(ctx, o)
	if err != nil {
		return nil, false, err
	}
	if !ok {
		return nil, false, nil
	}
	if release == nil {
		release = func() {}
	}
	return release, true, nil
}
