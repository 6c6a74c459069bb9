package store_test

import (
	"context"
	"testing"

	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/testenv"
)

// A database that has the memberships table keeps it, and gets the
// migrations' changes to it, when it is migrated for a config file's
// entities alone: here 010's key collation, on a database migrated up to
// 009.
func TestMigrateForOtherEntitiesKeepsMemberships(t *testing.T) {
	t.Parallel()
	s, dsn := mysqlStore(t) // 010 changes nothing on PostgreSQL
	ctx := context.Background()
	for _, stmt := range []string{
		"DELETE FROM schema_migrations WHERE version = 10",
		"ALTER TABLE memberships MODIFY erp_id VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL",
	} {
		if err := s.DB().Exec(stmt).Error; err != nil {
			t.Fatal(err)
		}
	}
	res, err := store.MigrateWith(ctx, dsn, nil, []*entity.Entity{customers(t)})
	if err != nil || len(res.Applied) != 1 || res.Applied[0].Version != 10 {
		t.Fatalf("migrate: %+v, %v; want 010 applied", res, err)
	}
	var coll string
	if err := s.DB().Raw("SELECT COLLATION_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'memberships' AND COLUMN_NAME = 'erp_id'").Scan(&coll).Error; err != nil {
		t.Fatal(err)
	}
	if coll != "utf8mb4_nopad_bin" {
		t.Errorf("memberships.erp_id after migrate for customers: %q, want utf8mb4_nopad_bin", coll)
	}
}

// A migration whose statements ran but whose row in schema_migrations was
// not written (a crash between the two) runs again and is recorded: on
// MySQL, its ADD COLUMN and CREATE INDEX find their change in place and
// pass; on PostgreSQL they say IF NOT EXISTS.
func TestMigrateAgainAfterACrashBeforeItsRow(t *testing.T) {
	t.Parallel()
	s, dsn := testenv.MigratedStore(t)
	if err := s.DB().Exec("DELETE FROM schema_migrations WHERE version >= 11").Error; err != nil {
		t.Fatal(err)
	}
	res, err := store.Migrate(context.Background(), dsn)
	if err != nil || len(res.Applied) != 3 || res.Applied[0].Version != 11 || res.Applied[1].Version != 12 || res.Applied[2].Version != 13 {
		t.Fatalf("migrate: %+v, %v; want 011, 012 and 013 applied", res, err)
	}
	if err := s.CheckSchema(context.Background()); err != nil {
		t.Fatal(err)
	}
}
