package store

import (
	"slices"
	"testing"

	"github.com/erpsync/erpsync/internal/entity"
)

// TestOwnColumnsAreReserved: every column erpsync adds to an entity's
// table is a name the config file may not give a declared column, so that
// no table is planned with one column twice.
func TestOwnColumnsAreReserved(t *testing.T) {
	var names []string
	for _, c := range ownColumns {
		names = append(names, c.Name)
	}
	if !slices.Equal(names, entity.Reserved) {
		t.Fatalf("erpsync's own columns %v, the names reserved for them %v", names, entity.Reserved)
	}
}
