package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/syncer"
	"github.com/erpsync/erpsync/lock"
)

// cmdState is `erpsync state`: each job's checkpoint (show, the default),
// or `state reset --yes`, which moves it back to the start so that the
// next run reads the whole feed again: a full refresh of the entities it
// selects (--config, --entity).
func cmdState(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	reset := len(args) > 0 && args[0] == "reset"
	if reset || (len(args) > 0 && args[0] == "show") {
		args = args[1:]
	}
	var s settings
	var yes bool
	fs := newFlagSet("erpsync state", stderr)
	s.databaseFlags(fs)
	s.redisFlags(fs)
	nameVar(fs, &s.Job, "job", "membership-sync", "job name: its lock, checkpoint and run history")
	s.entityFlags(fs)
	fs.BoolVar(&yes, "yes", false, "state reset: confirm it (the next run of each job reads the whole feed again)")
	s.logFlags(fs)
	if err := s.parseEntities(fs, args); err != nil {
		return err
	}
	log, err := newLogger(&s, stderr)
	if err != nil {
		return err
	}
	jobs := []string{s.Job}
	if s.targets != nil {
		jobs = jobs[:0]
		for _, t := range s.targets {
			jobs = append(jobs, t.job)
		}
	}
	if reset && !yes {
		return usageError{fmt.Errorf("state reset moves the checkpoint of job %v back to the start: its next run reads the whole feed again (a full refresh; rows are rewritten only where they differ); add --yes to do it", jobs)}
	}
	st, err := s.openStore(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	if reset {
		if err := resetState(ctx, &s, st, jobs); err != nil {
			return err
		}
		for _, j := range jobs {
			log.Info().Str("job", j).Msg("checkpoint reset")
			fmt.Fprintf(stdout, "job %s: checkpoint reset; the next run reads the whole feed\n", j)
		}
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tCHECKPOINT\tSAVED\tBY RUN")
	for _, j := range jobs {
		cp, ok, err := st.Checkpoint(ctx, j)
		switch {
		case err != nil:
			return dbError(st, err)
		case !ok || cp.Position.Equal(store.CheckpointStart):
			fmt.Fprintf(tw, "%s\tnone: the next run reads the whole feed\t-\t-\n", j)
		default:
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", j, cp.Position.UTC().Format(time.RFC3339Nano), cp.Updated.UTC().Format(time.RFC3339), cp.RunID)
		}
	}
	return tw.Flush()
}

// resetState resets the jobs' checkpoints, each under its job lock, so
// that no run of the job is under way: a run holding it would save its
// own position over the reset. The lock's fencing token, newer than any
// run's before, lets the reset through the checkpoint's fence.
func resetState(ctx context.Context, s *settings, st *store.Store, jobs []string) error {
	ctx, stop := withSignals(ctx)
	defer stop()
	_, locks, closers, err := connectRedis(ctx, s, &lock.Options{Prefix: s.LockPrefix})
	for _, c := range closers {
		defer c.Close()
	}
	if err != nil {
		return err
	}
	for _, j := range jobs {
		l, err := locks.Obtain(ctx, syncer.JobLockKey(j), 30*time.Second, nil)
		if errors.Is(err, lock.ErrNotObtained) {
			return depError{fmt.Errorf("job %s is running (another instance holds its job lock); nothing reset: run state reset again when it has finished", j)}
		}
		if err != nil {
			return depError{fmt.Errorf("job lock of %s: %w", j, err)}
		}
		err = st.ResetCheckpoint(ctx, j, l.Fence(), "state-reset")
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
		_ = l.Release(rctx)
		cancel()
		if err != nil {
			return fmt.Errorf("state reset: %w", err)
		}
	}
	return nil
}
