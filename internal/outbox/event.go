package outbox

import (
	"context"
	"crypto/sha1"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Ops of an event.
const (
	OpInsert  = "insert"
	OpUpdate  = "update"
	OpDelete  = "delete"
	OpRestore = "restore"
)

// ErrFenced is MarkDelivered's answer when a relay with a newer fencing
// token has marked since: this relay's lock expired, and it must stop.
var ErrFenced = errors.New("outbox: fenced out by a newer relay")

// Event is one change of one row, as the sync records it.
type Event struct {
	// Entity is the entity's name.
	Entity string
	// Key maps each key column to its JSON value (see Data).
	Key map[string]any
	// Op is OpInsert, OpUpdate, OpDelete or OpRestore.
	Op string
	// Version is the version the row was written at.
	Version int64
	// RunID is the run that wrote the row.
	RunID string
	// Data maps every column of the row as written (key columns
	// included; a document: with its lines) to its JSON value: decimal
	// and int64 values as JSON strings, a date as YYYY-MM-DD, a datetime
	// as RFC 3339 in UTC with milliseconds (FormatTime). Values are
	// encoded with encoding/json; a json.RawMessage goes in as it is.
	Data map[string]any
	// KeyJSON and DataJSON, when DataJSON is set, are Key and Data as
	// encoding/json writes them (object members sorted by name): a writer
	// that encodes its events itself (the store's compiled tables) sets
	// them instead of Key and Data, and Record takes them as they are.
	KeyJSON, DataJSON []byte
}

// Body is an event as its consumers receive it: the webhook's array
// element, the NATS and RabbitMQ message.
type Body struct {
	ID      string         `json:"id"`
	Entity  string         `json:"entity"`
	Op      string         `json:"op"`
	Key     map[string]any `json:"key"`
	Version int64          `json:"version"`
	RunID   string         `json:"run_id"`
	Data    map[string]any `json:"data"`
}

// FormatTime is a datetime value of an event: RFC 3339 in UTC with
// milliseconds.
func FormatTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

// FormatDate is a date value of an event: YYYY-MM-DD.
func FormatDate(t time.Time) string { return t.Format(time.DateOnly) }

// KeyText is the text of a key that the outbox stores and that an event's
// id is computed from: its JSON, keys sorted.
func KeyText(key map[string]any) (string, error) {
	b, err := json.Marshal(key)
	if err != nil {
		return "", fmt.Errorf("encode event key: %w", err)
	}
	return string(b), nil
}

// namespace is the UUID namespace of event ids (a v4 UUID drawn once).
var namespace = [16]byte{0x5d, 0x1f, 0x6c, 0x2a, 0x93, 0x0e, 0x4b, 0x7d, 0xa1, 0x38, 0x0c, 0x55, 0xe2, 0x9f, 0x41, 0x6b}

// ID is the id of the event of (entity, key text, version, op): a UUID
// version 5 (SHA-1, RFC 9562) of them, the same on every computation.
func ID(entity, keyText string, version int64, op string) string {
	h := sha1.New()
	h.Write(namespace[:])
	h.Write([]byte(entity + "\x00" + keyText + "\x00" + strconv.FormatInt(version, 10) + "\x00" + op))
	var u [16]byte
	copy(u[:], h.Sum(nil))
	u[6] = u[6]&0x0f | 0x50
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

func validOp(op string) bool {
	switch op {
	case OpInsert, OpUpdate, OpDelete, OpRestore:
		return true
	}
	return false
}

// maxKeyText is the width of the entity_key column.
const maxKeyText = 500

// Record records evs in the outbox within tx, the transaction that writes
// their rows: one multi-row INSERT whose ON DUPLICATE KEY UPDATE changes
// nothing, so that an event whose identity (entity, key, version, op) is
// recorded already is dropped silently (INSERT IGNORE would also turn a
// value that does not fit into a warning). Nothing is recorded for an
// empty evs.
//
// Call it after the statements that write the rows: their row locks make
// a second transaction that changes the same key wait for this one's
// commit, so that the outbox's ids of one key follow the order its
// versions were written in.
func Record(ctx context.Context, tx *sql.Tx, evs []Event) error {
	if len(evs) == 0 {
		return nil
	}
	var q strings.Builder
	q.WriteString("INSERT INTO erpsync_events (event_id, entity, entity_key, op, version, run_id, body, recorded_at) VALUES ")
	args := make([]any, 0, 7*len(evs))
	var err error
	for i, ev := range evs {
		if !validOp(ev.Op) {
			return fmt.Errorf("record event: op %q: want insert, update, delete or restore", ev.Op)
		}
		kt := string(ev.KeyJSON)
		if ev.DataJSON == nil {
			var err error
			if kt, err = KeyText(ev.Key); err != nil {
				return err
			}
		}
		if len(kt) > maxKeyText {
			return fmt.Errorf("record event of %s: key %s is longer than %d bytes", ev.Entity, kt, maxKeyText)
		}
		id := ID(ev.Entity, kt, ev.Version, ev.Op)
		var body []byte
		if ev.DataJSON != nil {
			body = appendBody(make([]byte, 0, 96+len(kt)+len(ev.DataJSON)), id, &evs[i], kt)
		} else if body, err = json.Marshal(Body{ID: id, Entity: ev.Entity, Op: ev.Op, Key: ev.Key, Version: ev.Version, RunID: ev.RunID, Data: ev.Data}); err != nil {
			return fmt.Errorf("encode event of %s %s: %w", ev.Entity, kt, err)
		}
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteString("(?, ?, ?, ?, ?, ?, ?, UTC_TIMESTAMP(3))")
		args = append(args, id, ev.Entity, kt, ev.Op, ev.Version, ev.RunID, string(body))
	}
	q.WriteString(" ON DUPLICATE KEY UPDATE id = id")
	if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
		return fmt.Errorf("record events: %w", err)
	}
	return nil
}
