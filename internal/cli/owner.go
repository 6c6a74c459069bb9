package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/erpsync/erpsync/internal/store"
)

// ownership is how a command stands to the table it writes: one table, one
// job (two jobs' reconciles would each soft-delete the rows of the other's
// feed).
type ownership int

const (
	// readsOnly: verify and runs, which need no claim.
	readsOnly ownership = iota
	// checksOwner: reconcile --dry-run, which writes nothing: refused on
	// another job's table, it claims none.
	checksOwner
	// claimsTable: run, backfill, reconcile and schedule (syncFlags sets
	// it).
	claimsTable
)

// claimTable applies the ownership rule at the start of a command, once
// everything it needs has answered and before it writes: the job claims
// its table, or takes it from another job with --take-table. A table of
// another job is a usage error (exit 2, nothing written) in one line that
// says how to move it.
func claimTable(ctx context.Context, s *settings, st *store.Store, job string, log zerolog.Logger) error {
	table := st.Table().Name()
	switch {
	case s.ownership == readsOnly:
		return nil
	case s.TakeTable:
		prev, ok, err := st.TakeTable(ctx, table, job)
		if err != nil {
			return dbError(st, err)
		}
		if ok && prev.Job != job {
			log.Warn().Str("table", table).Str("job", job).Str("previous_job", prev.Job).
				Msg("table taken from another job (--take-table): that job's commands against it are refused from now on")
		}
		return nil
	case s.ownership == checksOwner:
		o, ok, err := st.TableOwner(ctx, table)
		if err == nil && ok && o.Job != job {
			err = &store.OwnedError{Table: table, Owner: o, Job: job}
		}
		return refusal(st, err)
	}
	return claim(ctx, st, job)
}

// claim claims the store's table for job (see store.ClaimTable);
// schedule's ticks call it too, so that a --take-table of another job
// since the start refuses them.
func claim(ctx context.Context, st *store.Store, job string) error {
	return refusal(st, st.ClaimTable(ctx, st.Table().Name(), job))
}

// refusal turns a store's *OwnedError into the command's one line.
func refusal(st *store.Store, err error) error {
	var oe *store.OwnedError
	switch {
	case errors.As(err, &oe):
		return usageError{fmt.Errorf("table %s belongs to job %q; this is job %q (one table, one job: two jobs' reconciles would soft-delete each other's rows; to move the table to job %q, stop job %q and start this command once with --take-table)",
			oe.Table, oe.Owner.Job, oe.Job, oe.Job, oe.Owner.Job)}
	case err != nil:
		return dbError(st, err)
	}
	return nil
}
