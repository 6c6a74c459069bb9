package bench

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/erpsync/erpsync/erpmock"
)

// Slow is the backfill, and the verify and reconcile scans, against a slow
// ERP (erpmock with SlowLatency a page), with one fetcher against
// Config.SlowFetchers (SlowFetchers by default).
const Slow = "slow"

// The slow ERP's measurement.
const (
	SlowLatency   = 40 * time.Millisecond
	SlowFetchers  = 8
	GoalSlowRatio = 6.0 // backfill at SlowFetchers / at 1, against the slow ERP
	// GoalSlowOfFast is the backfill against the slow ERP at
	// Config.SlowFetchers over the same backfill against an ERP without
	// latency (the row "backfill"): where the fetchers stop bounding it.
	GoalSlowOfFast = 0.8
)

// SlowResult is the backfill and the verify and reconcile scans against
// the slow ERP at one fetcher and at SlowFetchers, each the best of its
// rounds.
type SlowResult struct {
	Latency  string  `json:"latency"`
	Fetchers int     `json:"fetchers"`
	One      *Result `json:"backfill_one"`
	Many     *Result `json:"backfill_many"`
	// VerifyOne and VerifyMany are `erpsync verify` over the table the
	// backfill left, in records of the feed a second.
	VerifyOne  *Result `json:"verify_one,omitempty"`
	VerifyMany *Result `json:"verify_many,omitempty"`
	// ReconcileOne and ReconcileMany are `erpsync reconcile` of that
	// table, which finds nothing to do, in records of the feed a second.
	ReconcileOne  *Result `json:"reconcile_one,omitempty"`
	ReconcileMany *Result `json:"reconcile_many,omitempty"`
	// Rounds are many/one of the backfill, round by round;
	// VerifyRounds and ReconcileRounds those of the scans.
	Rounds          []float64 `json:"rounds"`
	VerifyRounds    []float64 `json:"verify_rounds,omitempty"`
	ReconcileRounds []float64 `json:"reconcile_rounds,omitempty"`
}

// slow is the slow ERP of a bench run: an erpmock with SlowLatency.
type slow struct {
	mock      *erpmock.Mock
	url       string
	close     func()
	rows, sum int64 // the truth's count and sum of versions
}

func (b *bench) startSlow(n int) (*slow, error) {
	m := erpmock.New(erpmock.Options{Records: n, Seed: 3, Faults: erpmock.Faults{Latency: SlowLatency}})
	srv, url, err := serve(m)
	if err != nil {
		return nil, err
	}
	s := &slow{mock: m, url: url, close: func() { srv.Close() }}
	for _, r := range m.Truth() {
		s.rows++
		s.sum += r.Version
	}
	return s, nil
}

// slowRound backfills the slow ERP's feed at one fetcher and at
// SlowFetchers (the order alternates with the round), each into an empty
// table that it then checks against the feed, and verifies and
// reconciles the table at both (the table checked again after the
// reconcile).
func (b *bench) slowRound(ctx context.Context, s *slow, round int, out **SlowResult) error {
	if *out == nil {
		*out = &SlowResult{Latency: SlowLatency.String(), Fetchers: b.cfg.SlowFetchers}
	}
	res := *out
	order := []int{1, b.cfg.SlowFetchers}
	if round%2 == 1 {
		order = []int{b.cfg.SlowFetchers, 1}
	}
	var one, many [3]float64 // backfill, verify, reconcile
	for _, n := range order {
		t := b.memberships(s.url)
		t.args = []string{"--fetchers", strconv.Itoa(n)}
		r, err := b.backfill(ctx, fmt.Sprintf("backfill, ERP %s a page, --fetchers %d", SlowLatency, n), t, true)
		if err != nil {
			return err
		}
		if err := b.checkSlow(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", r.Name, err)
		}
		v, err := b.scan(ctx, s, "verify", n)
		if err != nil {
			return err
		}
		rc, err := b.scan(ctx, s, "reconcile", n)
		if err != nil {
			return err
		}
		if err := b.checkSlow(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", rc.Name, err)
		}
		if n == 1 {
			res.One, res.VerifyOne, res.ReconcileOne = best(res.One, r), best(res.VerifyOne, v), best(res.ReconcileOne, rc)
			one = [3]float64{r.PerSecond, v.PerSecond, rc.PerSecond}
		} else {
			res.Many, res.VerifyMany, res.ReconcileMany = best(res.Many, r), best(res.VerifyMany, v), best(res.ReconcileMany, rc)
			many = [3]float64{r.PerSecond, v.PerSecond, rc.PerSecond}
		}
	}
	for i, rounds := range []*[]float64{&res.Rounds, &res.VerifyRounds, &res.ReconcileRounds} {
		if one[i] > 0 {
			*rounds = append(*rounds, many[i]/one[i])
		}
	}
	return nil
}

// checkSlow checks the table holds the slow ERP's feed: as many rows, the
// same sum of versions.
func (b *bench) checkSlow(ctx context.Context, s *slow) error {
	var rows, sum int64
	if err := b.db.QueryRowContext(ctx, "SELECT COUNT(*), COALESCE(SUM(erp_version), 0) FROM memberships WHERE deleted_at IS NULL").Scan(&rows, &sum); err != nil {
		return err
	}
	if rows != s.rows || sum != s.sum {
		return fmt.Errorf("the table holds %d rows (versions sum %d), the feed %d (%d)", rows, sum, s.rows, s.sum)
	}
	return nil
}

// scan times `erpsync verify` or `erpsync reconcile` (cmd) at --fetchers
// n over the table, with the backfills' --page-size (500 when they have
// none). A child that exits other than 0 (a verify that finds the table
// out of step) fails the bench.
func (b *bench) scan(ctx context.Context, s *slow, cmd string, n int) (*Result, error) {
	name := fmt.Sprintf("%s, ERP %s a page, --fetchers %d", cmd, SlowLatency, n)
	page := "500"
	for i, a := range b.cfg.ChildArgs[:max(len(b.cfg.ChildArgs)-1, 0)] {
		if a == "--page-size" {
			page = b.cfg.ChildArgs[i+1]
		}
	}
	args := []string{cmd, "--erp-url", s.url, "--job", b.job, "--redis-addr", b.cfg.RedisAddr, "--fetchers", strconv.Itoa(n), "--page-size", page, "--log-format", "json", "--log-level", "warn"}
	c, err := b.child(ctx, name, args, serverPorts{mysql: b.ports.mysql, redis: b.ports.redis})
	if err != nil {
		return nil, err
	}
	r := result(name, s.rows, c.wall)
	r.PeakRSSKiB, r.CPU = c.peakRSSKiB, c.cpu
	b.logf("%s: %.0f records/s", name, r.PerSecond)
	return r, nil
}

func (s *SlowResult) results() []*Result {
	if s == nil {
		return nil
	}
	return []*Result{s.One, s.Many, s.VerifyOne, s.VerifyMany, s.ReconcileOne, s.ReconcileMany}
}

func (s *SlowResult) goals() []Goal {
	if s == nil || s.One == nil || s.Many == nil || s.One.PerSecond == 0 {
		return nil
	}
	gs := []Goal{}
	v := s.Many.PerSecond / s.One.PerSecond
	gs = append(gs, Goal{fmt.Sprintf("backfill against an ERP of %s a page, --fetchers %d / 1", SlowLatency, s.Fetchers), v, fmt.Sprintf(">= %.0f", GoalSlowRatio), v >= GoalSlowRatio})
	for _, sc := range []struct {
		cmd       string
		one, many *Result
	}{{"verify", s.VerifyOne, s.VerifyMany}, {"reconcile", s.ReconcileOne, s.ReconcileMany}} {
		if sc.one != nil && sc.many != nil && sc.one.PerSecond > 0 {
			v := sc.many.PerSecond / sc.one.PerSecond
			gs = append(gs, Goal{fmt.Sprintf("%s against an ERP of %s a page, --fetchers %d / 1", sc.cmd, SlowLatency, s.Fetchers), v, fmt.Sprintf(">= %.0f", GoalSlowRatio), v >= GoalSlowRatio})
		}
	}
	return gs
}

func (s *SlowResult) markdown(w io.Writer) {
	if s == nil || len(s.Rounds) == 0 {
		return
	}
	join := func(vs []float64) string {
		rs := make([]string, len(vs))
		for i, v := range vs {
			rs[i] = fmt.Sprintf("%.2f", v)
		}
		return strings.Join(rs, ", ")
	}
	tableHead(w, "| slow ERP | fetchers | --fetchers N / 1, round by round (order alternating): backfill | verify | reconcile |", "| --- | ---: | --- | --- | --- |")
	fmt.Fprintf(w, "| erpmock, %s a page | %d | %s | %s | %s |\n", s.Latency, s.Fetchers, join(s.Rounds), join(s.VerifyRounds), join(s.ReconcileRounds))
}
