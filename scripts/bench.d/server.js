// SPDX-License-Identifier: Apache-2.0
// The Node.js peer of scripts/bench: a plain http server answering every
// request with a small fixed body. Run bare, under the shim (LD_PRELOAD), or
// under OpenTelemetry's zero-code instrumentation
// (node --require @opentelemetry/auto-instrumentations-node/register).
// Listens on 127.0.0.1:<argv[2] or 0> and prints the port on stdout.
'use strict';
const http = require('http');
const body = Buffer.from('hello from the node peer\n');
const server = http.createServer((req, res) => {
  res.writeHead(200, { 'Content-Type': 'text/plain', 'Content-Length': body.length });
  res.end(body);
});
server.keepAliveTimeout = 60000;
server.listen(Number(process.argv[2] || 0), '127.0.0.1', () => {
  process.stdout.write(`${server.address().port}\n`);
});
const stop = () => server.close(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
