// SPDX-License-Identifier: Apache-2.0
// The pieces the panel's browser test and its benchmark share: a loopback
// echo upstream that counts and timestamps what it accepts, a control
// connection, a CONNECT client on a session's proxy socket, and a
// `shinken daemon` serving the panel.
'use strict';

const child = require('child_process');
const fs = require('fs');
const net = require('net');
const path = require('path');
const { performance } = require('perf_hooks');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// A loopback echo server that counts the connections it accepts.
function upstream() {
  const up = { count: 0, accepted_at: [] };
  up.srv = net.createServer((c) => {
    up.count++;
    // In milliseconds since the epoch, to a fraction (the page's
    // performance.timeOrigin + now() is on the same clock).
    up.accepted_at.push(performance.timeOrigin + performance.now());
    c.on('error', () => {});
    c.pipe(c);
  });
  return new Promise((res) => up.srv.listen(0, '127.0.0.1', () => { up.port = up.srv.address().port; res(up); }));
}

// A control connection: one JSON line out, one back.
function control(sock) {
  const c = net.connect(sock);
  let buf = '';
  const waiting = [];
  c.on('data', (d) => {
    buf += d;
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      const w = waiting.shift();
      if (w) w(JSON.parse(line));
    }
  });
  return {
    call: (req) => new Promise((res) => { waiting.push(res); c.write(JSON.stringify(req) + '\n'); }),
    close: () => c.end(),
  };
}

// CONNECT through a session's proxy socket. The promise settles when the
// answer's head has come: {status, head, sock, closed (a promise), rest()
// (every byte after the head so far)}.
function proxyConnect(edir, host, port) {
  return new Promise((res) => {
    const s = net.connect(path.join(edir, 'http.sock'));
    let buf = Buffer.alloc(0);
    let done = false;
    let headLen = 0;
    const closed = new Promise((r) => s.on('close', r));
    s.on('error', () => {});
    const rest = () => buf.subarray(headLen).toString('latin1');
    s.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      const i = buf.indexOf('\r\n\r\n');
      if (i < 0 || done) return;
      done = true;
      headLen = i + 4;
      const head = buf.subarray(0, headLen).toString('latin1');
      const m = /^HTTP\/1\.[01] (\d+)/.exec(head);
      res({ status: m ? Number(m[1]) : 0, head, sock: s, closed, rest });
    });
    s.on('close', () => { if (!done) { done = true; res({ status: -1, head: '', sock: s, closed, rest }); } });
    s.write(`CONNECT ${host}:${port} HTTP/1.1\r\nHost: ${host}\r\n\r\n`);
  });
}

// Bytes through an open tunnel come back from the echo upstream.
function echoes(sock) {
  return new Promise((res) => {
    const t = setTimeout(() => res(false), 5000);
    sock.once('data', (d) => { clearTimeout(t); res(d.toString() === 'ping'); });
    sock.write('ping');
  });
}

function startDaemon(SHINKEN, dir, conf) {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const file = path.join(dir, 'daemon.json');
  fs.writeFileSync(file, JSON.stringify(conf));
  const env = Object.assign({}, process.env, { SHINKEN_SOCKET: conf.socket });
  const p = child.spawn(SHINKEN, ['daemon', '--config', file], { env, stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((res, rej) => {
    let out = '';
    p.stdout.on('data', (d) => {
      out += d;
      const m = /^panel (\S+)$/m.exec(out);
      if (m) res({ p, url: m[1], env, file });
    });
    p.on('exit', (code) => rej(new Error(`the daemon exited (${code}): ${out}`)));
  });
}

function cli(SHINKEN, env, ...argv) {
  const r = child.spawnSync(SHINKEN, argv, { env, encoding: 'utf8', timeout: 30000 });
  return { status: r.status, out: r.stdout, err: r.stderr };
}

module.exports = { sleep, upstream, control, proxyConnect, echoes, startDaemon, cli };
