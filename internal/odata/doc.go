// Package odata reads memberships, or the records of any declared entity,
// from an OData v4 (or V2, below) entity set (SAP S/4HANA, SAP CAP, Microsoft Dynamics
// 365 and Business Central, any server that implements $filter, $orderby,
// $select, $top and /$count).
// A Source provides what the syncer, verify and the command line need of
// a feed: pages in (updated_at, erp_id) order within a window of
// updated_at, a count, and request counters.
//
// Keyset paging, the default, asks each page with a $filter after the
// last (updated_at, erp_id) it served:
//
//	$filter=M ge S and M lt U and (M gt T or (M eq T and K gt 'k'))&$orderby=M,K&$top=N
//
// so a record that changes while a sync pages moves to the end of the
// feed, where the same sync reads it again, and no other record moves.
// Only an empty page without @odata.nextLink ends the feed: servers cap a
// page at their own limit and serve fewer rows than $top with more to
// come, and a server that drops rows from a page after cutting it (row
// security applied late) can serve none with a next link, which the
// source follows. Server paging follows @odata.nextLink instead (relative
// links resolve against the request URL). Under either, 100 pages in a row
// with no item and a next link fail the pass: the server is stuck, not
// paging. When the server's link holds an offset, as SAP CAP's does by
// default, a record that changes during the sync shifts every later row
// back by one and the row at the page boundary is skipped. Later runs read
// from their checkpoint, past that row, so it stays missing until it
// changes again or a backfill reads its time range.
//
// Membership items are decoded and validated by erp.Mapping with the
// rules of the REST feed, typed ones by their erp.Schema; an invalid item is quarantined and never written. The
// requests go through an erp.Getter: retries on 5xx, 408 and 429
// (Retry-After honoured), a timeout per attempt, a body cap, the shared
// rate, basic, bearer or OAuth 2.0 client credentials authentication, and
// OData error bodies reported in one line. 401 and 403 are never retried.
//
// Config.Schema reads any entity of the config file instead (an
// erp.Schema): $select of the top-level properties it reads, $filter and
// $orderby on its updated_at property, then on every key property the
// source does not set, in key order, the keyset condition nested over a
// composite key (K1 gt v1 or (K1 eq v1 and K2 gt v2)); numbers, booleans,
// dates and date-times are written bare, strings quoted (or bare for an
// Edm.Guid, as below). A key column with values is refused: the filter
// compares the values the server holds, which a record does not keep.
// When the entity has decimal or int64 columns the source asks
// Accept: application/json;IEEE754Compatible=true, and reads their values
// exactly whether the server sends numbers or strings.
//
// An entity with children (a document: a header and its lines) asks each
// child's collection with $expand of its navigation property (the child's
// from, one name) and the lines' top-level properties, the navigation
// property left out of $select:
//
//	$select=OrderNo,Customer,ChangedAt&$expand=Items($select=ItemNo,Material,Quantity)
//
// and IEEE754Compatible=true when a child has a decimal or int64 column.
// A record counts as read only with every line: an expanded collection
// the server cut short (<nav>@odata.nextLink in the record) is followed to
// its end, each link resolved against the request that served it, with
// the same client, headers, retries and timeouts as a page, and its lines
// appended; a request that fails fails the page, so no checkpoint passes
// the record. A <nav>@odata.count above the lines that came makes the
// record invalid. The record's raw item, as quarantined, holds the whole
// collection.
//
// erp_id must be a string or Edm.Guid property. When a key value looks
// like a GUID, the source reads $metadata (from the nearest path above the
// entity set that serves it) to learn whether the property is an Edm.Guid,
// whose literal is written unquoted, and keeps the type once a document
// has declared it. A read that fails (network, 5xx, a document that is no
// CSDL) is not kept: the page that needed the literal fails with an error
// naming $metadata, and the next page reads it again. No literal is
// guessed, since the server answers a wrong one with 400.
//
// OData V2 (SAP Gateway, S/4HANA's published APIs) is read too, in v2.go:
// Config.Version chooses V4 (the default), V2, or VersionAuto, which reads
// $metadata once (EDMX Version="1.0" with a DataServiceVersion of 1.0 to
// 3.0 is V2; a service with no $metadata is V4). Under V2 the source keeps
// the Edm types $metadata declares for the entity set and its children and
// asks with V2's literals (datetimeoffset'...', datetime'...' for an
// Edm.DateTime, guid'...', 12L, 1.5M), $select of Nav/Property with
// $expand=Nav, $format=json and no Prefer; it reads {"d":{"results":[...],
// "__next":...}}, follows an expansion's nested __next to its end, drops
// __metadata and {"__deferred":...}, and rewrites /Date(ms)/ (UTC; a date
// when the column or sap:display-format says so), ISO date-times without
// a zone (UTC) and Edm.Time (PT12H30M15S as 12:30:15) as V4 writes them
// before the decoders read an item. The query of the entity set URL
// (sap-client=100) goes with every request, under either version.
//
// What it does NOT do: it reads nothing else of $metadata, and it sees no
// deletions (OData v4 delta links are not used; reconcile finds records
// that are gone).
package odata
