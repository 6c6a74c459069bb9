package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/testenv"
)

// TestGuardRulesAgree holds each guard rule's SQL and its Go evaluation
// equal, on MySQL and on PostgreSQL: for random stored rows and incoming
// copies, drawn from small domains so that ties (equal versions, equal
// tokens, updated_at equal to the millisecond or below it) come often,
// the database's answer to the rule's WHERE is the answer the sync
// decides with in Go before it writes.
func TestGuardRulesAgree(t *testing.T) {
	for _, db := range []struct {
		name string
		dsn  func(testing.TB) string
	}{{"mysql", testenv.MySQLDSN}, {"postgres", testenv.PostgresDSN}} {
		t.Run(db.name, func(t *testing.T) {
			ctx := context.Background()
			dsn := db.dsn(t)
			if store.DialectOf(dsn) == store.Postgres {
				testenv.CreatePostgresDatabase(t, dsn)
			} else {
				testenv.CreateDatabase(t, dsn)
			}
			st, err := store.Open(ctx, dsn, &store.Options{MaxOpenConns: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			agree(t, st, rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 35)), 400)
		})
	}
}

// guardCase is a stored row and an incoming copy.
type guardCase struct {
	cur            store.Current
	version, fence int64
	updatedAt      time.Time
}

func agree(t *testing.T, st *store.Store, rng *rand.Rand, n int) {
	ctx := context.Background()
	ts := "DATETIME(3)"
	if st.Dialect() == store.Postgres {
		ts = "timestamptz(3)"
	}
	if err := st.DB().Exec("CREATE TABLE guard_probe (id INT PRIMARY KEY, erp_version BIGINT NOT NULL, fence_token BIGINT NOT NULL, erp_updated_at " + ts +
		" NOT NULL, quarantined_version BIGINT NULL, quarantined_updated_at " + ts + " NULL, deleted_at " + ts + " NULL)").Error; err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	when := func() time.Time {
		// Whole milliseconds apart, and copies below the millisecond: the
		// row holds milliseconds, a copy may carry microseconds.
		return base.Add(time.Duration(rng.IntN(3))*time.Millisecond + time.Duration(rng.IntN(2))*300*time.Microsecond)
	}
	cases := make([]guardCase, n)
	for i := range cases {
		c := guardCase{cur: store.Current{Version: int64(rng.IntN(4)), Fence: int64(rng.IntN(3)), Deleted: rng.IntN(3) == 0,
			UpdatedAt: store.Millis(when()), Mark: int64(rng.IntN(4))},
			version: int64(rng.IntN(4)), fence: int64(rng.IntN(3)), updatedAt: when()}
		if rng.IntN(3) == 0 {
			c.cur.Mark = 0
		} else if rng.IntN(2) == 0 { // the invalid copy's updated_at, when it had one
			c.cur.MarkAt = store.Millis(when())
		}
		cases[i] = c
		mark, deleted := "NULL", "NULL"
		if c.cur.Mark > 0 {
			mark = fmt.Sprint(c.cur.Mark)
		}
		var markAt *time.Time
		if !c.cur.MarkAt.IsZero() {
			markAt = &c.cur.MarkAt
		}
		if c.cur.Deleted {
			deleted = "'2026-03-02 00:00:00'"
		}
		if err := st.DB().Exec(fmt.Sprintf("INSERT INTO guard_probe VALUES (%d, %d, %d, ?, %s, ?, %s)", i, c.cur.Version, c.cur.Fence, mark, deleted), c.cur.UpdatedAt, markAt).Error; err != nil {
			t.Fatal(err)
		}
	}
	rules := store.GuardRules()
	for i, c := range cases {
		cols := make([]string, len(rules))
		for j, r := range rules {
			where, err := r.SQL(st.Dialect(), c.version, c.fence, c.updatedAt)
			if err != nil {
				t.Fatal(err)
			}
			cols[j] = "CASE WHEN " + where + " THEN 1 ELSE 0 END"
		}
		got := make([]int, len(rules))
		dest := make([]any, len(rules))
		for j := range got {
			dest[j] = &got[j]
		}
		if err := st.DB().WithContext(ctx).Raw(fmt.Sprintf("SELECT %s FROM guard_probe WHERE id = %d", strings.Join(cols, ", "), i)).Row().Scan(dest...); err != nil {
			t.Fatal(err)
		}
		for j, r := range rules {
			if want := r.Holds(c.cur, c.version, c.fence, c.updatedAt); (got[j] == 1) != want {
				t.Errorf("%s: rule %q: the database says %v, Go says %v, for row %+v and copy version %d fence %d updated_at %s",
					st.Dialect(), r.Name, got[j] == 1, want, c.cur, c.version, c.fence, c.updatedAt.Format(time.RFC3339Nano))
			}
		}
	}
}
