// Package discover writes a first config file for an OData v4 service
// from its $metadata: an entity per entity set, with the key, a typed
// column per property (a structured property's as dotted paths such as
// Address.City) and a guessed change cursor (updated_at) and version.
//
// The Edm types map to the column types of the config file: Edm.String
// with MaxLength to string(N), without it to text; Edm.Decimal with
// Precision and Scale to decimal(P,S) (without Precision to
// decimal(38,10), a guess to check); the integers to int32 or int64;
// Edm.Boolean, Edm.Date and Edm.DateTimeOffset to bool, date and
// datetime (with Precision P, datetime(P); past 6, datetime(6) with a
// comment: a seventh non-zero digit is quarantined); Edm.Guid to string(36); Edm.Double and Edm.Single to json,
// which keeps a binary float as the server wrote it (no decimal column
// holds every double, and OData writes INF and NaN as strings).
// Collections become json too. A property of any other type is left out
// with a comment naming its type.
//
// updated_at is guessed from the Edm.DateTimeOffset properties named like
// a change time (modifiedAt, LastChangeDateTime, lastModifiedDateTime,
// SystemModifiedAt, ChangedAt, ...), version from an Edm.Int32 or
// Edm.Int64 change counter (ChangeCounter, version, an integer named by
// Core.OptimisticConcurrency). Each guess carries a YAML comment saying
// what a person should check; a change cursor that counts less than
// milliseconds in an entity without a version carries a WARNING (two
// changes within one of its steps share a version). An entity set without a change timestamp
// is written commented out, with the reason.
//
// A composition becomes a child (children:, the record's lines): a
// navigation property that contains its target (ContainsTarget), or a
// collection deleted with its record (OnDelete Cascade, as SAP CAP writes
// a composition) or whose entity type has no entity set. The child reads
// the target's properties but those that hold the parent's key (the
// referential constraints of the partner navigation property), its key is
// the target's key without them, and its table is <entity>_<child>. A
// composition that cannot be a child (a single entity, lines without a
// key of their own, a key too wide for an index) and any other navigation
// property get a comment saying why they are not synced.
//
// What it does NOT promise: that a guess is right. The names say what a
// property probably is, not that the server sets it on every change, nor
// that its $filter accepts it; the comments say what to check. The file
// never holds a credential: the URL's user, password and query are left
// out. That a composition's lines are not also served elsewhere: an
// entity set of the lines is written as an entity of its own too (mostly
// commented out, as lines rarely carry a change timestamp).
package discover
