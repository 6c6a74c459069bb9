package store

import (
	"time"
)

// The guard rules decide which write wins: the version rule, the fence,
// the restore of a soft-deleted row and the quarantine mark. Each is
// declared here once, as a condition on a stored row (its columns) and an
// incoming copy of its record (the values the write carries), and each
// place that decides renders the same declaration: the SQL of every
// dialect (the WHERE of a guarded UPDATE, the condition of an upsert)
// and Go (Current.Accepts, Restores, Marks, which the sync decides with
// before it writes). TestGuardRulesAgree holds the SQL and the Go equal on
// random rows, on each database.

// The columns the rules read, of the stored row and of the incoming copy
// (its version, fencing token and updated_at; a copy has no mark and is
// live).
const (
	colVersion   = "erp_version"
	colFence     = "fence_token"
	colUpdatedAt = "erp_updated_at"
	colMark      = "quarantined_version"
	colMarkAt    = "quarantined_updated_at"
	colDeleted   = "deleted_at"
)

type ruleOp uint8

const (
	opAnd ruleOp = iota
	opOr
	opGt // args[0] > args[1]
	opGe // args[0] >= args[1]
	opNull
	opNotNull
	opRow // the stored row's column col
	opIn  // the incoming copy's value of col
)

// rule is a condition of a guard rule, or one of its operands.
type rule struct {
	op   ruleOp
	col  string
	args []rule
}

func row(col string) rule       { return rule{op: opRow, col: col} }
func in(col string) rule        { return rule{op: opIn, col: col} }
func and(rs ...rule) rule       { return rule{op: opAnd, args: rs} }
func or(rs ...rule) rule        { return rule{op: opOr, args: rs} }
func gt(a, b rule) rule         { return rule{op: opGt, args: []rule{a, b}} }
func ge(a, b rule) rule         { return rule{op: opGe, args: []rule{a, b}} }
func isNull(col string) rule    { return rule{op: opNull, col: col} }
func isNotNull(col string) rule { return rule{op: opNotNull, col: col} }

var (
	// ruleNewer: the copy's version is above the row's.
	ruleNewer = gt(in(colVersion), row(colVersion))
	// ruleFence: the copy's fencing token is not older than the row's.
	ruleFence = ge(in(colFence), row(colFence))
	// ruleRestores: a copy that restores a soft-deleted row: at the row's
	// version or a higher one, or with a later updated_at at any version
	// (a re-created record is a new life of its key, whatever its change
	// counter says). A stale copy restores nothing.
	ruleRestores = or(ge(in(colVersion), row(colVersion)), gt(in(colUpdatedAt), row(colUpdatedAt)))
	// ruleAccepts: the row takes the copy, fence aside: a newer version,
	// or a restore of a soft-deleted row.
	ruleAccepts = or(ruleNewer, and(isNotNull(colDeleted), ruleRestores))
	// ruleReplaces: the guarded UPDATE of one row (UpdateRow).
	ruleReplaces = and(ruleFence, ruleAccepts)
	// ruleLands: the guarded upsert (UpsertRows), which restores nothing at
	// the row's version: restores go through UpdateRow.
	ruleLands = and(ruleNewer, ruleFence)
	// ruleNotBeforeMark: the copy is not older than the invalid copy that
	// set the row's mark, by their updated_at, when that copy's is known.
	ruleNotBeforeMark = or(isNull(colMarkAt), ge(in(colUpdatedAt), row(colMarkAt)))
	// ruleUnmarks: a write that lands clears the quarantine mark when it
	// is at the marking version or a newer one, and not older than the
	// invalid copy; a replayed older valid copy updates the data and keeps
	// the mark. A mark set by a copy without a version holds the row's
	// version then, so its updated_at alone decides: an earlier version
	// served late keeps it, whichever run writes it.
	ruleUnmarks = or(isNull(colMark), and(ge(in(colVersion), row(colMark)), ruleNotBeforeMark))
	// ruleAfterMark: the copy is later than the invalid copy that set the
	// row's mark, by their updated_at, or that copy's is not known.
	ruleAfterMark = or(isNull(colMarkAt), gt(in(colUpdatedAt), row(colMarkAt)))
	// ruleMarksVersion: an invalid copy with a version marks a live row
	// when it is above the row's version and its mark, and later than the
	// invalid copy of the mark when both updated_at are known.
	ruleMarksVersion = and(ruleNewer, or(isNull(colMark), and(gt(in(colVersion), row(colMark)), ruleAfterMark)))
	// ruleMarksVersionUndated: ruleMarksVersion for an invalid copy whose
	// updated_at could not be read: by its version alone.
	ruleMarksVersionUndated = and(ruleNewer, or(isNull(colMark), gt(in(colVersion), row(colMark))))
	// ruleMarksUpdated: an invalid copy without a version but with an
	// updated_at marks a live row when it is later than the row's
	// erp_updated_at, and the row is unmarked or its mark's invalid copy
	// has a known, earlier updated_at: the mark then moves to the later
	// copy.
	ruleMarksUpdated = and(gt(in(colUpdatedAt), row(colUpdatedAt)),
		or(isNull(colMark), and(isNotNull(colMarkAt), ruleAfterMark)))
	// ruleMarksUndated: an invalid copy with neither marks an unmarked row.
	ruleMarksUndated = isNull(colMark)
)

// incoming is what a copy carries of the guards.
type incoming struct {
	Version   int64
	Fence     int64
	UpdatedAt time.Time
}

// operand is the value of an operand: an integer or a time.
type operand struct {
	i    int64
	t    time.Time
	time bool
}

func (a operand) compare(b operand) int {
	if a.time {
		return a.t.Compare(b.t)
	}
	switch {
	case a.i < b.i:
		return -1
	case a.i > b.i:
		return 1
	}
	return 0
}

// holds evaluates r in Go on the stored row c and the copy x, with the
// database's view of time: the copy's updated_at to the millisecond, as
// the row stores it.
func (r rule) holds(c Current, x incoming) bool {
	switch r.op {
	case opAnd:
		for _, a := range r.args {
			if !a.holds(c, x) {
				return false
			}
		}
		return true
	case opOr:
		for _, a := range r.args {
			if a.holds(c, x) {
				return true
			}
		}
		return false
	case opGt:
		return r.args[0].value(c, x).compare(r.args[1].value(c, x)) > 0
	case opGe:
		return r.args[0].value(c, x).compare(r.args[1].value(c, x)) >= 0
	case opNull:
		return c.null(r.col)
	case opNotNull:
		return !c.null(r.col)
	}
	panic("store: rule operand used as a condition") // a declaration above is wrong: every test catches it
}

// null says whether the row's column is NULL: the mark when the row is
// not marked, deleted_at when it is live.
func (c Current) null(col string) bool {
	switch col {
	case colMark:
		return c.Mark == 0
	case colMarkAt:
		return c.MarkAt.IsZero()
	case colDeleted:
		return !c.Deleted
	}
	return false
}

func (r rule) value(c Current, x incoming) operand {
	if r.op == opIn {
		switch r.col {
		case colVersion:
			return operand{i: x.Version}
		case colFence:
			return operand{i: x.Fence}
		case colUpdatedAt:
			return operand{t: Millis(x.UpdatedAt), time: true}
		}
	} else {
		switch r.col {
		case colVersion:
			return operand{i: c.Version}
		case colFence:
			return operand{i: c.Fence}
		case colUpdatedAt:
			return operand{t: c.UpdatedAt, time: true}
		case colMark:
			return operand{i: c.Mark}
		case colMarkAt:
			return operand{t: c.MarkAt, time: true}
		}
	}
	panic("store: rule reads column " + r.col) // a declaration above is wrong: every test catches it
}

// sqlOperand writes one operand of a rule as SQL.
type sqlOperand func(l *literal, side ruleOp, col string) error

// render writes r as SQL, its operands by operand.
func (r rule) render(l *literal, operand sqlOperand) error {
	switch r.op {
	case opAnd, opOr:
		sep := " AND "
		if r.op == opOr {
			sep = " OR "
		}
		l.sql("(")
		for i, a := range r.args {
			if i > 0 {
				l.sql(sep)
			}
			if err := a.render(l, operand); err != nil {
				return err
			}
		}
		l.sql(")")
		return nil
	case opGt, opGe:
		if err := r.args[0].render(l, operand); err != nil {
			return err
		}
		if r.op == opGt {
			l.sql(" > ")
		} else {
			l.sql(" >= ")
		}
		return r.args[1].render(l, operand)
	case opNull, opNotNull:
		if err := operand(l, opRow, r.col); err != nil {
			return err
		}
		if r.op == opNull {
			l.sql(" IS NULL")
		} else {
			l.sql(" IS NOT NULL")
		}
		return nil
	}
	return operand(l, r.op, r.col)
}

// sqlText is r rendered, for a statement compiled once.
func (r rule) sqlText(d Dialect, operand sqlOperand) string {
	l := newLiteral(d)
	defer l.free()
	if err := r.render(l, operand); err != nil {
		panic(err) // the upsert's operands are names: they cannot fail
	}
	return l.text()
}

// upsertOperands are the operands of an upsert's condition on table: on
// MySQL the row's column by its name and the copy's as VALUES(col), on
// PostgreSQL the row's qualified by the table and the copy's as
// EXCLUDED.col.
func upsertOperands(d Dialect, table string) sqlOperand {
	return func(l *literal, side ruleOp, col string) error {
		switch {
		case d == MySQL && side == opIn:
			l.sql("VALUES(" + col + ")")
		case d == MySQL:
			l.sql(col)
		case side == opIn:
			l.sql("EXCLUDED." + col)
		default:
			l.sql(d.ident(table) + "." + col)
		}
		return nil
	}
}

// rowOperands are the operands of a guarded UPDATE's WHERE: the row's
// columns by name, the copy's values written in.
func rowOperands(x incoming) sqlOperand {
	return func(l *literal, side ruleOp, col string) error {
		if side == opRow {
			l.sql(col)
			return nil
		}
		switch col {
		case colVersion:
			l.int(x.Version)
		case colFence:
			l.int(x.Fence)
		case colUpdatedAt:
			return l.time(Millis(x.UpdatedAt))
		}
		return nil
	}
}

// Accepts reports whether the row c takes a copy at version and
// updatedAt, fence aside: a higher version, or a copy that restores it
// when it is soft-deleted (Restores). A copy it does not accept is up to
// date already, or stale.
func (c Current) Accepts(version int64, updatedAt time.Time) bool {
	return ruleAccepts.holds(c, incoming{Version: version, UpdatedAt: updatedAt})
}

// Restores reports whether a valid copy at version and updatedAt restores
// the soft-deleted row c: a copy at c's version or a higher one, or a later
// updated_at at any version (a re-creation is a new life of the key,
// whatever its change counter says). A stale copy (a lower version and no
// later updated_at) restores nothing.
func (c Current) Restores(version int64, updatedAt time.Time) bool {
	return ruleRestores.holds(c, incoming{Version: version, UpdatedAt: updatedAt})
}

// Marks reports whether an invalid copy at version (0 when it had none
// that could be read) and updatedAt (zero likewise) is newer than what the
// live row c holds and marks: above its version and its mark; without a
// version, a copy later than the row's erp_updated_at (or undated) on an
// unmarked row.
func (c Current) Marks(version int64, updatedAt time.Time) bool {
	return !c.Deleted && marksRule(version, updatedAt).holds(c, incoming{Version: version, UpdatedAt: updatedAt})
}

// marksRule is the rule by which an invalid copy marks a live row: by its
// version when it has one, else by its updated_at when it has one.
func marksRule(version int64, updatedAt time.Time) rule {
	switch {
	case version > 0 && !updatedAt.IsZero():
		return ruleMarksVersion
	case version > 0:
		return ruleMarksVersionUndated
	case !updatedAt.IsZero():
		return ruleMarksUpdated
	}
	return ruleMarksUndated
}
