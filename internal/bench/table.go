package bench

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// Goals of the issue.
const (
	GoalCeilingRatio = 0.5   // backfill / ceiling
	GoalSeedRatio    = 10.0  // backfill / seed16
	GoalRerunRatio   = 1.0   // re-run / backfill
	GoalPeakMiB      = 150.0 // peak RSS of the big backfill
	GoalFlatRatio    = 1.25  // peak RSS big / small
	GoalRedlockRatio = 0.5   // backfill on a Redlock / on one Redis
	GoalClusterRatio = 0.8   // backfill on a Redis Cluster / on one Redis
	GoalTypedRatio   = 0.9   // typed backfill / memberships backfill, same run
)

// Goal is one goal and whether the measurements meet it.
type Goal struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Goal  string  `json:"goal"`
	Met   bool    `json:"met"`
}

// shown is g's value as the goals table prints it: two decimals, or as
// many more (up to four) as it takes for a missed goal not to print as its
// target (0.7968 against ">= 0.8" is 0.797, not 0.80).
func (g Goal) shown() string {
	f := strings.Fields(g.Goal)
	target, err := strconv.ParseFloat(f[len(f)-1], 64)
	s := strconv.FormatFloat(g.Value, 'f', 2, 64)
	for d := 3; d <= 4 && !g.Met && err == nil; d++ {
		if v, _ := strconv.ParseFloat(s, 64); v != target {
			break
		}
		s = strconv.FormatFloat(g.Value, 'f', d, 64)
	}
	return s
}

// Goals compares the measurements with the goals of the issue; a goal
// whose measurements are missing is left out.
func (r *Results) Goals() []Goal {
	var gs []Goal
	if r.Backfill != nil && r.Ceiling != nil && r.Ceiling.PerSecond > 0 {
		v := r.Backfill.PerSecond / r.Ceiling.PerSecond
		gs = append(gs, Goal{"backfill / ceiling", v, fmt.Sprintf(">= %.1f", GoalCeilingRatio), v >= GoalCeilingRatio})
	}
	if r.Backfill != nil && r.Seed != nil && r.Seed.PerSecond > 0 {
		v := r.Backfill.PerSecond / r.Seed.PerSecond
		gs = append(gs, Goal{"backfill / seed16", v, fmt.Sprintf(">= %.0f", GoalSeedRatio), v >= GoalSeedRatio})
	}
	if r.Backfill != nil && r.Rerun != nil && r.Backfill.PerSecond > 0 {
		v := r.Rerun.PerSecond / r.Backfill.PerSecond
		gs = append(gs, Goal{"re-run / backfill", v, fmt.Sprintf(">= %.1f", GoalRerunRatio), v >= GoalRerunRatio})
	}
	for _, t := range []struct {
		name string
		m    *Result
		goal float64
	}{
		{fmt.Sprintf("backfill Redlock %d / one Redis", RedlockNodes), r.Redlock, GoalRedlockRatio},
		{fmt.Sprintf("backfill Redis Cluster %d / one Redis", ClusterMasters), r.Cluster, GoalClusterRatio},
	} {
		if t.m != nil && r.Backfill != nil && r.Backfill.PerSecond > 0 {
			v := t.m.PerSecond / r.Backfill.PerSecond
			gs = append(gs, Goal{t.name, v, fmt.Sprintf(">= %.1f", t.goal), v >= t.goal})
		}
	}
	if r.Typed != nil && r.Backfill != nil && r.Backfill.PerSecond > 0 {
		v := r.Typed.PerSecond / r.Backfill.PerSecond
		gs = append(gs, Goal{fmt.Sprintf("typed backfill (%d columns) / memberships backfill", TypedColumns), v, fmt.Sprintf(">= %.1f", GoalTypedRatio), v >= GoalTypedRatio})
	}
	if r.Big != nil {
		v := mib(r.Big.PeakRSSKiB)
		gs = append(gs, Goal{fmt.Sprintf("peak RSS, %d-record backfill (MiB)", r.Config.Big), v, fmt.Sprintf("< %.0f", GoalPeakMiB), v < GoalPeakMiB})
	}
	if r.Big != nil && r.Small != nil && r.Small.PeakRSSKiB > 0 {
		v := float64(r.Big.PeakRSSKiB) / float64(r.Small.PeakRSSKiB)
		gs = append(gs, Goal{fmt.Sprintf("peak RSS %d / %d records (flat in N)", r.Config.Big, r.Config.Small), v, fmt.Sprintf("<= %.2f", GoalFlatRatio), v <= GoalFlatRatio})
	}
	gs = append(gs, r.Slow.goals()...)
	if r.Slow != nil && r.Slow.Many != nil && r.Backfill != nil && r.Backfill.PerSecond > 0 {
		v := r.Slow.Many.PerSecond / r.Backfill.PerSecond
		gs = append(gs, Goal{fmt.Sprintf("backfill against an ERP of %s a page at --fetchers %d / backfill without latency", SlowLatency, r.Slow.Fetchers), v, fmt.Sprintf(">= %.1f", GoalSlowOfFast), v >= GoalSlowOfFast})
	}
	gs = append(gs, r.Events.goals()...)
	gs = append(gs, r.Postgres.goals()...)
	return gs
}

// TypedRatio is a backfill against the raw insert of its own rows and
// against the memberships backfill of the same run.
type TypedRatio struct {
	Name      string  `json:"name"`
	PerSecond float64 `json:"records_per_second"`
	// Raw is the raw insert's records/s: the literal ceiling for
	// memberships, TypedRaw for the typed entity.
	Raw           float64 `json:"raw_records_per_second"`
	ToRaw         float64 `json:"to_raw"`
	ToMemberships float64 `json:"to_memberships"`
	// Rounds are the typed backfill's records/s over the memberships
	// backfill's, round by round ("" for memberships itself).
	Rounds string `json:"rounds,omitempty"`
}

// TypedRatios returns the memberships and the typed backfill against their
// raw inserts, when both were measured.
func (r *Results) TypedRatios() []TypedRatio {
	m, raw := r.Backfill, r.CeilingLiteral
	if r.Typed == nil || r.TypedRaw == nil || m == nil || raw == nil || m.PerSecond == 0 || raw.PerSecond == 0 || r.TypedRaw.PerSecond == 0 {
		return nil
	}
	var rounds []string
	if len(m.Rounds) == len(r.Typed.Rounds) {
		for i, v := range r.Typed.Rounds {
			rounds = append(rounds, fmt.Sprintf("%.2f", v/m.Rounds[i]))
		}
	}
	return []TypedRatio{
		{Name: m.Name, PerSecond: m.PerSecond, Raw: raw.PerSecond, ToRaw: m.PerSecond / raw.PerSecond, ToMemberships: 1},
		{Name: r.Typed.Name, PerSecond: r.Typed.PerSecond, Raw: r.TypedRaw.PerSecond, ToRaw: r.Typed.PerSecond / r.TypedRaw.PerSecond,
			ToMemberships: r.Typed.PerSecond / m.PerSecond, Rounds: strings.Join(rounds, ", ")},
	}
}

func mib(kib int64) float64 { return float64(kib) / 1024 }

// Bound splits a lock topology's backfill against the one-Redis backfill
// of the same run, per record: on a machine whose cores every process
// shares, the rate follows the CPU a record costs over all of them.
type Bound struct {
	Name string `json:"name"`
	// Rate is the topology's records/s over one Redis's.
	Rate float64 `json:"rate"`
	// CPU is one Redis's CPU a record over the topology's (all processes).
	CPU float64 `json:"cpu"`
	// Redis and Erpsync are the topology's Redis (all servers) and erpsync
	// CPU a record over one Redis's.
	Redis   float64 `json:"redis"`
	Erpsync float64 `json:"erpsync"`
	// Best is the CPU ratio the topology would reach if its only extra
	// cost were the lock work it must repeat: a Redlock's every node does
	// what one Redis does, so best = T / (T + (N-1) R), T and R one
	// Redis's CPU and Redis CPU a record; a cluster splits the work, so 1.
	Best float64 `json:"best"`
}

// Bounds returns the Bound of the Redlock and Cluster rows, when measured
// beside the one-Redis backfill.
func (r *Results) Bounds() []Bound {
	one := r.Backfill
	if one == nil || one.PerSecond == 0 || one.Records == 0 || one.CPU.Total() == 0 || one.CPU.Redis == 0 {
		return nil
	}
	per := func(m *Result, v float64) float64 { return v / float64(m.Records) }
	t1, r1 := per(one, one.CPU.Total()), per(one, one.CPU.Redis)
	var bs []Bound
	for _, t := range []struct {
		name  string
		m     *Result
		extra int // copies of one Redis's lock work beyond the first
	}{
		{fmt.Sprintf("Redlock %d masters", RedlockNodes), r.Redlock, RedlockNodes - 1},
		{fmt.Sprintf("Redis Cluster %d masters", ClusterMasters), r.Cluster, 0},
	} {
		m := t.m
		if m == nil || m.Records == 0 || m.CPU.Total() == 0 {
			continue
		}
		bs = append(bs, Bound{
			Name:    t.name,
			Rate:    m.PerSecond / one.PerSecond,
			CPU:     t1 / per(m, m.CPU.Total()),
			Redis:   per(m, m.CPU.Redis) / r1,
			Erpsync: per(m, m.CPU.Erpsync) / per(one, one.CPU.Erpsync),
			Best:    t1 / (t1 + float64(t.extra)*r1),
		})
	}
	return bs
}

// Markdown writes the measurements and the goals as two markdown tables.
func (r *Results) Markdown(w io.Writer) {
	if r.Config.CPUs != "" {
		fmt.Fprintf(w, "\nCPUs: %s.\n", r.Config.CPUs)
	}
	resultRows(w, "mysql", slices.Concat([]*Result{r.Ceiling, r.Seed, r.Backfill, r.Typed, r.TypedRaw, r.Redlock, r.Cluster, r.Rerun, r.Small, r.Big}, r.Slow.results(), r.Stages, r.Events.results()))
	r.Postgres.markdown(w)
	if gs := r.Goals(); len(gs) > 0 {
		tableHead(w, "| goal | value | target | met |", "| --- | ---: | --- | --- |")
		for _, g := range gs {
			met := "no"
			if g.Met {
				met = "yes"
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s |\n", g.Name, g.shown(), g.Goal, met)
		}
	}
	if ts := r.TypedRatios(); len(ts) > 0 {
		tableHead(w, "| backfill | records/s | raw insert of its rows (literal values), records/s | backfill / raw insert | / memberships backfill | typed / memberships in each round |",
			"| --- | ---: | ---: | ---: | ---: | --- |")
		for _, t := range ts {
			fmt.Fprintf(w, "| %s | %.0f | %.0f | %.2f | %.2f | %s |\n", t.Name, t.PerSecond, t.Raw, t.ToRaw, t.ToMemberships, t.Rounds)
		}
	}
	r.Documents.markdown(w)
	r.Slow.markdown(w)
	if bs := r.Bounds(); len(bs) > 0 {
		tableHead(w, "| backfill vs one Redis | rate | CPU a record (one Redis / this) | Redis CPU (this / one Redis) | erpsync CPU (this / one Redis) | best CPU ratio with no cost but the repeated lock work |",
			"| --- | ---: | ---: | ---: | ---: | ---: |")
		for _, b := range bs {
			fmt.Fprintf(w, "| %s | %.2f | %.2f | %.2f | %.2f | %.2f |\n", b.Name, b.Rate, b.CPU, b.Redis, b.Erpsync, b.Best)
		}
	}
	r.Events.markdown(w)
}

// tableHead starts a markdown table after a blank line.
func tableHead(w io.Writer, head, align string) {
	fmt.Fprintln(w)
	fmt.Fprintln(w, head)
	fmt.Fprintln(w, align)
}

// resultRows writes the table of results ms (nil ones left out), the
// database's CPU under db's name.
func resultRows(w io.Writer, db string, ms []*Result) {
	if !slices.ContainsFunc(ms, func(m *Result) bool { return m != nil }) {
		return
	}
	fmt.Fprintln(w, "| measurement | records | seconds | records/s | peak RSS MiB | CPU s: erpsync / "+db+" / redis / bench | CPU µs a record | note |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
	for _, m := range ms {
		if m == nil {
			continue
		}
		rss := "-"
		if m.PeakRSSKiB > 0 {
			rss = fmt.Sprintf("%.1f", mib(m.PeakRSSKiB))
		}
		per := "-"
		if m.Records > 0 {
			per = fmt.Sprintf("%.1f", m.CPU.Total()/float64(m.Records)*1e6)
		}
		note := m.Note
		if len(m.Rounds) > 1 {
			rs := make([]string, len(m.Rounds))
			for i, v := range m.Rounds {
				rs[i] = fmt.Sprintf("%.0f", v)
			}
			note = strings.TrimPrefix(note+"; best of rounds "+strings.Join(rs, ", "), "; ")
		}
		fmt.Fprintf(w, "| %s | %d | %.2f | %.0f | %s | %.2f / %.2f / %.2f / %.2f | %s | %s |\n", m.Name, m.Records, m.Seconds, m.PerSecond, rss,
			m.CPU.Erpsync, m.CPU.MySQL+m.CPU.Postgres, m.CPU.Redis, m.CPU.Bench, per, note)
	}
}
