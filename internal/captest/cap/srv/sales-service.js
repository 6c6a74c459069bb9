const cds = require('@sap/cds')
const countChanges = require('./change-counter')

// SalesService bumps Customers.ChangeCounter on every UPDATE, in the
// UPDATE's own transaction.
module.exports = class SalesService extends cds.ApplicationService {
  init() {
    countChanges(this, this.entities.Customers)
    return super.init()
  }
}
