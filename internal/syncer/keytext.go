package syncer

import (
	"strings"

	"github.com/erpsync/erpsync/internal/entity"
)

// readableKey renders a record's key text (entity.KeyText) for people:
// the text itself for a one-column key; for a composite key, whose parts
// KeyText joins with 0x1f (a JSON log shows "1000\u001fC0001"), the key
// columns' name=value pairs, comma-separated: company=1000,customer=C0001.
// Locks, rows and the quarantine table keep the key text itself.
func readableKey(names []string, key string) string {
	if !strings.Contains(key, entity.KeySeparator) {
		return key
	}
	var b strings.Builder
	for i, p := range strings.Split(key, entity.KeySeparator) {
		if i > 0 {
			b.WriteByte(',')
		}
		if i < len(names) {
			b.WriteString(names[i])
			b.WriteByte('=')
		}
		b.WriteString(p)
	}
	return b.String()
}

// keyNames are the key columns of the syncer's entity; none without a
// table.
func (s *Syncer) keyNames() []string {
	if s.store == nil || s.store.Table() == nil {
		return nil
	}
	return s.store.Table().Entity().Key
}
