// SPDX-License-Identifier: Apache-2.0
// A Node.js http server that the tests run under the shim (libuv: accept4,
// read, writev). Listens on 127.0.0.1:<free port>, prints {"port": N} once
// listening, exits with status 0 on SIGTERM/SIGINT.
//   GET  /hello       200, a fixed body (Content-Length)
//   GET  /users/<id>  200, JSON
//   POST /echo        201, the request body echoed
//   GET  /chunked     200, three res.write() pieces (Transfer-Encoding: chunked)
//   GET  /slow        200 after 0.3 s
//   GET  /fail        500
//   anything else     404
'use strict';
const http = require('http');

const CHUNKS = ['alpha-'.repeat(50), 'beta-'.repeat(30), 'gamma\n'];

const server = http.createServer((req, res) => {
  const path = req.url.split('?')[0];
  const body = [];
  req.on('data', (c) => body.push(c));
  req.on('end', () => {
    let m;
    if (req.method === 'GET' && path === '/hello') {
      const b = Buffer.from('hello from node\n');
      res.writeHead(200, { 'Content-Type': 'text/plain', 'Content-Length': b.length });
      res.end(b);
    } else if (req.method === 'GET' && (m = /^\/users\/([^/]+)$/.exec(path))) {
      const b = Buffer.from(JSON.stringify({ id: m[1], name: `user-${m[1]}` }));
      res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': b.length });
      res.end(b);
    } else if (req.method === 'POST' && path === '/echo') {
      const b = Buffer.concat(body);
      res.writeHead(201, { 'Content-Type': 'application/octet-stream', 'Content-Length': b.length });
      res.end(b);
    } else if (req.method === 'GET' && path === '/chunked') {
      res.writeHead(200, { 'Content-Type': 'text/plain' });
      let i = 0;
      const next = () => {
        if (i < CHUNKS.length) {
          res.write(CHUNKS[i++]);
          setTimeout(next, 10);
        } else {
          res.end();
        }
      };
      next();
    } else if (req.method === 'GET' && path === '/slow') {
      setTimeout(() => {
        const b = Buffer.from('finally\n');
        res.writeHead(200, { 'Content-Type': 'text/plain', 'Content-Length': b.length });
        res.end(b);
      }, 300);
    } else if (req.method === 'GET' && path === '/fail') {
      const b = Buffer.from('failing on purpose\n');
      res.writeHead(500, { 'Content-Type': 'text/plain', 'Content-Length': b.length });
      res.end(b);
    } else {
      const b = Buffer.from('not found\n');
      res.writeHead(404, { 'Content-Type': 'text/plain', 'Content-Length': b.length });
      res.end(b);
    }
  });
});
server.keepAliveTimeout = 30000;
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(JSON.stringify({ port: server.address().port }) + '\n');
});
const stop = () => {
  server.close(() => process.exit(0));
  server.closeAllConnections();
  setTimeout(() => process.exit(0), 2000).unref();
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
