package erp

import (
	"encoding/json"
	"fmt"
	"strings"
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
	return SplitUnstorableIn(recs, invalid, false)
}

// SplitUnstorableIn is SplitUnstorable for a database whose text cannot
// hold U+0000 when noNUL (PostgreSQL's): a record with that character in
// any of its strings, lines included, is moved to invalid too.
func SplitUnstorableIn(recs []Record, invalid []Invalid, noNUL bool) ([]Record, []Invalid) {
	keep := recs[:0]
	for _, rec := range recs {
		reason := ""
		switch {
		// A Schema's record has checked its date-time columns already.
		case !storable(rec.UpdatedAt) || rec.Vals == nil && (!storable(rec.StartsAt) || rec.EndsAt != nil && !storable(*rec.EndsAt)):
			reason = "a date-time outside the years 1000-9999 that the table can store"
		case noNUL && hasNUL(rec):
			reason = "a NUL character (U+0000), which a PostgreSQL text column cannot store"
		default:
			keep = append(keep, rec)
			continue
		}
		raw, err := json.Marshal(rec)
		if err != nil {
			// encoding/json refuses years past 9999, which an offset can
			// produce from a valid date-time: keep the record readable.
			raw, _ = json.Marshal(fmt.Sprintf("%+v", rec))
		}
		invalid = append(invalid, Invalid{ErpID: rec.ErpID, Reason: reason, Raw: raw, UpdatedAt: rec.UpdatedAt, Version: rec.Version})
	}
	return keep, invalid
}

// hasNUL reports whether a string of rec holds U+0000.
func hasNUL(rec Record) bool {
	nul := func(s string) bool { return strings.IndexByte(s, 0) >= 0 }
	if nul(rec.ErpID) || nul(rec.MemberID) || nul(rec.ProductCode) || nul(rec.Status) {
		return true
	}
	for _, v := range rec.Vals {
		if nul(v.S) {
			return true
		}
	}
	for _, lines := range rec.Children {
		for _, line := range lines {
			for _, v := range line {
				if nul(v.S) {
					return true
				}
			}
		}
	}
	return false
}
