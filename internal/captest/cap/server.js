const cds = require('@sap/cds')

// The server listens on HOST (default 127.0.0.1, not every interface as
// cds.server does) and, once listening, prints one line with its address,
// which tests read to learn the port of --port 0.
cds.on('bootstrap', (app) => {
  const listen = app.listen.bind(app)
  app.listen = (port, ...rest) => listen(port, process.env.HOST || '127.0.0.1', ...rest)
})
cds.once('listening', ({ server }) => {
  const { address, port } = server.address()
  console.log(`erp-cap listening on ${address}:${port}`)
})

module.exports = cds.server
