package store

import (
	"context"
	"database/sql"
	"time"

	"github.com/erpsync/erpsync/internal/outbox"
)

// GuardRule is one guard rule as TestGuardRulesAgree sees it: its SQL for
// a copy (the WHERE of a guarded UPDATE over the row's columns) and its Go
// evaluation.
type GuardRule struct {
	Name  string
	SQL   func(d Dialect, version, fence int64, updatedAt time.Time) (string, error)
	Holds func(c Current, version, fence int64, updatedAt time.Time) bool
}

// GuardRules are every rule of guard.go, and the marks rule of each kind
// of invalid copy.
func GuardRules() []GuardRule {
	named := []struct {
		name string
		r    rule
	}{
		{"newer", ruleNewer}, {"fence", ruleFence}, {"restores", ruleRestores}, {"accepts", ruleAccepts},
		{"replaces", ruleReplaces}, {"lands", ruleLands}, {"unmarks", ruleUnmarks},
		{"lands and unmarks", and(ruleLands, ruleUnmarks)},
		{"update unmarks", or(isNotNull(colDeleted), ruleUnmarks)},
		{"marks by version", ruleMarksVersion}, {"marks by version, undated", ruleMarksVersionUndated}, {"marks by updated_at", ruleMarksUpdated}, {"marks undated", ruleMarksUndated},
	}
	out := make([]GuardRule, len(named))
	for i, n := range named {
		r := n.r
		out[i] = GuardRule{
			Name: n.name,
			SQL: func(d Dialect, version, fence int64, updatedAt time.Time) (string, error) {
				l := newLiteral(d)
				defer l.free()
				err := r.render(l, rowOperands(incoming{Version: version, Fence: fence, UpdatedAt: updatedAt}))
				return l.text(), err
			},
			Holds: func(c Current, version, fence int64, updatedAt time.Time) bool {
				return r.holds(c, incoming{Version: version, Fence: fence, UpdatedAt: updatedAt})
			},
		}
	}
	return out
}

// InTxResumed is inTxResumed (Quarantine's transaction), for a test that
// pauses inside it.
func (s *Store) InTxResumed(ctx context.Context, what string, write func(tx *sql.Tx) error) error {
	return s.inTxResumed(ctx, what, func(tx *sql.Tx) ([]outbox.Event, error) { return nil, write(tx) })
}

// EachInTx is eachInTx (MarkQuarantined's transaction), for a test that
// pauses inside it.
func (s *Store) EachInTx(ctx context.Context, what string, n int, stmt func(tx *sql.Tx, i int) (sql.Result, error)) ([]bool, error) {
	return s.eachInTx(ctx, what, n, stmt)
}

// Mutants name the weakened upsert guards a model must catch: the fence
// alone (no version guard) and the version alone (no fence).
var Mutants = []string{"no version guard", "no fence"}

// Mutant is t compiled again with its guarded upserts, in both dialects,
// under a weakened rule of Mutants in place of ruleLands, for a test to
// show that its model catches such a write.
func (t *Table) Mutant(name string) *Table {
	lands, ok := map[string]rule{"no version guard": ruleFence, "no fence": ruleNewer}[name]
	if !ok {
		panic("no mutant " + name)
	}
	twins := new([2]*Table)
	for d, tw := range t.twins {
		c := *tw
		c.upsert = c.upsertOn(lands)
		c.twins = twins
		twins[d] = &c
	}
	return twins[t.d]
}
