// The ERP's memberships, under SAP-style names. LastChangeDateTime is the
// only change marker of Memberships: it has no integer version.
namespace erp;

entity Memberships {
  key MembershipID       : String(36);
  BusinessPartner    : String(20) not null;
  Product            : String(40) not null;
  // active, suspended, cancelled or expired
  LifecycleStatus    : String(10) not null;
  ValidFrom          : Date not null;
  ValidTo            : Date;
  LastChangeDateTime : Timestamp @cds.on.insert: $now @cds.on.update: $now;
}

// The same data with an integer version, for a mapped version property:
// ChangeCounter starts at 1 and every UPDATE adds one (srv/erp-service.js).
entity VersionedMemberships : Memberships {
  ChangeCounter : Integer not null default 1 @readonly;
}
