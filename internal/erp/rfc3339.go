package erp

import "time"

// parseTime parses an RFC 3339 date-time (YYYY-MM-DDTHH:MM:SS[.frac] and Z
// or ±hh:mm) into UTC. It is stricter than time.Parse, which also takes a
// comma before the fraction, and several times faster. Leap seconds (:60)
// are refused, as time.Parse refuses them. Fraction digits beyond the
// ninth are dropped.
func parseTime(b []byte) (time.Time, bool) {
	if len(b) < len("2006-01-02T15:04:05Z") ||
		b[4] != '-' || b[7] != '-' || b[10] != 'T' || b[13] != ':' || b[16] != ':' {
		return time.Time{}, false
	}
	y1, ok1 := d2(b, 0)
	y2, ok2 := d2(b, 2)
	month, ok3 := d2(b, 5)
	day, ok4 := d2(b, 8)
	hour, ok5 := d2(b, 11)
	minute, ok6 := d2(b, 14)
	sec, ok7 := d2(b, 17)
	year := y1*100 + y2
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && ok7) ||
		month < 1 || month > 12 || day < 1 || day > daysIn(month, year) ||
		hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, false
	}
	i := 19
	nsec := 0
	if b[i] == '.' {
		i++
		start := i
		for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
			if i-start < 9 {
				nsec = nsec*10 + int(b[i]-'0')
			}
		}
		if i == start {
			return time.Time{}, false
		}
		for n := i - start; n < 9; n++ {
			nsec *= 10
		}
	}
	if i >= len(b) {
		return time.Time{}, false
	}
	offset := 0
	switch b[i] {
	case 'Z':
		i++
	case '+', '-':
		if len(b)-i != 6 || b[i+3] != ':' {
			return time.Time{}, false
		}
		oh, ok1 := d2(b, i+1)
		om, ok2 := d2(b, i+4)
		if !ok1 || !ok2 || oh > 23 || om > 59 {
			return time.Time{}, false
		}
		offset = oh*3600 + om*60
		if b[i] == '-' {
			offset = -offset
		}
		i += 6
	default:
		return time.Time{}, false
	}
	if i != len(b) {
		return time.Time{}, false
	}
	unix := daysSinceEpoch(year, month, day)*86400 + int64(hour*3600+minute*60+sec-offset)
	return time.Unix(unix, int64(nsec)).UTC(), true
}

// parseDate parses a date (YYYY-MM-DD, an OData Edm.Date) as midnight UTC.
func parseDate(b []byte) (time.Time, bool) {
	if len(b) != len("2006-01-02") || b[4] != '-' || b[7] != '-' {
		return time.Time{}, false
	}
	y1, ok1 := d2(b, 0)
	y2, ok2 := d2(b, 2)
	month, ok3 := d2(b, 5)
	day, ok4 := d2(b, 8)
	year := y1*100 + y2
	if !(ok1 && ok2 && ok3 && ok4) || month < 1 || month > 12 || day < 1 || day > daysIn(month, year) {
		return time.Time{}, false
	}
	return time.Unix(daysSinceEpoch(year, month, day)*86400, 0).UTC(), true
}

// d2 parses the two ASCII digits at b[i:].
func d2(b []byte, i int) (int, bool) {
	hi, lo := b[i]-'0', b[i+1]-'0' // a non-digit wraps around above 9
	return int(hi)*10 + int(lo), hi <= 9 && lo <= 9
}

func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// daysSinceEpoch counts days from 1970-01-01 to a date of the proleptic
// Gregorian calendar, year >= 0 (H. Hinnant's days_from_civil).
func daysSinceEpoch(y, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := (y + 400) / 400 // y >= -1: shift so that the division floors
	era--
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return int64(era)*146097 + int64(doe) - 719468
}
