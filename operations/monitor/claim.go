package monitor

import (
	"context"

	"github.com/itemops/itemops/operations"
)

// claim claims the run of o: under session when it is not nil, else through the store
// when it is a RunClaimer; otherwise every run is the Monitor's to work on.
func (m *Monitor) claim(ctx context.Context, o operations.Owner, session operations.ClaimSession) (release func(), ok bool, err error) {
	var claimer operations.RunClaimer
	switch {
	case session != nil:
		claimer = session
	case m.claimer != nil:
		claimer = m.claimer
	default:
		return func() {}, true, nil
	}
	release, ok, err = claimer.ClaimRun(ctx, o)
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
