using erp from '../db/schema';

// Served at /odata/v4/erp. Basic auth with the users of cds.requires.auth
// (kind basic); kind dummy turns authentication off.
@path    : 'erp'
@requires: 'authenticated-user'
service ErpService {
  entity Memberships          as projection on erp.Memberships;
  entity VersionedMemberships as projection on erp.VersionedMemberships;
}
