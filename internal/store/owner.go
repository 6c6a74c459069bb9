package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// MembershipsTable is the table the sync writes, as sync_table_owners
// names it.
const MembershipsTable = "memberships"

// ErrOwned is matched (errors.Is) by the *OwnedError of ClaimTable.
var ErrOwned = errors.New("store: table belongs to another job")

// Owner is the job a table belongs to, and since when.
type Owner struct {
	Job       string
	ClaimedAt time.Time
}

// OwnedError is ClaimTable's refusal: Table belongs to Owner.Job, not to
// Job.
type OwnedError struct {
	Table string
	Owner Owner
	Job   string
}

func (e *OwnedError) Error() string {
	return fmt.Sprintf("store: table %s belongs to job %q (since %s), not to job %q",
		e.Table, e.Owner.Job, e.Owner.ClaimedAt.Format(time.RFC3339), e.Job)
}

// Is reports whether target is ErrOwned.
func (e *OwnedError) Is(target error) bool { return target == ErrOwned }

// ClaimTable makes job the owner of table when the table has none, and
// returns an *OwnedError when another job owns it. One table, one job: two
// jobs writing one table would each reconcile it against their own feed
// and soft-delete the other's rows. Several instances may claim at once:
// the first insert wins, and each reads back which job that was.
func (s *Store) ClaimTable(ctx context.Context, table, job string) error {
	// INSERT IGNORE takes only a shared lock on a row that is there, so
	// claims at once queue rather than deadlock (an upsert's exclusive
	// locks would). The job name fits: the syncer takes 150 characters at
	// most.
	// PostgreSQL's ON CONFLICT DO NOTHING waits for a claim in flight and
	// then does nothing: no deadlock either.
	query := "INSERT IGNORE INTO sync_table_owners (table_name, job, claimed_at) VALUES (?, ?, UTC_TIMESTAMP(3))"
	if s.d == Postgres {
		query = "INSERT INTO sync_table_owners (table_name, job, claimed_at) VALUES (?, ?, CURRENT_TIMESTAMP(3)) ON CONFLICT DO NOTHING"
	}
	err := s.db.WithContext(ctx).Exec(query, table, job).Error
	if err != nil {
		return fmt.Errorf("claim table %s: %w", table, err)
	}
	o, ok, err := s.TableOwner(ctx, table)
	switch {
	case err != nil:
		return err
	case !ok:
		return fmt.Errorf("claim table %s: no owner after the claim (was it handed back at once?)", table)
	case o.Job != job:
		return &OwnedError{Table: table, Owner: o, Job: job}
	}
	return nil
}

// TakeTable makes job the owner of table, whichever job owned it, and
// returns the previous owner (ok false when the table had none). It is the
// deliberate hand-over; the previous owner's commands are refused from
// then on.
func (s *Store) TakeTable(ctx context.Context, table, job string) (prev Owner, ok bool, err error) {
	prev, ok, err = s.TableOwner(ctx, table)
	if err != nil {
		return Owner{}, false, err
	}
	query := `INSERT INTO sync_table_owners (table_name, job, claimed_at) VALUES (?, ?, UTC_TIMESTAMP(3))
 ON DUPLICATE KEY UPDATE job = VALUES(job), claimed_at = VALUES(claimed_at)`
	if s.d == Postgres {
		query = `INSERT INTO sync_table_owners (table_name, job, claimed_at) VALUES (?, ?, CURRENT_TIMESTAMP(3))
 ON CONFLICT (table_name) DO UPDATE SET job = EXCLUDED.job, claimed_at = EXCLUDED.claimed_at`
	}
	_, err = s.execRetrying(ctx, query, table, job)
	if err != nil {
		return Owner{}, false, fmt.Errorf("take table %s: %w", table, err)
	}
	return prev, ok, nil
}

// TableOwner reads the owner of table; ok is false when it has none.
func (s *Store) TableOwner(ctx context.Context, table string) (o Owner, ok bool, err error) {
	row := s.db.WithContext(ctx).Raw("SELECT job, claimed_at FROM sync_table_owners WHERE table_name = ?", table).Row()
	err = row.Scan(&o.Job, &o.ClaimedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return Owner{}, false, nil
	}
	if err != nil {
		return Owner{}, false, fmt.Errorf("read owner of table %s: %w", table, err)
	}
	return o, true, nil
}
