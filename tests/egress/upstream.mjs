// SPDX-License-Identifier: Apache-2.0
// The test hosts' servers, run inside the host namespace (see netns.sh).
// Every accepted connection is appended to LOG as "conn LOCALADDR LOCALPORT"
// at once, so a test can check from outside whether a host was reached.
//   80, 8080   HTTP: serves files under WWW (for git), otherwise answers with
//              a JSON echo of what arrived (method, target, raw headers, body)
//   7, 443     TCP echo
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';

const [log, www] = process.argv.slice(2);

function record(sock) {
  const a = sock.localAddress.replace(/^::ffff:/, '');
  fs.appendFileSync(log, `conn ${a} ${sock.localPort}\n`);
}

function httpServer() {
  const s = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const rel = decodeURIComponent(req.url.split('?')[0]);
      const file = path.join(www, path.normalize(rel));
      if (file.startsWith(www + '/') && fs.existsSync(file) && fs.statSync(file).isFile()) {
        const data = fs.readFileSync(file);
        res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': data.length });
        res.end(data);
        return;
      }
      const body = Buffer.concat(chunks);
      // Every request, apart from the connection log: a smuggled request
      // shows up here as a second line for one connection.
      fs.appendFileSync(`${log}.req`, `req ${req.socket.localAddress.replace(/^::ffff:/, '')} ${req.method} ${req.url} ${body.length}\n`);
      const out = Buffer.from(JSON.stringify({
        local: req.socket.localAddress.replace(/^::ffff:/, ''),
        port: req.socket.localPort,
        method: req.method, url: req.url, headers: req.rawHeaders,
        body: body.toString('base64'),
      }));
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': out.length });
      res.end(out);
    });
  });
  s.on('connection', record);
  return s;
}

function echoServer() {
  return net.createServer((sock) => {
    record(sock);
    sock.on('error', () => {});
    sock.pipe(sock);
  });
}

const listeners = [];
for (const [port, make] of [[80, httpServer], [8080, httpServer], [7, echoServer], [443, echoServer]]) {
  for (const host of ['0.0.0.0', '::']) {
    const srv = make();
    srv.maxConnections = 4000;
    listeners.push(new Promise((ok, bad) => {
      srv.on('error', bad);
      srv.listen({ port, host, ipv6Only: host === '::', backlog: 2048 }, ok);
    }));
  }
}
await Promise.all(listeners);
console.log('ready');
