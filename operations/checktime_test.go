package operations

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

var (
	first = time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)
	last  = time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)
)

// marshals reports whether encoding/json writes t in UTC, the reference the rule
// follows: time.Time's MarshalJSON refuses a year outside 0000 to 9999.
func marshals(t time.Time) bool {
	_, err := json.Marshal(t.UTC())
	return err == nil
}

// TestCheckTimeAgreesWithJSON checks checkTime against encoding/json at and around both ends
// of the range, in several zones, and at the extremes of time.Time.
func TestCheckTimeAgreesWithJSON(t *testing.T) {
	var times []time.Time
	for _, edge := range []time.Time{first, last, {}} {
		for _, d := range []time.Duration{-time.Hour, -time.Second, -1, 0, 1, time.Second, time.Hour} {
			times = append(times, edge.Add(d))
		}
	}
	times = append(times, time.Unix(1<<62, 0), time.Unix(-1<<62, 0), time.Unix(0, 0))
	zones := []*time.Location{time.UTC, time.FixedZone("east", 14*3600), time.FixedZone("west", -12*3600)}
	for _, tm := range times {
		for _, z := range zones {
			tm := tm.In(z)
			err := checkTime("started", tm)
			if want := marshals(tm); (err == nil) != want {
				t.Errorf("checkTime(%s) = %v, want an error: %v", tm.Format(time.RFC3339Nano), err, !want)
			}
			if err != nil && (!strings.HasPrefix(err.Error(), "started time "+tm.UTC().Format(time.RFC3339Nano)) || !strings.HasSuffix(err.Error(), "outside years 0000 to 9999 in UTC")) {
				t.Errorf("checkTime(%s) = %q, want the field, the time in UTC and the range", tm.Format(time.RFC3339Nano), err)
			}
		}
	}
	if err := checkTime("created", time.Time{}); err != nil {
		t.Errorf("checkTime(the zero time) = %v, want nil", err)
	}
	if err := checkTime("created", last.Add(1)); err == nil {
		t.Errorf("checkTime(%s) = nil, want an error", last.Add(1).Format(time.RFC3339Nano))
	}
	if err := checkTime("created", first.Add(-1)); err == nil {
		t.Errorf("checkTime(%s) = nil, want an error", first.Add(-1).Format(time.RFC3339Nano))
	}
}

// FuzzCheckTime checks checkTime against encoding/json for any instant, in a zone of any
// offset that time.FixedZone takes.
func FuzzCheckTime(f *testing.F) {
	f.Add(first.Unix(), int64(0), int32(3600))
	f.Add(last.Unix(), int64(999999999), int32(-3600))
	f.Add(last.Unix()+1, int64(0), int32(0))
	f.Fuzz(func(t *testing.T, sec, nsec int64, offset int32) {
		tm := time.Unix(sec, nsec).In(time.FixedZone("", int(offset%(24*3600))))
		if err := checkTime("updated", tm); (err == nil) != marshals(tm) {
			t.Errorf("checkTime(%s) = %v, but encoding/json marshals it: %v", tm.Format(time.RFC3339Nano), err, marshals(tm))
		}
	})
}
