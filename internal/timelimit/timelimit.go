// Package timelimit says which times an operation may hold: those whose year, in UTC,
// is 0000 to 9999, the years that an RFC 3339 time has four digits for. Package
// operations refuses an operation with any other time (operations.Operation.Validate),
// so that operations/opsfile, which writes times in RFC 3339 in UTC as Velero does, can
// write every operation a store holds; the Monitor (operations/monitor) refuses a
// plugin's report with any other time for the same reason. This package is the one
// place that says which years those are.
package timelimit

import (
	"fmt"
	"time"
)

// Check returns nil when t, in UTC, lies in years 0000 to 9999; the zero time (year 1)
// does. Otherwise it returns an error that names the field, what, and gives t in UTC
// to the nanosecond, such as "started time 10000-01-01T00:00:00Z outside years 0000
// to 9999 in UTC". The error wraps no sentinel: the caller adds its own.
func Check(what string, t time.Time) error {
	if y := t.UTC().Year(); y < 0 || y > 9999 {
		return fmt.Errorf("%s time %s outside years 0000 to 9999 in UTC", what, t.UTC().Format(time.RFC3339Nano))
	}
	return nil
}
