package store_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"testing"

	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/testenv"
)

const childDSN = "ERPSYNC_TEST_MIGRATE_CHILD_DSN"

// processEntities are the entities the processes of
// TestMigrateProcesses migrate.
func processEntities(t testing.TB) []*entity.Entity {
	a, b := customers(t), customers(t)
	b.Name, b.Table = "suppliers", "suppliers"
	return []*entity.Entity{entity.Memberships(), a, b}
}

// TestMigrateChild is one process of TestMigrateProcesses: it migrates
// the database of childDSN, then the entities, and prints how many of
// the entities' statements it ran. It does nothing in a plain test run.
func TestMigrateChild(t *testing.T) {
	dsn := os.Getenv(childDSN)
	if dsn == "" {
		t.Skip("a child of TestMigrateProcesses")
	}
	ctx := context.Background()
	if _, err := store.Migrate(ctx, dsn); err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p, err := s.PlanEntities(ctx, processEntities(t))
	if err != nil {
		t.Fatal(err)
	}
	applied, err := s.ApplyEntities(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("applied %d statements\n", len(applied.Statements))
}

// TestMigrateProcesses starts several OS processes that migrate one new
// database and the same entities at once: each succeeds, each table is
// created once, and the database ends as one migrate makes it.
func TestMigrateProcesses(t *testing.T) {
	if os.Getenv(childDSN) != "" {
		t.Skip("in a child")
	}
	t.Parallel()
	dsn := testDSN(t)
	const processes = 4
	cmds := make([]*exec.Cmd, processes)
	outs := make([][]byte, processes)
	errs := make(chan error, processes)
	for i := range cmds {
		cmds[i] = exec.Command(os.Args[0], "-test.run=^TestMigrateChild$", "-test.count=1", "-test.v")
		cmds[i].Env = append(os.Environ(), childDSN+"="+dsn)
	}
	for i, c := range cmds {
		go func() {
			var err error
			outs[i], err = c.CombinedOutput()
			errs <- err
		}()
	}
	for range processes {
		if err := <-errs; err != nil {
			t.Errorf("a migrating process: %v", err)
		}
	}
	ran := regexp.MustCompile(`applied (\d+) statements`)
	total := 0
	for i, out := range outs {
		m := ran.FindSubmatch(out)
		if m == nil {
			t.Fatalf("process %d:\n%s", i, out)
		}
		n, _ := strconv.Atoi(string(m[1]))
		total += n
	}
	want := 2 // one CREATE TABLE a new entity
	if testenv.Postgres() {
		want = 6 // and its index and its json column's comment
	}
	if total != want {
		t.Fatalf("%d statements run in all, want %d", total, want)
	}
	s, err := store.Open(context.Background(), dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	assertMatches(t, s, processEntities(t)...)
	var n int64
	s.DB().Raw("SELECT COUNT(*) FROM erpsync_entities").Scan(&n)
	if n != 3 {
		t.Fatalf("%d recorded entities, want 3", n)
	}
}
