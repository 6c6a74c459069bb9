const cds = require('@sap/cds')

// ErpService bumps VersionedMemberships.ChangeCounter on every UPDATE, in
// the UPDATE's own transaction.
module.exports = class ErpService extends cds.ApplicationService {
  init() {
    const { VersionedMemberships } = this.entities
    this.before('UPDATE', VersionedMemberships, async (req) => {
      const row = await SELECT.one.from(req.subject).columns('ChangeCounter')
      if (row) req.data.ChangeCounter = row.ChangeCounter + 1
    })
    return super.init()
  }
}
