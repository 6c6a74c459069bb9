// countChanges makes every UPDATE of entity add one to its ChangeCounter,
// in the UPDATE's own transaction.
module.exports = function countChanges(srv, entity) {
  srv.before('UPDATE', entity, async (req) => {
    const row = await SELECT.one.from(req.subject).columns('ChangeCounter')
    if (row) req.data.ChangeCounter = row.ChangeCounter + 1
  })
}
