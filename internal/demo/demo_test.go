package demo_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/erpsync/erpsync/internal/cli"
	"github.com/erpsync/erpsync/internal/demo"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/testenv"
)

// check asserts what every demo must show: the database matches the feed,
// run #2 was skipped while run #1 held the job lock, every record was
// inserted exactly once over all instances, no instance failed, and the
// webhook took one event for each row inserted or updated.
func check(t *testing.T, res *demo.Result, out string) {
	t.Helper()
	if res.Verify == nil || !res.Verify.OK() {
		t.Fatalf("verify: %+v\n%s", res.Verify, out)
	}
	if !res.OK() {
		t.Errorf("the result is not OK\n%s", out)
	}
	var inserted, updated int64
	for _, in := range res.Instances {
		if in.Err != nil || in.Report == nil {
			t.Errorf("%s: report %v, error %v", in.Name, in.Report, in.Err)
			continue
		}
		want := store.StatusSucceeded
		if in.Name == "run #2" {
			want = store.StatusSkipped
		}
		if in.Report.Status != want {
			t.Errorf("%s: status %s, want %s", in.Name, in.Report.Status, want)
		}
		inserted += in.Report.Inserted
		updated += in.Report.Updated
	}
	if inserted != res.Verify.Rows || res.Verify.Rows != res.Verify.FeedRecords {
		t.Errorf("inserted %d over all instances, %d rows, %d records in the feed", inserted, res.Verify.Rows, res.Verify.FeedRecords)
	}
	// The webhook took one event, signed, for each row inserted or
	// updated, an insert and an update among them.
	ev := res.Events
	if ev == nil || ev.Err != nil || ev.BadSignatures != 0 || ev.Posts == 0 || int64(ev.Delivered) != ev.Inserted+ev.Updated ||
		ev.Inserted != inserted || ev.Updated != updated || updated == 0 || ev.Insert == nil || ev.Update == nil || !ev.OK() {
		t.Errorf("events: %+v, want one for each of the %d rows inserted and the rows updated", ev, inserted)
	}
	if res.Changed != 200 {
		t.Errorf("changed %d records, want 200", res.Changed)
	}
	for _, s := range []string{"run #2 skipped: another instance held the job lock", "OK: the database holds exactly",
		"the webhook took one change event for each row inserted or updated", "  insert {\"erp_id\":", "  update {\"erp_id\":"} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
	if t.Failed() {
		t.Log(out)
	}
}

func TestDemoOnEmbeddedServers(t *testing.T) {
	var out bytes.Buffer
	res, err := demo.Run(context.Background(), demo.Config{Records: 3000}, &out)
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	demo.Print(&out, res)
	if !res.Embedded {
		t.Error("Embedded false without a DSN or Redis address")
	}
	check(t, res, out.String())
}

// TestDemoOnRealServers runs the demo on the tests' Redis and each
// database, MariaDB/MySQL and PostgreSQL, in a database of its own, then
// shows that it refuses to run again on a database that holds memberships.
// The package is not in the PostgreSQL side of make test's matrix (its
// other tests run the embedded MySQL): both databases are subtests here.
func TestDemoOnRealServers(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the test MySQL, PostgreSQL and Redis")
	}
	for _, db := range []struct {
		name string
		dsn  func(testing.TB) string
		set  func(*demo.Config, string)
	}{
		{"mysql", testenv.MySQLDSN, func(c *demo.Config, dsn string) { c.MySQLDSN = dsn }},
		{"postgres", testenv.PostgresDSN, func(c *demo.Config, dsn string) { c.PostgresDSN = dsn }},
	} {
		t.Run(db.name, func(t *testing.T) {
			dsn := db.dsn(t)
			cfg := demo.Config{Records: 3000, RedisAddr: testenv.RedisAddr()}
			db.set(&cfg, dsn)
			var out bytes.Buffer
			res, err := demo.Run(context.Background(), cfg, &out)
			if err != nil {
				t.Fatalf("demo: %v\n%s", err, out.String())
			}
			demo.Print(&out, res)
			if res.Embedded {
				t.Error("Embedded true with a DSN and a Redis address")
			}
			check(t, res, out.String())
			if got := testenv.DatabaseName(t, dsn); res.Database != got || !strings.Contains(out.String(), "database "+got) {
				t.Errorf("the output names database %q, want %q:\n%s", res.Database, got, out.String())
			}

			var again bytes.Buffer
			code := cli.Main(context.Background(), []string{"demo", "--records", "10", testenv.DSNFlag(dsn), dsn, "--redis-addr", testenv.RedisAddr()},
				&again, &again, demo.Command())
			if code != cli.ExitUsage || !strings.Contains(again.String(), "memberships; the demo needs a database of its own") {
				t.Errorf("demo on a database with memberships: exit %d, want %d; output:\n%s", code, cli.ExitUsage, again.String())
			}
		})
	}
}

func TestUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"demo", "-h"}, cli.ExitOK, "--mysql-dsn"},
		{[]string{"demo", "--records", "-1"}, cli.ExitUsage, "records -1"},
		{[]string{"demo", "--log-level", "loud"}, cli.ExitUsage, "--log-level"},
		{[]string{"demo", "--records", "10", "extra"}, cli.ExitUsage, `unexpected argument "extra"`},
		{[]string{"demo", "--mysql-dsn", "nodb"}, cli.ExitUsage, "mysql dsn"},
		{[]string{"demo", "-h"}, cli.ExitOK, "--postgres-dsn"},
		{[]string{"demo", "--postgres-dsn", "root@tcp(127.0.0.1:3306)/x"}, cli.ExitUsage, "want a postgres:// URL"},
		{[]string{"demo", "--mysql-dsn", "postgres://root@127.0.0.1/x"}, cli.ExitUsage, "that is a PostgreSQL DSN: give it as --postgres-dsn"},
		{[]string{"demo", "--mysql-dsn", "root@tcp(127.0.0.1:3306)/x", "--postgres-dsn", "postgres://root@127.0.0.1/x"}, cli.ExitUsage,
			"--mysql-dsn and --postgres-dsn both given"},
	} {
		var out bytes.Buffer
		code := cli.Main(context.Background(), c.args, &out, &out, demo.Command())
		if code != c.code || !strings.Contains(out.String(), c.says) {
			t.Errorf("%v: exit %d, want %d; output lacks %q:\n%s", c.args, code, c.code, c.says, out.String())
		}
	}
	t.Run("environment", func(t *testing.T) {
		t.Setenv("ERPSYNC_RECORDS", "many")
		t.Setenv("ERPSYNC_MYSQL_DSN", "not read")
		t.Setenv("ERPSYNC_POSTGRES_DSN", "postgres://not read")
		var out bytes.Buffer
		code := cli.Main(context.Background(), []string{"demo"}, &out, &out, demo.Command())
		if code != cli.ExitUsage || !strings.Contains(out.String(), `ERPSYNC_RECORDS="many"`) || strings.Contains(out.String(), "not read") {
			t.Errorf("exit %d, want %d; output:\n%s", code, cli.ExitUsage, out.String())
		}
	})
	var help bytes.Buffer
	cli.Main(context.Background(), []string{"help"}, &help, &help, demo.Command())
	if !strings.Contains(help.String(), "demo ") {
		t.Errorf("erpsync help does not list demo:\n%s", help.String())
	}
}

// TestConcurrentMigrateOnEmbeddedMySQL: store.Migrate serialises on
// GET_LOCK, which must not wait inside the embedded server's turn.
func TestConcurrentMigrateOnEmbeddedMySQL(t *testing.T) {
	m := demo.StartMySQLForTest(t)
	ctx := context.Background()
	dsn := m.DSN("erpsync_migrate")
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = store.Migrate(ctx, dsn)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, dsn, &store.Options{NoLoadData: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.CheckSchema(ctx); err != nil {
		t.Fatal(err)
	}
}
