// Documents for the config file's children: sales orders, each a header
// with a composition of lines, written whole by deep PATCHes.
namespace orders;

entity SalesOrders {
  key OrderNo   : String(10);
  Company       : String(4) not null;
  Customer      : String(10) not null;
  OrderDate     : Date not null;
  // The sum of the lines' NetAmount, as the writer computed it.
  TotalAmount   : Decimal(15, 2) not null;
  Note          : String(80);
  ChangedAt     : Timestamp @cds.on.insert: $now @cds.on.update: $now;
  // Starts at 1; every UPDATE adds one (srv/orders-service.js), a PATCH
  // that changes only the lines too.
  ChangeCounter : Integer not null default 1 @readonly;
  Items         : Composition of many SalesOrderItems on Items.up_ = $self;
}

// The lines of a sales order, written only through their order: a PATCH of
// the order with its Items array inserts, updates and deletes lines.
entity SalesOrderItems {
  key up_    : Association to SalesOrders;
  key ItemNo : Integer;
  Material   : String(40) not null;
  Quantity   : Decimal(13, 3) not null;
  NetAmount  : Decimal(15, 2) not null;
  // An exact decimal of up to 28 digits, served as text: SQLite keeps a
  // Decimal as a double, which rounds past 15 significant digits.
  UnitPrice  : String(32) not null;
  Batch      : String(10);
}
