using orders from '../db/orders';

// Served at /odata/v4/orders, with the authentication of ErpService.
// SalesOrderItems is reachable only through its order ($expand=Items).
@path    : 'orders'
@requires: 'authenticated-user'
service OrdersService {
  entity SalesOrders as projection on orders.SalesOrders;
}
