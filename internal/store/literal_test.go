package store_test

import (
	"context"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/testenv"
)

// Values written into statements as literals come back byte for byte,
// whatever the session's sql_mode and character set: quotes, backslashes,
// NUL, control characters, multi-byte text, and the bytes that would end or
// escape a quoted literal in one mode but not the other.
func TestLiteralValuesRoundTrip(t *testing.T) {
	t.Parallel()
	hostile := []string{
		"plain", "", "it's", "''", `back\slash`, `\'`, `\`, "'; DROP TABLE memberships; --",
		"nul\x00byte", "\x1a", "new\nline\r\t", "ünïcødé", "日本語", "emoji 🎉", "\u00a0", `"dq"`, "%_",
		"\u00c2\\", // the byte a GBK lead byte would swallow, after a multi-byte one
	}
	base, dsn := testenv.MigratedStore(t)
	modes := []struct{ name, params string }{
		{"default", ""},
		{"NO_BACKSLASH_ESCAPES", "&sql_mode=" + url.QueryEscape("'NO_BACKSLASH_ESCAPES,STRICT_TRANS_TABLES'")},
		{"ANSI_QUOTES", "&sql_mode=" + url.QueryEscape("'ANSI_QUOTES,STRICT_TRANS_TABLES'")},
		{"latin1 connection", "&charset=latin1"},
	}
	if base.Dialect() == store.Postgres {
		// PostgreSQL has no such modes, and its text holds no NUL: the
		// sync quarantines a record with one (erp.SplitUnstorableIn).
		modes = modes[:1]
		hostile = slices.DeleteFunc(hostile, func(s string) bool { return strings.ContainsRune(s, 0) })
		// And its inserts are a COPY, whose text format reads a backslash,
		// a tab and a line's end, ends at a line of \. and takes \N for
		// NULL.
		hostile = append(hostile, `E'\x41'`, "$$dollar$$", "U&'\0041'", `\N`, `\.`, "\\.\n", "a\tb\\t\r\n", `\\`)
	}
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			ctx := context.Background()
			st, err := store.Open(ctx, dsn+mode.params, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			prefix := strings.ReplaceAll(mode.name, " ", "-") + ":"
			at := time.Date(2025, 3, 4, 5, 6, 7, 123456789, time.FixedZone("x", 9*3600))
			var ms []store.Membership
			for i, s := range hostile {
				id := prefix + s
				if len(id) > 64 {
					id = id[:64]
				}
				ms = append(ms, store.Membership{ErpID: id, MemberID: s, ProductCode: s, Status: "active",
					StartsAt: at, Version: int64(i + 1), UpdatedAt: at.Add(time.Duration(i) * time.Millisecond), Fence: 7})
			}
			if err := st.Insert(ctx, ms); err != nil {
				t.Fatalf("insert: %v", err)
			}
			ids := make([]string, len(ms))
			for i, m := range ms {
				ids[i] = m.ErpID
			}
			cur, err := st.Versions(ctx, ids)
			if err != nil {
				t.Fatal(err)
			}
			// A latin1 session reads back what latin1 can show; the rows
			// themselves are checked through a utf8mb4 session below.
			latin1 := strings.Contains(mode.params, "latin1")
			if len(cur) != len(ms) && !latin1 {
				t.Fatalf("Versions found %d of %d rows", len(cur), len(ms))
			}
			for _, m := range ms {
				var member, product string
				var version int64
				var starts, updated time.Time
				err := base.DB().Raw("SELECT member_id, product_code, erp_version, starts_at, erp_updated_at FROM memberships WHERE erp_id = ?", m.ErpID).
					Row().Scan(&member, &product, &version, &starts, &updated)
				if err != nil {
					t.Fatalf("%q: %v", m.ErpID, err)
				}
				if member != m.MemberID || product != m.ProductCode || version != m.Version {
					t.Errorf("%q came back as member %q product %q version %d", m.MemberID, member, product, version)
				}
				if c, ok := cur[m.ErpID]; !latin1 && (!ok || c.Version != m.Version) {
					t.Errorf("%q: Versions read %+v", m.ErpID, c)
				}
				if !starts.Equal(at.Truncate(time.Millisecond)) || !updated.Equal(m.UpdatedAt.Truncate(time.Millisecond)) {
					t.Errorf("%q: times came back as %v and %v, want %v and %v", m.ErpID, starts, updated, at, m.UpdatedAt)
				}
			}
			// The guarded upsert takes the same literals.
			for i := range ms {
				ms[i].Version += 100
			}
			if err := st.Upsert(ctx, ms); err != nil {
				t.Fatalf("upsert: %v", err)
			}
			if cur, err = st.Versions(ctx, ids); err != nil || cur[ids[0]].Version != ms[0].Version {
				t.Fatalf("after upsert: %v %+v", err, cur[ids[0]])
			}
		})
	}
}

// A time the column cannot hold is an error of the statement, not a
// corrupt row.
func TestLiteralRefusesYearsOutOfRange(t *testing.T) {
	t.Parallel()
	st := setup(t)
	y10k := m("y10k", 1, 1)
	y10k.StartsAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	err := st.Insert(context.Background(), []store.Membership{y10k})
	if err == nil || !strings.Contains(err.Error(), "year") {
		t.Fatalf("insert of year 10000: %v", err)
	}
}

// InsertIgnore, the bench's ceiling, writes the absent rows and leaves the
// present ones alone.
func TestInsertIgnoreSkipsPresentRows(t *testing.T) {
	t.Parallel()
	st := setup(t)
	ctx := context.Background()
	if err := st.Insert(ctx, []store.Membership{m("a", 1, 1)}); err != nil {
		t.Fatal(err)
	}
	if err := st.InsertIgnore(ctx, []store.Membership{m("a", 2, 1), m("b", 1, 1)}); err != nil {
		t.Fatal(err)
	}
	v, err := st.Versions(ctx, []string{"a", "b"})
	if err != nil || v["a"].Version != 1 || v["b"].Version != 1 {
		t.Fatalf("after InsertIgnore: %v %v; want a left at version 1 and b inserted", v, err)
	}
}
