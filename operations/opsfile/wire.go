package opsfile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/itemops/itemops/operations"
)

// The wire records: every key of Velero's BackupOperation and RestoreOperation, so that
// the kind of each record can be told from its keys. Unknown keys are ignored.
type wireRecord struct {
	Spec   wireSpec   `json:"spec"`
	Status wireStatus `json:"status"`
}

type wireSpec struct {
	BackupName         string                          `json:"backupName"`
	BackupUID          string                          `json:"backupUID"`
	BackupItemAction   string                          `json:"backupItemAction"`
	RestoreName        string                          `json:"restoreName"`
	RestoreUID         string                          `json:"restoreUID"`
	RestoreItemAction  string                          `json:"restoreItemAction"`
	ResourceIdentifier operations.ResourceIdentifier   `json:"resourceIdentifier"`
	OperationID        string                          `json:"operationID"`
	PostOperationItems []operations.ResourceIdentifier `json:"postOperationItems"`
}

type wireStatus struct {
	Phase          operations.OperationPhase `json:"phase"`
	Error          string                    `json:"error"`
	NCompleted     int64                     `json:"nCompleted"`
	NTotal         int64                     `json:"nTotal"`
	OperationUnits string                    `json:"operationUnits"`
	Description    string                    `json:"description"`
	Created        wireTime                  `json:"created"`
	Started        wireTime                  `json:"started"`
	Updated        wireTime                  `json:"updated"`
}

// wireTime decodes a time as Kubernetes' metav1.Time does (null or an RFC 3339 string),
// then in UTC and to the second. A bad value is kept in bad rather than returned, so that
// the error can name the field.
type wireTime struct {
	t   time.Time
	bad string
}

func (w *wireTime) UnmarshalJSON(data []byte) error {
	*w = wireTime{}
	if string(data) == "null" {
		return nil
	}
	if n := len(data); n >= 2 && data[0] == '"' {
		if t, ok := parseUTCSecond(data[1 : n-1]); ok {
			w.t = t
			return nil
		}
	}
	var s string
	if n := len(data); n >= 2 && data[0] == '"' && data[n-1] == '"' && bytes.IndexByte(data, '\\') < 0 {
		s = string(data[1 : n-1])
	} else if err := json.Unmarshal(data, &s); err != nil {
		w.bad = fmt.Sprintf("found %s, want an RFC 3339 time string", abbreviate(string(data)))
		return nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		w.bad = fmt.Sprintf("%s is not an RFC 3339 time", strconv.Quote(abbreviate(s)))
		return nil
	}
	t = t.UTC()
	w.t = t.Add(-time.Duration(t.Nanosecond()))
	return nil
}

// abbreviate shortens s for an error message.
func abbreviate(s string) string {
	const n = 40
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// parseUTCSecond parses the one form the encoder writes, "2006-01-02T15:04:05Z",
// without allocating. It reports false for anything else, which is left to time.Parse,
// and for what time.Parse would refuse (a 30th of February, a 61st second), so that it
// never accepts more than time.Parse does.
func parseUTCSecond(b []byte) (time.Time, bool) {
	if len(b) != len("2006-01-02T15:04:05Z") || b[4] != '-' || b[7] != '-' || b[10] != 'T' ||
		b[13] != ':' || b[16] != ':' || b[19] != 'Z' {
		return time.Time{}, false
	}
	year, ok1 := digits(b[0:4])
	month, ok2 := digits(b[5:7])
	day, ok3 := digits(b[8:10])
	hour, ok4 := digits(b[11:13])
	minute, ok5 := digits(b[14:16])
	second, ok6 := digits(b[17:19])
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || second > 59 {
		return time.Time{}, false
	}
	t := time.Date(year, time.Month(month), day, hour, minute, second, 0, time.UTC)
	if t.Day() != day { // time.Date carried an impossible day into the next month
		return time.Time{}, false
	}
	return t, true
}

// digits parses b as a decimal number of ASCII digits only.
func digits(b []byte) (int, bool) {
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}
