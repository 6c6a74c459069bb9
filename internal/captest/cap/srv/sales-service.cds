using sales from '../db/sales';

// Served at /odata/v4/sales, with the authentication of ErpService.
@path    : 'sales'
@requires: 'authenticated-user'
service SalesService {
  entity Customers   as projection on sales.Customers;
  entity SalesOrders as projection on sales.SalesOrders;
}
