// SPDX-License-Identifier: Apache-2.0
// Shared machinery of the egress cases: the proxy under test, a raw client
// connection, a SOCKS5 client, the test resolver, the loopback canary and
// the record of which test host was reached. Runs inside the proxy
// namespace (see netns.sh); the upstream log is written by upstream.mjs.
import { spawn } from 'node:child_process';
import dgram from 'node:dgram';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';

export const SHINKEN = process.env.SHINKEN;
export const TMP = process.env.EG_TMP;
export const UPLOG = path.join(TMP, 'upstream.log');
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---- case accounting: every case prints one line; any failure fails the test.
let passed = 0, failed = 0;
export async function t(name, fn) {
  try {
    await fn();
    passed++;
    console.log(`ok - ${name}`);
  } catch (e) {
    failed++;
    console.log(`not ok - ${name}: ${e && e.message ? e.message : e}`);
  }
}
export function ok(cond, msg) { if (!cond) throw new Error(msg); }
export function finish(group) {
  console.log(`${group}: ${passed} passed, ${failed} failed`);
  process.exit(failed || passed === 0 ? 1 : 0);
}

// ---- the proxy under test
let cfgN = 0;
export async function startProxy(cfg, { wantListen = true } = {}) {
  const file = path.join(TMP, `proxy-${cfgN++}.json`);
  fs.writeFileSync(file, typeof cfg === 'string' ? cfg : JSON.stringify(cfg, null, 1));
  const proc = spawn(SHINKEN, ['proxy', '--config', file], { stdio: ['ignore', 'pipe', 'pipe'] });
  const px = { proc, file, out: [], errText: '', http: 0, socks: 0, code: undefined, signal: undefined };
  px.exited = new Promise((res) => proc.on('exit', (code, signal) => { px.code = code; px.signal = signal; res(); }));
  let outBuf = '';
  proc.stdout.on('data', (d) => {
    outBuf += d;
    let i;
    while ((i = outBuf.indexOf('\n')) >= 0) {
      const line = outBuf.slice(0, i); outBuf = outBuf.slice(i + 1);
      px.out.push(line);
      const m = /^listening (http|socks5) 127\.0\.0\.1:(\d+)$/.exec(line);
      if (m) px[m[1] === 'http' ? 'http' : 'socks'] = Number(m[2]);
    }
  });
  proc.stderr.on('data', (d) => { px.errText += d; });
  px.audit = () => px.errText.split('\n').filter((l) => l.startsWith('{')).map((l) => {
    try { return JSON.parse(l); } catch { return { unparsable: l }; }
  });
  px.stop = async () => {
    if (px.code === undefined && px.signal === undefined) proc.kill('SIGTERM');
    const to = sleep(10000).then(() => 'timeout');
    if (await Promise.race([px.exited, to]) === 'timeout') { proc.kill('SIGKILL'); await px.exited; return false; }
    return true;
  };
  px.sanitizerReport = () => /(AddressSanitizer|LeakSanitizer|runtime error:|UndefinedBehaviorSanitizer)/.test(px.errText);
  if (!wantListen) {
    // A configuration that should be refused but is accepted leaves a
    // running proxy: give it a moment, then stop it and report that.
    const to = sleep(8000).then(() => 'timeout');
    if (await Promise.race([px.exited, to]) === 'timeout') { proc.kill('SIGKILL'); await px.exited; px.code = 'still running'; }
    return px;
  }
  const want = typeof cfg === 'object' && cfg.listen ? Object.keys(cfg.listen).length : 2;
  const t0 = Date.now();
  while (px.out.filter((l) => l.startsWith('listening ')).length < want) {
    if (px.code !== undefined || px.signal) throw new Error(`proxy exited ${px.code ?? px.signal}: ${px.errText.trim().slice(0, 400)}`);
    if (Date.now() - t0 > 15000) { proc.kill('SIGKILL'); throw new Error('proxy did not print its listeners within 15 s'); }
    await sleep(20);
  }
  return px;
}

// Every group ends by stopping its proxies; a sanitizer report or a proxy
// that does not exit on SIGTERM is a failure of its own.
export async function stopChecked(px, name) {
  await t(`${name}: proxy exits on SIGTERM without a sanitizer report`, async () => {
    ok(await px.stop(), 'did not exit within 10 s of SIGTERM');
    ok(!px.sanitizerReport(), `sanitizer report: ${px.errText.slice(px.errText.search(/Sanitizer|runtime error/) - 200).slice(0, 600)}`);
  });
}

// ---- a raw client connection, read by predicate
export class Conn {
  // PORT is a TCP port on HOST, or the path of a session's unix socket.
  static open(port, host = '127.0.0.1') {
    return new Promise((res, rej) => {
      const c = new Conn();
      c.sock = net.connect(typeof port === 'string' ? { path: port } : { port, host });
      c.buf = Buffer.alloc(0); c.closed = false; c.waiters = [];
      c.sock.on('data', (d) => { c.buf = Buffer.concat([c.buf, d]); c.wake(); });
      c.sock.on('close', () => { c.closed = true; c.wake(); });
      c.sock.on('error', () => {});
      c.sock.once('connect', () => res(c));
      c.sock.once('error', rej);
    });
  }
  wake() { for (const w of this.waiters.splice(0)) w(); }
  write(b) { this.sock.write(typeof b === 'string' ? Buffer.from(b, 'latin1') : b); }
  // Waits until fn(buf, closed) returns non-undefined, or the timeout.
  async until(fn, ms = 5000) {
    const end = Date.now() + ms;
    for (;;) {
      const v = fn(this.buf, this.closed);
      if (v !== undefined) return v;
      if (this.closed || Date.now() > end) return fn(this.buf, true) ?? null;
      await Promise.race([new Promise((r) => this.waiters.push(r)), sleep(Math.max(1, end - Date.now()))]);
    }
  }
  async take(n, ms) {
    const v = await this.until((b) => (b.length >= n ? true : undefined), ms);
    if (!v || this.buf.length < n) return null;
    const out = this.buf.subarray(0, n); this.buf = this.buf.subarray(n);
    return out;
  }
  // One HTTP response: {status, headers, body}; status 0 when the proxy
  // closed or said nothing in time.
  async response(ms = 5000, { tunnel = false } = {}) {
    const r = await this.until((b, closed) => {
      const e = b.indexOf('\r\n\r\n');
      if (e < 0) return closed ? { status: 0, raw: b.toString('latin1') } : undefined;
      const head = b.subarray(0, e).toString('latin1').split('\r\n');
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(head[0]);
      const headers = {};
      for (const l of head.slice(1)) {
        const i = l.indexOf(':');
        headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
      }
      const cl = headers['content-length'];
      let len;
      // A successful CONNECT's reply has no body: the tunnel follows.
      if (tunnel && m && m[1].startsWith('2')) len = 0;
      else if (cl !== undefined) len = Number(cl);
      else if (!closed) return undefined;
      else len = b.length - e - 4;
      if (b.length < e + 4 + len) return closed ? { status: 0, raw: b.toString('latin1') } : undefined;
      this.buf = b.subarray(e + 4 + len);
      return { status: m ? Number(m[1]) : 0, headers, body: b.subarray(e + 4, e + 4 + len).toString('latin1') };
    }, ms);
    return r ?? { status: 0 };
  }
  close() { this.sock.destroy(); }
}

export async function rawHttp(port, text, ms) {
  let c;
  try { c = await Conn.open(port); } catch (e) { return { status: 0, error: e.message }; }
  c.write(text);
  const r = await c.response(ms);
  c.close();
  return r;
}

export function get(px, target, { host, headers = [], method = 'GET', body = '' } = {}) {
  const h = host ?? target.replace(/^[a-zA-Z]+:\/\//, '').split('/')[0];
  const extra = headers.map((x) => x + '\r\n').join('');
  const cl = body ? `Content-Length: ${Buffer.byteLength(body, 'latin1')}\r\n` : '';
  return rawHttp(px.http, `${method} ${target} HTTP/1.1\r\nHost: ${h}\r\n${extra}${cl}Connection: close\r\n\r\n${body}`);
}

// CONNECT host:port; resolves {status, conn} with the tunnel open on 200.
export async function connectTunnel(px, authority, hostHeader = authority) {
  let c;
  try { c = await Conn.open(px.http); } catch (e) { return { status: 0 }; }
  c.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${hostHeader}\r\n\r\n`);
  const r = await c.response(5000, { tunnel: true });
  if (r.status !== 200) c.close();
  return { ...r, conn: c };
}

// ---- SOCKS5 (RFC 1928): greeting, then one request.
export function socksAddr(atyp, addr) {
  if (atyp === 1) return Buffer.from(addr.split('.').map(Number));
  if (atyp === 4) return ip6bytes(addr);
  const b = Buffer.isBuffer(addr) ? addr : Buffer.from(addr, 'latin1');
  return Buffer.concat([Buffer.from([b.length]), b]);
}
export async function socks(px, atyp, addr, port, { cmd = 1, methods = [0], version = 5 } = {}) {
  let c;
  try { c = await Conn.open(px.socks); } catch (e) { return { rep: 'noconnect' }; }
  c.write(Buffer.from([version, methods.length, ...methods]));
  const g = await c.take(2, 3000);
  if (!g) { c.close(); return { rep: 'closed-at-greeting' }; }
  if (g[0] !== 5 || g[1] !== 0) { c.close(); return { rep: 'method', method: g[1] }; }
  const p = Buffer.alloc(2); p.writeUInt16BE(port);
  c.write(Buffer.concat([Buffer.from([5, cmd, 0, atyp]), socksAddr(atyp, addr), p]));
  const h = await c.take(4, 15000);
  if (!h) { c.close(); return { rep: 'closed' }; }
  const alen = h[3] === 1 ? 4 : h[3] === 4 ? 16 : null;
  let rest;
  if (alen !== null) rest = await c.take(alen + 2, 3000);
  else { const l = await c.take(1, 3000); rest = l && await c.take(l[0] + 2, 3000); }
  if (h[1] !== 0) c.close();
  return { rep: h[1], conn: c, complete: !!rest };
}

// Sends data through an open tunnel to an echo server and checks it comes
// back byte for byte.
export async function echoCheck(conn, data) {
  conn.write(data);
  const back = await conn.take(data.length, 15000);
  ok(back && Buffer.compare(back, data) === 0, `echo mismatch (${back ? back.length : 0} of ${data.length} bytes)`);
}

// ---- IPv6 text to bytes (enough for the test addresses).
export function ip6bytes(s) {
  const out = Buffer.alloc(16);
  let v4 = null;
  const m = /^(.*:)(\d+\.\d+\.\d+\.\d+)$/.exec(s);
  if (m) { s = m[1] + '0:0'; v4 = m[2]; }
  const [a, b] = s.split('::');
  const L = a ? a.split(':') : [];
  const R = b ? b.split(':') : [];
  const groups = b === undefined ? L : [...L, ...Array(8 - L.length - R.length).fill('0'), ...R];
  groups.forEach((g, i) => out.writeUInt16BE(parseInt(g, 16), i * 2));
  if (v4) v4.split('.').forEach((x, i) => { out[12 + i] = Number(x); });
  return out;
}

// ---- the test resolver: a UDP DNS server on loopback for dns_upstream.
// zone: name -> { A: [...], AAAA: [...] } | { rcode } | { drop: true } |
// { seq: [answer, answer, ...] } (the n-th A query gets the n-th answer, the
// last one repeating). Other names under .test answer A 10.77.0.2.
export async function startResolver(zone, port = 0, logFile = null) {
  const s = dgram.createSocket('udp4');
  const r = { zone, log: [], counts: {} };
  s.on('message', (q, rinfo) => {
    if (q.length < 17) return;
    let o = 12; const labels = [];
    while (o < q.length && q[o] !== 0) { labels.push(q.subarray(o + 1, o + 1 + q[o]).toString('latin1')); o += q[o] + 1; }
    const qend = o + 5;
    if (qend > q.length) return;
    const qtype = q.readUInt16BE(o + 1);
    const name = labels.join('.').toLowerCase();
    const tname = qtype === 1 ? 'A' : qtype === 28 ? 'AAAA' : String(qtype);
    r.log.push({ name, type: tname });
    if (logFile) fs.appendFileSync(logFile, `${name} ${tname}\n`);
    let e = zone[name];
    if (!e && name.endsWith('.test')) e = { A: ['10.77.0.2'] };
    if (!e) e = { rcode: 3 };
    if (e.seq) {
      const k = `${name}/${tname}`;
      const n = r.counts[k] = (r.counts[k] ?? 0) + 1;
      e = e.seq[Math.min(n, e.seq.length) - 1];
    }
    if (e.drop) return;
    const answers = (e[tname] ?? []).map((a) => (tname === 'A' ? Buffer.from(a.split('.').map(Number)) : ip6bytes(a)));
    const hdr = Buffer.alloc(12);
    q.copy(hdr, 0, 0, 2);
    hdr.writeUInt16BE(0x8180 | (q.readUInt16BE(2) & 0x0100) | (e.rcode ?? 0), 2);
    hdr.writeUInt16BE(1, 4); hdr.writeUInt16BE(answers.length, 6);
    const parts = [hdr, q.subarray(12, qend)];
    for (const a of answers) {
      const rr = Buffer.alloc(12);
      rr.writeUInt16BE(0xc00c, 0); rr.writeUInt16BE(qtype, 2); rr.writeUInt16BE(1, 4);
      rr.writeUInt32BE(0, 6); rr.writeUInt16BE(a.length, 10);
      parts.push(rr, a);
    }
    s.send(Buffer.concat(parts), rinfo.port, rinfo.address);
  });
  await new Promise((res) => s.bind(port, '127.0.0.1', res));
  r.port = s.address().port;
  r.addr = `127.0.0.1:${r.port}`;
  r.close = () => s.close();
  return r;
}

// ---- the canary: every loopback address of the proxy namespace, on every
// port the test hosts serve. A blocked case must never reach it.
export async function startCanary() {
  const c = { count: 0, seen: [] };
  const servers = [];
  for (const port of [80, 8080, 7, 443]) {
    for (const host of ['0.0.0.0', '::']) {
      const srv = net.createServer((sock) => {
        c.count++; c.seen.push(`${sock.localAddress}:${port}`);
        sock.on('error', () => {});
        sock.end('HTTP/1.1 200 OK\r\nContent-Length: 6\r\nConnection: close\r\n\r\ncanary');
      });
      servers.push(srv);
      await new Promise((res, rej) => { srv.on('error', rej); srv.listen({ port, host, ipv6Only: host === '::' }, res); });
    }
  }
  c.close = () => servers.forEach((s) => s.close());
  return c;
}

// ---- which test hosts were reached
export function upstreamLines() {
  try { return fs.readFileSync(UPLOG, 'utf8').split('\n').filter(Boolean); } catch { return []; }
}
// Runs fn and reports what it reached: the upstream log lines it added and
// the canary connections. The pause lets a late, wrongful dial show up.
export async function observe(canary, fn, settle = 100) {
  const u0 = upstreamLines().length, c0 = canary.count;
  const r = await fn();
  await sleep(settle);
  return { r, up: upstreamLines().slice(u0), canary: canary.count - c0, canarySeen: canary.seen.slice(c0) };
}

export function describe(o) {
  const r = o.r || {};
  return `status=${r.status ?? r.rep} decision=${r.headers?.['x-shinken-decision'] ?? '-'} up=[${o.up.join(',')}] canary=${o.canary}`;
}
// A blocked request: 403 with a decision header, and nothing was reached.
export function isBlocked(o) {
  ok(o.canary === 0, `reached the loopback canary (${o.canarySeen.join(',')}); ${describe(o)}`);
  ok(o.up.length === 0, `reached a test host: ${describe(o)}`);
  ok(o.r.status === 403, `expected 403: ${describe(o)}`);
  ok(o.r.headers['x-shinken-decision'], `403 without X-Shinken-Decision: ${describe(o)}`);
}
// Refused in some way (400 for a malformed request, 403 for policy), and
// nothing was reached.
export function isRefused(o) {
  ok(o.canary === 0, `reached the loopback canary (${o.canarySeen.join(',')}); ${describe(o)}`);
  ok(o.up.length === 0, `reached a test host: ${describe(o)}`);
  ok(o.r.status !== 200 && !(o.r.status >= 200 && o.r.status < 300), `not refused: ${describe(o)}`);
}
// Allowed, and reached exactly the expected test host.
export function isAllowed(o, addr = '10.77.0.2') {
  ok(o.canary === 0, `reached the loopback canary: ${describe(o)}`);
  ok(o.r.status === 200, `expected 200: ${describe(o)} ${o.r.body ? o.r.body.slice(0, 200) : ''}`);
  ok(o.up.length >= 1 && o.up.every((l) => l.startsWith(`conn ${addr} `)), `expected to reach ${addr}: ${describe(o)}`);
}
export function upstreamEcho(o) { return JSON.parse(o.r.body); }

// ---- sessions: the session host (session-host.c), one process holding
// several sessions, driven on stdin; its audit lines come on stderr.
export async function startHost({ nofile } = {}) {
  const exe = process.env.EG_SESSION_HOST;
  if (!exe) throw new Error('no session host (EG_SESSION_HOST)');
  // With NOFILE, the soft and hard descriptor limits of the host, as a
  // manager's might be.
  const proc = nofile
    ? spawn('sh', ['-c', `ulimit -n ${nofile} && exec "$0"`, exe], { stdio: ['pipe', 'pipe', 'pipe'] })
    : spawn(exe, [], { stdio: ['pipe', 'pipe', 'pipe'] });
  const h = { proc, answers: [], waiting: [], events: [], evWaiters: [], errText: '', code: undefined };
  h.exited = new Promise((res) => proc.on('exit', (code, signal) => { h.code = code ?? signal; res(); }));
  let buf = '';
  proc.stdout.on('data', (d) => {
    buf += d;
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i); buf = buf.slice(i + 1);
      if (/^(held|abandoned) /.test(line)) {
        const [kind, session, id, host, port, via] = line.split(' ');
        h.events.push({ kind, session, id, host, port: Number(port), via });
        for (const w of h.evWaiters.splice(0)) w();
      } else if (h.waiting.length) h.waiting.shift()(line);
      else h.answers.push(line);
    }
  });
  proc.stderr.on('data', (d) => { h.errText += d; });
  h.cmd = (line) => new Promise((res) => {
    h.waiting.push(res);
    proc.stdin.write(line + '\n');
  });
  // The first event since FROM (an index into h.events) that PRED accepts.
  h.event = async (pred, ms = 5000, from = 0) => {
    const end = Date.now() + ms;
    for (;;) {
      const e = h.events.slice(from).find(pred);
      if (e) return e;
      if (Date.now() > end) return null;
      await Promise.race([new Promise((r) => h.evWaiters.push(r)), sleep(Math.max(1, end - Date.now()))]);
    }
  };
  h.audit = () => h.errText.split('\n').filter((l) => l.startsWith('{')).map((l) => {
    try { return JSON.parse(l); } catch { return { unparsable: l }; }
  });
  let n = 0;
  h.open = async (name, cfg) => {
    const file = path.join(TMP, `session-${process.pid}-${n++}.json`);
    fs.writeFileSync(file, JSON.stringify(cfg));
    const a = await h.cmd(`open ${name} ${file}`);
    if (!a.startsWith('ok ')) throw new Error(`open ${name}: ${a}`);
    const dir = a.slice(3);
    return { name, dir, http: `${dir}/http.sock`, socks: `${dir}/socks5.sock`, dns: `${dir}/dns.sock` };
  };
  // CPU seconds the host has used (user + system).
  h.cpu = () => {
    const f = fs.readFileSync(`/proc/${proc.pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return (Number(f[11]) + Number(f[12])) / 100;
  };
  h.stop = async () => {
    proc.stdin.end();
    const to = sleep(15000).then(() => 'timeout');
    if (await Promise.race([h.exited, to]) === 'timeout') { proc.kill('SIGKILL'); await h.exited; return false; }
    return h.code === 0;
  };
  h.sanitizerReport = () => /(AddressSanitizer|LeakSanitizer|runtime error:|UndefinedBehaviorSanitizer)/.test(h.errText);
  return h;
}

// One DNS query over a session's dns.sock (a stream, each message with a
// two-byte length, as the bridge sends them): {rcode, addrs} or {rcode: 'closed'}.
export async function dnsAsk(sockPath, name, type = 'A') {
  const qtype = { A: 1, AAAA: 28, TXT: 16 }[type];
  const labels = name.split('.').map((l) => Buffer.concat([Buffer.from([l.length]), Buffer.from(l, 'latin1')]));
  const q = Buffer.concat([Buffer.from([0x43, 0x21, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0]), ...labels,
    Buffer.from([0, qtype >> 8, qtype & 255, 0, 1])]);
  let c;
  try { c = await Conn.open(sockPath); } catch { return { rcode: 'noconnect' }; }
  c.write(Buffer.concat([Buffer.from([q.length >> 8, q.length & 255]), q]));
  const len = await c.take(2, 5000);
  const m = len && await c.take(len.readUInt16BE(0), 5000);
  c.close();
  if (!m) return { rcode: 'closed' };
  const rcode = m[3] & 15, an = m.readUInt16BE(6);
  let o = 12;
  while (m[o] !== 0) o += m[o] + 1;
  o += 5;
  const addrs = [];
  for (let i = 0; i < an; i++) {
    o += 2; // a pointer to the question's name
    const t = m.readUInt16BE(o), l = m.readUInt16BE(o + 8);
    const rd = m.subarray(o + 10, o + 10 + l);
    addrs.push(t === 1 ? [...rd].join('.') : rd.toString('hex').match(/.{4}/g).join(':').replace(/(^|:)0{1,3}/g, '$1'));
    o += 10 + l;
  }
  return { rcode, addrs };
}
