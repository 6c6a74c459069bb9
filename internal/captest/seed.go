package captest

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"time"
)

// SeedStart is the LastChangeDateTime of the first seeded records; later
// groups follow at SeedStep intervals.
var SeedStart = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// SeedStep is the time between two groups of seeded records. Its
// milliseconds vary from group to group, so literals in tests carry them.
const SeedStep = 1013 * time.Millisecond

// SeedTie is how many consecutive seeded records share one
// LastChangeDateTime, so that a page boundary can fall inside a tie.
const SeedTie = 4

// Statuses are the values of LifecycleStatus.
var Statuses = []string{"active", "suspended", "cancelled", "expired"}

var products = []string{"GYM-BASIC", "GYM-PLUS", "GYM-PREMIUM", "SPA", "POOL", "CLIMBING"}

// Record is one membership as the service represents it. ValidFrom and
// ValidTo are Edm.Date values (YYYY-MM-DD); an empty ValidTo is null.
// ChangeCounter is 0 for Memberships, which has none.
type Record struct {
	MembershipID       string    `json:"MembershipID"`
	BusinessPartner    string    `json:"BusinessPartner"`
	Product            string    `json:"Product"`
	LifecycleStatus    string    `json:"LifecycleStatus"`
	ValidFrom          string    `json:"ValidFrom"`
	ValidTo            string    `json:"ValidTo"`
	LastChangeDateTime time.Time `json:"LastChangeDateTime"`
	ChangeCounter      int       `json:"ChangeCounter,omitempty"`
}

// Seed returns the n records Start loads for seed, in LastChangeDateTime
// order. The same n and seed give the same records. MembershipIDs
// ("MBR" and 8 digits) are a permutation of 1..n, so their order is not the
// time order; every SeedTie consecutive records share one
// LastChangeDateTime, SeedStart + (i/SeedTie)·SeedStep. ChangeCounter is 0.
func Seed(n int, seed int64) []Record {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x63617074657374))
	ids := rng.Perm(n)
	recs := make([]Record, n)
	day := func(d int) string { return time.Date(2020, 1, 1+d, 0, 0, 0, 0, time.UTC).Format(time.DateOnly) }
	for i := range recs {
		from := rng.IntN(1800)
		r := Record{
			MembershipID:       fmt.Sprintf("MBR%08d", ids[i]+1),
			BusinessPartner:    strconv.Itoa(1000000000 + rng.IntN(90000000)),
			Product:            products[rng.IntN(len(products))],
			ValidFrom:          day(from),
			LastChangeDateTime: SeedStart.Add(time.Duration(i/SeedTie) * SeedStep),
		}
		switch p := rng.IntN(10); {
		case p < 7:
			r.LifecycleStatus = "active"
			if rng.IntN(2) == 0 {
				r.ValidTo = day(from + 365 + rng.IntN(730))
			}
		case p < 8:
			r.LifecycleStatus = "suspended"
		case p < 9:
			r.LifecycleStatus = "cancelled"
			r.ValidTo = day(from + 30 + rng.IntN(700))
		default:
			r.LifecycleStatus = "expired"
			r.ValidTo = day(from + 30 + rng.IntN(700))
		}
		recs[i] = r
	}
	return recs
}

// SeedVersioned returns the n records Start loads into VersionedMemberships
// for seed: Seed's, with ChangeCounter 1 to 5.
func SeedVersioned(n int, seed int64) []Record {
	recs := Seed(n, seed)
	for i := range recs {
		recs[i].ChangeCounter = 1 + i%5
	}
	return recs
}

// seedFile is one CSV file of db/data: its name and a writer of its
// content.
type seedFile struct {
	name  string
	write func(io.Writer) error
}

// seedFiles returns the seed files of opt's records.
func seedFiles(opt Options) []seedFile {
	orders := SeedOrders(opt.Orders, opt.Seed)
	return []seedFile{
		{"erp-Memberships.csv", func(w io.Writer) error { return writeCSV(w, Seed(opt.Records, opt.Seed), false) }},
		{"erp-VersionedMemberships.csv", func(w io.Writer) error { return writeCSV(w, SeedVersioned(opt.VersionedRecords, opt.Seed), true) }},
		{"orders-SalesOrders.csv", func(w io.Writer) error { return writeOrdersCSV(w, orders) }},
		{"orders-SalesOrderItems.csv", func(w io.Writer) error { return writeItemsCSV(w, orders) }},
	}
}

// csv returns the file's content.
func (f seedFile) csv() ([]byte, error) {
	var b bytes.Buffer
	err := f.write(&b)
	return b.Bytes(), err
}

// writeCSV writes recs in the CSV form of CAP's seed files (db/data), with
// ChangeCounter when versioned.
func writeCSV(w io.Writer, recs []Record, versioned bool) error {
	cw := csv.NewWriter(w)
	cw.Comma = ';'
	head := []string{"MembershipID", "BusinessPartner", "Product", "LifecycleStatus", "ValidFrom", "ValidTo", "LastChangeDateTime"}
	if versioned {
		head = append(head, "ChangeCounter")
	}
	if err := cw.Write(head); err != nil {
		return err
	}
	for _, r := range recs {
		row := []string{r.MembershipID, r.BusinessPartner, r.Product, r.LifecycleStatus, r.ValidFrom, r.ValidTo,
			r.LastChangeDateTime.UTC().Format(TimeLayout)}
		if versioned {
			row = append(row, strconv.Itoa(r.ChangeCounter))
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// TimeLayout is how CAP writes an Edm.DateTimeOffset (UTC, milliseconds),
// a form its $filter accepts unquoted as a literal.
const TimeLayout = "2006-01-02T15:04:05.000Z07:00"

// ProjectOrders is the number of orders in the project's own seed files
// (cap/db/data), which a server started by hand loads.
const ProjectOrders = 20
