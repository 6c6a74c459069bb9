package syncer

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/rs/zerolog"

	"github.com/erpsync/erpsync/internal/erp"
)

// MinInvalidAllowance is the fewest invalid items a percentage MaxInvalid
// allows, so that a few bad records in a small run are not a failed run;
// never more than half of the items the run fetched, though: a run most
// of whose items are invalid is not a success, whatever its size.
const MinInvalidAllowance = 10

// invalidTally counts a run's invalid items by the rules they break, for
// the warning lines (one per rule and page) and the line that fails a run
// past MaxInvalid.
type invalidTally struct {
	mu    sync.Mutex
	rules map[string]*ruleCount
	keys  []string // the key columns, for readableKey
}

// ruleCount is one rule: its field ("status", or the whole reason when it
// names none), how many items broke it, and a first example.
type ruleCount struct {
	field   string
	n       int64
	example string // the first reason, with its value
	erpID   string // the first item's erp_id
}

// rule is one rule an item breaks: its field, and the reason's text.
type rule struct{ field, text string }

// rulesOf splits an item's reason into its rules: "status: \"X\" is not
// ..." is field status. A reason without a field (an item that is not an
// object) is its own rule.
func rulesOf(reason string) []rule {
	var out []rule
	for _, part := range strings.Split(reason, "; ") {
		field, _, ok := strings.Cut(part, ": ")
		if !ok || strings.ContainsAny(field, " \"") {
			field = part
		}
		out = append(out, rule{field, part})
	}
	return out
}

// page counts the invalid items of one page and logs one warning line per
// rule, with its count and a first example.
func (t *invalidTally) page(invs []erp.Invalid, log zerolog.Logger) {
	type line struct {
		n              int
		example, erpID string
	}
	lines := map[string]*line{}
	var order []string
	for _, inv := range invs {
		for _, r := range rulesOf(inv.Reason) {
			l := lines[r.field]
			if l == nil {
				l = &line{example: r.text, erpID: readableKey(t.keys, inv.ErpID)}
				lines[r.field] = l
				order = append(order, r.field)
			}
			l.n++
		}
	}
	t.mu.Lock()
	if t.rules == nil {
		t.rules = map[string]*ruleCount{}
	}
	for _, field := range order {
		l := lines[field]
		rc := t.rules[field]
		if rc == nil {
			rc = &ruleCount{field: field, example: l.example, erpID: l.erpID}
			t.rules[field] = rc
		}
		rc.n += int64(l.n)
	}
	t.mu.Unlock()
	for _, field := range order {
		l := lines[field]
		log.Warn().Str("field", field).Int("items", l.n).Str("example", l.example).Str("erp_id", l.erpID).
			Msg("invalid records quarantined")
	}
}

// top says the rules broken most, with counts and an example each, in one
// phrase: `status (50000, e.g. M0000001: status: "active" is not ...)`.
func (t *invalidTally) top(n int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	rules := make([]*ruleCount, 0, len(t.rules))
	for _, rc := range t.rules {
		rules = append(rules, rc)
	}
	sort.Slice(rules, func(i, j int) bool {
		if rules[i].n != rules[j].n {
			return rules[i].n > rules[j].n
		}
		return rules[i].field < rules[j].field
	})
	var b strings.Builder
	for i, rc := range rules[:min(n, len(rules))] {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s (%d, e.g. %q: %s)", rc.field, rc.n, rc.erpID, rc.example)
	}
	if len(rules) > n {
		fmt.Fprintf(&b, "; and %d more rules", len(rules)-n)
	}
	return b.String()
}

// invalidAllowed is how many invalid items limit allows a run that
// fetched fetched items; a percentage never allows fewer than
// MinInvalidAllowance, unless that would be more than half of fetched
// (then half: 2 invalid of 3 fail a run, as 60 of 100 do).
func invalidAllowed(limit Limit, fetched int64) int64 {
	n := limit.Of(fetched)
	if limit.IsPercent {
		n = max(n, min(MinInvalidAllowance, fetched/2))
	}
	return n
}

// InvalidSummary says, in one phrase, which rules invs break most, as the
// line of a run failed by MaxInvalid does.
func InvalidSummary(invs []erp.Invalid) string {
	var t invalidTally
	t.page(invs, zerolog.Nop())
	return t.top(3)
}
