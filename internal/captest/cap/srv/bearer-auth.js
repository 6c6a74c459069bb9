const cds = require('@sap/cds')

// A bearer-token authentication, which CAP does not have built in: with
// cds.requires.auth {"impl":"srv/bearer-auth.js","token":"T"}, a request
// needs "Authorization: Bearer T" and gets 401 without it.
module.exports = function bearer_auth(options) {
  if (!options.token) throw new Error('bearer-auth: cds.requires.auth.token is empty')
  const want = `Bearer ${options.token}`
  return function bearer_auth(req, res, next) {
    if (req.headers.authorization !== want) {
      return res.set('WWW-Authenticate', 'Bearer').status(401).json({ error: { code: '401', message: 'Unauthorized' } })
    }
    cds.context.user = req.user = new cds.User({ id: 'erpsync' })
    next()
  }
}
