const cds = require('@sap/cds')
const countChanges = require('./change-counter')

// OrdersService bumps SalesOrders.ChangeCounter on every UPDATE, in the
// UPDATE's own transaction: a deep PATCH that changes only the lines too.
module.exports = class OrdersService extends cds.ApplicationService {
  init() {
    countChanges(this, this.entities.SalesOrders)
    return super.init()
  }
}
