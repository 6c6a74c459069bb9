package store

import "time"

// Millis is t as erpsync writes it into a DATETIME(3) column: UTC,
// truncated to the millisecond. Every time erpsync writes goes through it,
// because the servers disagree on the digits past the third: MariaDB
// truncates them, MySQL 8 rounds them (unless its sql_mode has
// TIME_TRUNCATE_FRACTIONAL). Sent already truncated, a value is stored the
// same on both, so a checkpoint never lands past a record not yet read and
// a comparison with the feed (verify) reads back what it wrote.
func Millis(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }

// StoredForms returns the values a DATETIME(3) column may hold for t:
// Millis(t), and t rounded to the millisecond as MySQL 8 stored a value
// sent with more digits (by an erpsync before Millis, or another writer).
// Both are the same when t has no digits past the millisecond.
func StoredForms(t time.Time) (truncated, rounded time.Time) {
	t = t.UTC()
	return t.Truncate(time.Millisecond), t.Round(time.Millisecond)
}
