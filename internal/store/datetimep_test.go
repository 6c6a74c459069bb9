package store_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/internal/store"
)

// TestDateTimePrecision: a datetime(6) column keeps microseconds, and its
// change events carry them (six digits; a datetime, milliseconds); migrate
// widens datetime to datetime(6) and refuses the way back.
func TestDateTimePrecision(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	e := &entity.Entity{Name: "stamps", Key: []string{"id"}, UpdatedAt: []string{"u"}, Events: true,
		Columns: []entity.Column{{Name: "id", Type: typ(t, "int32")}, {Name: "at", Type: typ(t, "datetime")}, {Name: "at0", Type: typ(t, "datetime(0)")}}}
	migrateEntities(t, s, e)
	precise := clone(e)
	precise.Columns[1].Type = typ(t, "datetime(6)")
	want := pick(s, []string{"ALTER TABLE `stamps` MODIFY COLUMN `at` DATETIME(6) NOT NULL"}, []string{`ALTER TABLE "stamps" ALTER COLUMN "at" TYPE timestamptz(6)`})
	if p := migrateEntities(t, s, precise); !slices.Equal(p.Statements, want) {
		t.Errorf("widen: %q", p.Statements)
	}
	tab, err := store.Compile(precise)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2025, 1, 1, 0, 0, 0, 123456e3, time.UTC)
	at0 := time.Date(2025, 1, 1, 0, 0, 7, 0, time.UTC)
	row := store.Row{Key: "1", Vals: []entity.Value{{I: 1}, {T: at}, {T: at0}}, Version: 1, UpdatedAt: at, Fence: 1, RunID: "r"}
	if err := s.For(tab).InsertRows(ctx, []store.Row{row}); err != nil {
		t.Fatal(err)
	}
	var got time.Time
	if err := s.DB().Raw("SELECT at FROM stamps").Row().Scan(&got); err != nil || !got.Equal(at) {
		t.Errorf("stored %v (%v), want %v", got, err, at)
	}
	var payload string
	if err := s.DB().Raw("SELECT payload FROM erpsync_events WHERE entity = 'stamps'").Row().Scan(&payload); err != nil {
		t.Fatal(err)
	}
	if want := `{"at":"2025-01-01T00:00:00.123456Z","at0":"2025-01-01T00:00:07.000Z","id":1}`; payload != want {
		t.Errorf("event data %s, want %s", payload, want)
	}
	// A repair with the values the row holds changes nothing and records
	// no event: the microseconds compare as stored.
	if done, err := s.For(tab).Repair(ctx, []store.Row{row}); err != nil || done[0] {
		t.Errorf("repair of the row as it is: %v %v, want no change", done, err)
	}
	var events int
	if err := s.DB().Raw("SELECT COUNT(*) FROM erpsync_events WHERE entity = 'stamps'").Row().Scan(&events); err != nil || events != 1 {
		t.Errorf("%d events after a repair that changed nothing (%v), want the insert's alone", events, err)
	}
	var le *store.LossyChangeError
	if _, err := s.PlanEntities(ctx, []*entity.Entity{e}); !errors.As(err, &le) || !strings.Contains(err.Error(), "column at is datetime in the config file, datetime(6) in the database: fraction digits of a second past 3 would be cut") {
		t.Errorf("narrow: %v", err)
	}
}
