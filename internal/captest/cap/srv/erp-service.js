const cds = require('@sap/cds')
const countChanges = require('./change-counter')

// ErpService bumps VersionedMemberships.ChangeCounter on every UPDATE, in
// the UPDATE's own transaction.
module.exports = class ErpService extends cds.ApplicationService {
  init() {
    countChanges(this, this.entities.VersionedMemberships)
    return super.init()
  }
}
