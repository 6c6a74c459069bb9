package erp

import (
	"errors"
	"fmt"
)

// ErrLoop says the ERP's paging does not advance: a pass was handed a
// cursor it had followed already, so following it would read the same
// pages for ever.
var ErrLoop = errors.New("erp: the feed's paging does not advance")

// Pass watches the cursors of one pass over a feed. The zero value is
// ready to use; it is not safe for concurrent use.
type Pass struct {
	seen  map[string]int // cursor -> the page that handed it out
	pages int
}

// Next records the next cursor of the pass's next page ("" on the last)
// and returns an ErrLoop error when an earlier page of the pass handed out
// the same cursor: a next_cursor that never changes, or a keyset position
// that does not move. The error says what the ERP did.
func (p *Pass) Next(cursor string) error {
	p.pages++
	if cursor == "" {
		return nil
	}
	if p.seen == nil {
		p.seen = map[string]int{}
	}
	if first, ok := p.seen[cursor]; ok {
		return fmt.Errorf("%w: page %d handed out the cursor %s that page %d handed out already; following it would read the same pages for ever (the checkpoint is kept; fix the ERP's paging)",
			ErrLoop, p.pages, quote([]byte(cursor)), first)
	}
	p.seen[cursor] = p.pages
	return nil
}
