// A typed sales service for the config file's entities: a composite key,
// Decimal, Int64 past 2^53, Boolean, Date, nullable and bounded strings, a
// structured element, a managed modifiedAt (and createdAt, which the config
// file must rename: created_at is one of erpsync's own columns), and a
// document: SalesOrders with a composition of Items.
//
// CAP 9 on SQLite serves a structured element flattened, in $metadata and
// in JSON alike (Address_City). With cds.odata.structs its $metadata turns
// structured (Address/City) while its JSON stays flat, so it stays off.
namespace sales;

using { managed } from '@sap/cds/common';

type Address {
  Street     : String(60);
  City       : String(40);
  PostalCode : String(10);
  Country    : String(3);
}

entity Customers : managed {
  key CompanyCode : String(4);
  key Customer    : String(10);
  CustomerName    : String(80) not null;
  CreditLimit     : Decimal(15, 2);
  IsBlocked       : Boolean not null default false;
  FoundedOn       : Date;
  // Served exact as a string (cds.features.ieee754compatible), also past 2^53.
  Rating          : Int64;
  // A active, B blocked
  Status          : String(1) not null default 'A';
  Address         : Address;
  // Starts at 1; every UPDATE adds one (srv/sales-service.js).
  ChangeCounter   : Integer not null default 1 @readonly;
}

entity SalesOrders : managed {
  key OrderID : String(10);
  CompanyCode : String(4) not null;
  Customer    : String(10) not null;
  OrderDate   : Date not null;
  NetAmount   : Decimal(15, 2);
  Currency    : String(3) not null default 'EUR';
  Items       : Composition of many SalesOrderItems on Items.up_ = $self;
}

// The lines of a sales order: written only through their order (a PATCH of
// the order with its Items array replaces them).
entity SalesOrderItems {
  key up_    : Association to SalesOrders;
  key ItemNo : Integer;
  Material   : String(40) not null;
  Quantity   : Decimal(13, 3) not null;
  NetAmount  : Decimal(15, 2);
}
