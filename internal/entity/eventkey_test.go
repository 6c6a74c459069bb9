package entity_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/erpsync/erpsync/internal/entity"
)

// TestEventKeyBytes: the longest key text of each key kind, as
// encoding/json writes an event's key (the outbox's encoder writes the
// same bytes), is EventKeyBytes: the bound config check holds a key to.
func TestEventKeyBytes(t *testing.T) {
	for _, c := range []struct {
		ty      string
		longest any
	}{
		{"string(7)", strings.Repeat("<", 7)},
		{"string(3)", "\u2028\u2028&"},
		{"int32", -2147483648},
		{"int64", "-9223372036854775808"},
		{"decimal(5,5)", "-0.12345"},
		{"decimal(6,2)", "-1234.56"},
		{"decimal(4,0)", "-1234"},
		{"bool", false},
		{"date", "2024-02-29"},
	} {
		ty, err := entity.ParseType(c.ty)
		if err != nil {
			t.Fatal(err)
		}
		e := &entity.Entity{Key: []string{"k", "key_two"}, Columns: []entity.Column{{Name: "k", Type: ty}, {Name: "key_two", Type: ty}}}
		b, err := json.Marshal(map[string]any{"k": c.longest, "key_two": c.longest})
		if err != nil {
			t.Fatal(err)
		}
		if n := entity.EventKeyBytes(e); len(b) != n {
			t.Errorf("%s: %s is %d bytes, EventKeyBytes %d", c.ty, b, len(b), n)
		}
	}
}
