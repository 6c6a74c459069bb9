package demo

import (
	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/internal/store"
)

// eventsTable is the demo's entity: the built-in memberships, with events,
// as a config file declares it with `events: true`.
var eventsTable = func() *store.Table {
	e := entity.Memberships()
	e.Events = true
	t, err := store.Compile(e)
	if err != nil {
		panic("demo: compile memberships with events: " + err.Error()) // a fixed declaration
	}
	return t
}()
