// Package odata reads memberships from an OData v4 entity set (SAP
// S/4HANA, SAP CAP, Microsoft Dynamics 365 and Business Central, any
// server that implements $filter, $orderby, $select, $top and /$count).
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
// Only an empty page ends the feed: servers cap a page at their own limit
// and serve fewer rows than $top with more to come. Server paging follows
// @odata.nextLink instead (relative links resolve against the request
// URL); when the server's link holds an offset, as SAP CAP's does by
// default, a record that changes during the sync shifts every later row
// back by one and the row at the page boundary is skipped until the next
// run reads it from its overlap (or never, when it does not change
// again and the checkpoint has passed it).
//
// Items are decoded and validated by erp.Mapping with the rules of the
// REST feed; an invalid item is quarantined and never written. The
// requests go through an erp.Getter: retries on 5xx, 408 and 429
// (Retry-After honoured), a timeout per attempt, a body cap, the shared
// rate, basic, bearer or OAuth 2.0 client credentials authentication, and
// OData error bodies reported in one line. 401 and 403 are never retried.
//
// What it does NOT do: it reads no $metadata, so erp_id must be a string
// property (an Edm.Guid key needs its literal unquoted; map a string
// property such as a number instead), and it sees no deletions (OData v4
// delta links are not used; reconcile finds records that are gone).
package odata
