package erp

import (
	"encoding/json"
	"fmt"
	"time"
)

// DATETIME holds years 1000 to 9999. A record the schema allows but the
// table cannot store is quarantined like an invalid one: retrying it would
// fail forever and hold the checkpoint back for good.
var minStorable, maxStorable = time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 12, 31, 23, 59, 59, 999e6, time.UTC)

func storable(t time.Time) bool { return !t.Before(minStorable) && !t.After(maxStorable) }

// SplitUnstorable moves the records with a date-time outside the years
// 1000-9999 (what a DATETIME column holds) to invalid, as quarantined
// items: a run never writes them, and a scan never counts them as records.
func SplitUnstorable(recs []Record, invalid []Invalid) ([]Record, []Invalid) {
	keep := recs[:0]
	for _, rec := range recs {
		// A Schema's record has checked its date-time columns already.
		if storable(rec.UpdatedAt) && (rec.Vals != nil || storable(rec.StartsAt) && (rec.EndsAt == nil || storable(*rec.EndsAt))) {
			keep = append(keep, rec)
			continue
		}
		raw, err := json.Marshal(rec)
		if err != nil {
			// encoding/json refuses years past 9999, which an offset can
			// produce from a valid date-time: keep the record readable.
			raw, _ = json.Marshal(fmt.Sprintf("%+v", rec))
		}
		invalid = append(invalid, Invalid{ErpID: rec.ErpID, Reason: "a date-time outside the years 1000-9999 that the table can store", Raw: raw, UpdatedAt: rec.UpdatedAt, Version: rec.Version})
	}
	return keep, invalid
}
