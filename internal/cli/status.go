package cli

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/internal/store"
)

// printStatus is `runs --status`: one line per entity and job (those of
// --config, or the built-in memberships under --job): its last run and
// last success, its lag (how far its checkpoint is behind the database's
// clock), its quarantined rows and its pending change events.
func printStatus(ctx context.Context, s *settings, st *store.Store, stdout io.Writer, lostAfter time.Duration) error {
	targets := s.targets
	if targets == nil {
		ent := entity.Memberships()
		targets = []*target{{ent: ent, src: ent.Sources[0], job: s.Job, table: store.Memberships()}}
	}
	events, err := st.Outbox().Stats(ctx)
	if err != nil {
		return dbError(st, err)
	}
	pending := map[string]int64{}
	for _, e := range events.Entities {
		pending[e.Entity] = e.Pending
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ENTITY\tJOB\tLAST RUN\tLAST SUCCESS\tLAG\tQUARANTINED\tPENDING EVENTS")
	for _, t := range targets {
		runs, err := st.Runs(ctx, t.job, 1000)
		if err != nil {
			return dbError(st, err)
		}
		if err := showLost(ctx, st, runs[:min(1, len(runs))], lostAfter); err != nil {
			return err
		}
		last, success := "-", "never"
		if len(runs) > 0 {
			last = runs[0].Status + " " + runs[0].StartedAt.UTC().Format(time.RFC3339)
		}
		for _, r := range runs {
			if r.Status == store.StatusSucceeded && r.FinishedAt != nil {
				success = r.FinishedAt.UTC().Format(time.RFC3339)
				break
			}
		}
		lag := "-"
		if cp, ok, err := st.Checkpoint(ctx, t.job); err != nil {
			return dbError(st, err)
		} else if ok && !cp.Position.Equal(store.CheckpointStart) {
			lag = max(events.Now.Sub(cp.Position), 0).Round(time.Second).String()
		}
		q, err := st.For(t.table).QuarantinedRows(ctx)
		if err != nil {
			return dbError(st, err)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\n", t.ent.Name, t.job, last, success, lag, q, pending[t.ent.Name])
	}
	return tw.Flush()
}
