// SPDX-License-Identifier: Apache-2.0
// The cases that need a session (see session-host.c): the DNS stub's
// synthetic pool (pool), holding and resuming (hold), and several sessions
// of one process under a flood (flood). Judged from outside: the test
// resolver's log says which names left the proxy, the upstream's log which
// connections were made.
import crypto from 'node:crypto';
import {
  t, ok, Conn, get, connectTunnel, socks, echoCheck, observe, describe, sleep, upstreamLines,
  startHost, dnsAsk, rawHttp,
} from './harness.mjs';

const OK_ADDR = '10.77.0.2';
const rnd = (n) => crypto.randomBytes(n);
const hex = (n) => crypto.randomBytes(n).toString('hex');
const SYNTH4 = /^198\.1[89]\.\d+\.\d+$/;
const SYNTH6 = /^fd53:686b:6e00:0:0:0:/;

// The names under SUFFIX the test resolver has been asked for, from FROM
// (an index into its log).
function namesAsked(dns, suffix, from = 0) {
  return [...new Set(dns.log.slice(from).map((q) => q.name).filter((n) => n.endsWith(suffix)))];
}

async function stopHost(h, name) {
  await t(`${name}: the session host exits cleanly without a sanitizer report`, async () => {
    ok(await h.stop(), `exit ${h.code}`);
    ok(!h.sanitizerReport(), h.errText.slice(h.errText.search(/Sanitizer|runtime error/) - 200).slice(0, 800));
  });
}

// ---------------------------------------------------------------- pool
export async function groupPool({ dns, canary }) {
  const h = await startHost();
  const sx = await h.open('pool', {
    allow_private_cidrs: [`${OK_ADDR}/32`], dns_upstream: dns.addr, limits: { dns_names: 64 },
  });
  ok((await h.cmd('grant pool 1 **.allowed.test once')) === 'ok', 'grant');
  const names = Array.from({ length: 20 }, () => `${hex(8)}.allowed.test`);
  const addr = {};
  const d0 = dns.log.length;
  await t('pool: twenty lookups under a once wildcard grant reach the upstream resolver zero times', async () => {
    const u0 = upstreamLines().length;
    for (const n of names) {
      const a = await dnsAsk(sx.dns, n, 'A');
      ok(a.rcode === 0 && a.addrs.length === 1 && SYNTH4.test(a.addrs[0]), `${n}: ${JSON.stringify(a)}`);
      addr[n] = a.addrs[0];
      const b = await dnsAsk(sx.dns, n, 'AAAA');
      ok(b.rcode === 0 && b.addrs.length === 1 && SYNTH6.test(b.addrs[0]), `${n} AAAA: ${JSON.stringify(b)}`);
    }
    await sleep(200);
    ok(namesAsked(dns, 'allowed.test', d0).length === 0, `the resolver was asked: ${namesAsked(dns, 'allowed.test', d0)}`);
    ok(upstreamLines().length === u0, 'a lookup reached the test host');
    ok(new Set(Object.values(addr)).size === 20, 'two names share an address');
  });
  await t('pool: the same name gets the same address again', async () => {
    const a = await dnsAsk(sx.dns, names[3], 'A');
    ok(a.addrs[0] === addr[names[3]], `${a.addrs[0]} != ${addr[names[3]]}`);
  });
  await t('pool: a name no grant admits is REFUSED, and not asked upstream either', async () => {
    const d1 = dns.log.length;
    const a = await dnsAsk(sx.dns, `${hex(6)}.other.test`, 'A');
    ok(a.rcode === 5, JSON.stringify(a));
    await sleep(100);
    ok(namesAsked(dns, 'other.test', d1).length === 0, 'asked upstream');
  });
  await t('pool: a connection to the synthetic address of an admitted name dials upstream exactly once', async () => {
    const d1 = dns.log.length;
    const o = await observe(canary, () => socks(sx, 1, addr[names[0]], 7));
    ok(o.r.rep === 0, describe(o));
    await echoCheck(o.r.conn, rnd(3000));
    o.r.conn.close();
    ok(o.up.length === 1 && o.up[0].startsWith(`conn ${OK_ADDR} 7`), `upstream saw ${o.up.join(',')}`);
    const asked = namesAsked(dns, 'allowed.test', d1);
    ok(asked.length === 1 && asked[0] === names[0], `names asked upstream: ${asked}`);
    const a = h.audit().find((l) => l.session === 'pool' && l.decision === 'allow' && l.protocol === 'socks5');
    ok(a && a.host === names[0] && a.via === addr[names[0]] && a.rule === 'grant:1', `audit: ${JSON.stringify(a)}`);
  });
  await t('pool: the once grant is spent: the next name is refused (0x02) and does not leave', async () => {
    const d1 = dns.log.length;
    const o = await observe(canary, () => socks(sx, 1, addr[names[1]], 7));
    ok(o.r.rep === 2, describe(o));
    ok(o.up.length === 0, 'reached the test host');
    ok(namesAsked(dns, 'allowed.test', d1).length === 0, 'asked upstream');
    const r = await observe(canary, () => connectTunnel(sx, `${addr[names[2]]}:443`));
    ok(r.r.status === 403 && r.r.headers['x-shinken-decision'] === 'policy-no-match', describe(r));
    ok(r.r.body.includes(names[2]), `the body does not name the host: ${r.r.body}`);
  });
  await t('pool: an IPv6 synthetic address leads back to its name', async () => {
    ok((await h.cmd('grant pool 2 **.six.test session')) === 'ok', 'grant');
    const n = `v6-${hex(4)}.six.test`;
    const a = await dnsAsk(sx.dns, n, 'AAAA');
    ok(a.rcode === 0 && SYNTH6.test(a.addrs[0]), JSON.stringify(a));
    const d1 = dns.log.length;
    const o = await observe(canary, () => connectTunnel(sx, `[${a.addrs[0]}]:443`));
    ok(o.r.status === 200 && o.up.length === 1, describe(o));
    await echoCheck(o.r.conn, rnd(1000));
    o.r.conn.close();
    ok(namesAsked(dns, 'six.test', d1).join() === n, `asked: ${namesAsked(dns, 'six.test', d1)}`);
    const s5 = await observe(canary, () => socks(sx, 4, a.addrs[0], 7));
    ok(s5.r.rep === 0, describe(s5));
    s5.r.conn.close();
  });
  await t('pool: an address of the range that was never handed out is unknown (0x04, 403), and goes nowhere', async () => {
    const o = await observe(canary, () => socks(sx, 1, '198.19.250.250', 7));
    ok(o.r.rep === 4 && o.up.length === 0 && o.canary === 0, describe(o));
    const r = await observe(canary, () => connectTunnel(sx, '198.18.0.0:443'));
    ok(r.r.status === 403 && r.r.headers['x-shinken-decision'] === 'dns-synthetic-unknown' && r.up.length === 0, describe(r));
  });
  await t('pool: bounded (64 names here): the oldest name is forgotten, the newest still leads home', async () => {
    ok((await h.cmd('grant pool 3 **.ctl.test session')) === 'ok', 'grant');
    const many = [];
    for (let i = 0; i < 200; i++) {
      const a = await dnsAsk(sx.dns, `c${i}-${hex(3)}.ctl.test`, 'A');
      ok(a.rcode === 0, JSON.stringify(a));
      many.push(a.addrs[0]);
    }
    const old = await observe(canary, () => socks(sx, 1, many[0], 7));
    ok(old.r.rep === 4 && old.up.length === 0, `forgotten name: ${describe(old)}`);
    const recent = await observe(canary, () => socks(sx, 1, many[199], 7));
    ok(recent.r.rep === 0 && recent.up.length === 1, `recent name: ${describe(recent)}`);
    recent.r.conn.close();
  });
  await t('pool: control: twenty connections by synthetic address take twenty names upstream', async () => {
    const d1 = dns.log.length, u0 = upstreamLines().length;
    const ns = Array.from({ length: 20 }, (_, i) => `d${i}-${hex(3)}.ctl.test`);
    for (const n of ns) {
      const a = await dnsAsk(sx.dns, n, 'A');
      const o = await socks(sx, 1, a.addrs[0], 7);
      ok(o.rep === 0, `${n}: reply ${o.rep}`);
      o.conn.close();
    }
    await sleep(200);
    const asked = namesAsked(dns, 'ctl.test', d1);
    ok(asked.length === 20 && ns.every((n) => asked.includes(n)), `asked ${asked.length} names`);
    ok(upstreamLines().length - u0 === 20, `upstream saw ${upstreamLines().length - u0} connections`);
  });
  await t('pool: lookups are audited without leaving', async () => {
    const a = h.audit().filter((l) => l.protocol === 'dns' && l.reason === 'dns-synthetic');
    ok(a.length >= 40 && a.every((l) => SYNTH4.test(l.via) || SYNTH6.test(l.via.replace(/::/, ':0:0:0:'))), `${a.length} lines`);
  });
  ok((await h.cmd('close pool')) === 'ok', 'close');
  await stopHost(h, 'pool');
}

// ---------------------------------------------------------------- hold
export async function groupHold({ dns, canary }) {
  const h = await startHost();
  const sx = await h.open('hold', { allow_private_cidrs: [`${OK_ADDR}/32`], dns_upstream: dns.addr, limits: { held: 8 } });
  ok((await h.cmd('hold hold **.held.test')) === 'ok', 'hold');
  let seen = 0;
  const nextHeld = async (host) => {
    const e = await h.event((x) => x.kind === 'held' && x.host === host, 5000, seen);
    if (e) seen = h.events.indexOf(e) + 1;
    return e;
  };
  let first;
  await t('hold: a held CONNECT gets nothing, and nothing is dialed, until it is resumed', async () => {
    const u0 = upstreamLines().length;
    first = await Conn.open(sx.http);
    first.write('CONNECT a.held.test:7 HTTP/1.1\r\nHost: a.held.test:7\r\n\r\n');
    const e = await nextHeld('a.held.test');
    ok(e && e.port === 7, 'no held event');
    first.id = e.id;
    await sleep(500);
    ok(first.buf.length === 0 && !first.closed, `the client got ${first.buf.length} bytes, closed=${first.closed}`);
    ok(upstreamLines().length === u0, 'dialed before the resume');
  });
  await t('hold: resume allow: the same connection goes on, the upstream sees exactly one connection', async () => {
    const u0 = upstreamLines().length;
    ok((await h.cmd(`resume hold ${first.id} allow 9`)) === 'ok 0', 'resume');
    const r = await first.response(5000, { tunnel: true });
    ok(r.status === 200, `status ${r.status}`);
    await echoCheck(first, rnd(5000));
    await sleep(100);
    const up = upstreamLines().slice(u0);
    ok(up.length === 1 && up[0].startsWith(`conn ${OK_ADDR} 7`), `upstream saw ${up.join(',')}`);
    ok((await h.cmd(`resume hold ${first.id} allow 9`)) === 'ok -2', 'a second resume was accepted');
    ok((await h.cmd('resume hold 987654 deny 0')) === 'ok -2', 'an unknown id was accepted');
  });
  await t('hold: the resumed tunnel carries its tag: close_tunnels closes it', async () => {
    ok((await h.cmd('revoke hold 9')) === 'ok 1', 'revoke did not count the tunnel');
    await first.until((b, closed) => (closed ? true : undefined), 3000);
    ok(first.closed, 'the tunnel is still open');
  });
  await t('hold: resume deny: 403 with the caller\'s text, written for the agent', async () => {
    const o = await observe(canary, async () => {
      const c = await Conn.open(sx.http);
      c.write('CONNECT b.held.test:443 HTTP/1.1\r\nHost: b.held.test:443\r\n\r\n');
      const e = await nextHeld('b.held.test');
      ok(e, 'no held event');
      const text = 'Refused: the connection to b.held.test:443 was denied by a human: not today. Asking again in this session will not help.';
      ok((await h.cmd(`resume hold ${e.id} deny 0 ${text}`)) === 'ok 0', 'resume');
      const r = await c.response();
      c.close();
      return { ...r, text };
    });
    ok(o.r.status === 403 && o.r.headers['x-shinken-decision'] === 'held-denied', describe(o));
    ok(o.r.body === `${o.r.text}\n`, `body: ${JSON.stringify(o.r.body)}`);
    ok(o.up.length === 0 && o.canary === 0, describe(o));
    const a = h.audit().find((l) => l.host === 'b.held.test' && l.decision === 'deny');
    ok(a && a.reason === 'held-denied' && a.message === o.r.text && a.rule === 'test-resume', `audit: ${JSON.stringify(a)}`);
  });
  await t('hold: SOCKS5: held, then allow (0x00, echo) and deny (0x02)', async () => {
    const p1 = socks(sx, 3, 'c.held.test', 7);
    const e1 = await nextHeld('c.held.test');
    ok(e1, 'no held event');
    ok((await h.cmd(`resume hold ${e1.id} allow 0`)) === 'ok 0', 'resume');
    const r1 = await p1;
    ok(r1.rep === 0, `reply ${r1.rep}`);
    await echoCheck(r1.conn, rnd(2000));
    r1.conn.close();
    const o = await observe(canary, async () => {
      const p2 = socks(sx, 3, 'd.held.test', 7);
      const e2 = await nextHeld('d.held.test');
      ok(e2, 'no held event');
      ok((await h.cmd(`resume hold ${e2.id} deny 0 denied by a human`)) === 'ok 0', 'resume');
      return p2;
    });
    ok(o.r.rep === 2 && o.up.length === 0, describe(o));
  });
  await t('hold: a plain HTTP request, held then allowed, is forwarded and answered', async () => {
    const o = await observe(canary, async () => {
      const p = get(sx, 'http://e.held.test/held-path');
      const e = await nextHeld('e.held.test');
      ok(e && e.port === 80, 'no held event');
      ok((await h.cmd(`resume hold ${e.id} allow 0`)) === 'ok 0', 'resume');
      return p;
    });
    ok(o.r.status === 200 && JSON.parse(o.r.body).url === '/held-path', describe(o));
    ok(o.up.length === 1, describe(o));
  });
  await t('hold: a client that leaves while held is reported, and its id is no longer held', async () => {
    const c = await Conn.open(sx.http);
    c.write('CONNECT f.held.test:443 HTTP/1.1\r\nHost: f.held.test:443\r\n\r\n');
    const e = await nextHeld('f.held.test');
    ok(e, 'no held event');
    c.close();
    const ab = await h.event((x) => x.kind === 'abandoned' && x.id === e.id, 5000);
    ok(ab && ab.session === 'hold', 'no abandoned event');
    ok((await h.cmd(`resume hold ${e.id} allow 0`)) === 'ok -2', 'resumed an abandoned connection');
  });
  await t('hold: a name the hook would hold gets a synthetic address, and the connection to it is held as the name', async () => {
    const a = await dnsAsk(sx.dns, 'g.held.test', 'A');
    ok(a.rcode === 0 && SYNTH4.test(a.addrs[0]), JSON.stringify(a));
    const d1 = dns.log.length;
    const p = socks(sx, 1, a.addrs[0], 7);
    const e = await nextHeld('g.held.test');
    ok(e && e.via === a.addrs[0], `held event: ${JSON.stringify(e)}`);
    ok(namesAsked(dns, 'held.test', d1).length === 0, 'asked upstream while held');
    ok((await h.cmd(`resume hold ${e.id} allow 0`)) === 'ok 0', 'resume');
    const r = await p;
    ok(r.rep === 0, `reply ${r.rep}`);
    r.conn.close();
    ok(namesAsked(dns, 'held.test', d1).join() === 'g.held.test', `asked ${namesAsked(dns, 'held.test', d1)}`);
  });
  await t('hold: the held limit (8 here) refuses the next one at once with 429', async () => {
    const cs = [];
    for (let i = 0; i < 8; i++) {
      const c = await Conn.open(sx.http);
      c.write(`CONNECT l${i}.held.test:443 HTTP/1.1\r\nHost: l${i}.held.test:443\r\n\r\n`);
      ok(await nextHeld(`l${i}.held.test`), `l${i} not held`);
      cs.push(c);
    }
    const r = await rawHttp(sx.http, 'CONNECT l8.held.test:443 HTTP/1.1\r\nHost: l8.held.test:443\r\n\r\n');
    ok(r.status === 429 && r.headers['x-shinken-decision'] === 'session-held-limit', `status ${r.status}`);
    ok(/waiting for approval/.test(r.body), r.body);
    // Session close: what is still held is refused, in each protocol.
    const sp = socks(sx, 3, 'z.held.test', 7);
    for (const c of cs.slice(0, 7)) c.close();
    await sleep(300);
    const s5 = socks(sx, 3, 'y.held.test', 7);
    ok(await nextHeld('y.held.test'), 'y not held');
    ok((await h.cmd('close hold')) === 'ok', 'close');
    const last = await cs[7].response();
    ok(last.status === 403 && last.headers['x-shinken-decision'] === 'session-closed', `held CONNECT at close: ${last.status}`);
    ok(/session is ending/.test(last.body), last.body);
    const sr = await s5;
    ok(sr.rep === 2, `held SOCKS5 at close: ${sr.rep}`);
    const zr = await sp;
    ok(zr.rep !== 0, `z: ${zr.rep}`);
  });
  await stopHost(h, 'hold');
}

// ---------------------------------------------------------------- flood
// 3,000 idle connections to one session of a host whose descriptor limit
// is 1,024 (the manager of the report): the other session's connections
// go on, the host keeps descriptors for its control plane, and it does not
// spin. Each protection with a control run without it.
async function flood(sx, n) {
  const conns = [];
  let refused = 0, codes = {};
  // A full backlog makes a unix connect fail at once (EAGAIN): such a
  // connection is tried again a moment later, a few times.
  const open = async () => {
    for (let k = 0; k < 100; k++) {
      try { return await Conn.open(sx.http); } catch { await sleep(20); }
    }
    return null;
  };
  const batch = 100;
  for (let i = 0; i < n; i += batch) {
    const cs = await Promise.all(Array.from({ length: Math.min(batch, n - i) }, open));
    for (const c of cs) if (c) conns.push(c);
  }
  // The refusals are answered as the host gets to them: on a loaded
  // machine that can take longer than a moment, so wait until the number
  // answered has stopped changing for half a second (at most 15 s).
  const answered = () => conns.filter((c) => c.buf.length).length;
  let last = -1, still = 0;
  for (let waited = 0; waited < 15000 && still < 500; waited += 100) {
    await sleep(100);
    const a = answered();
    still = a === last ? still + 100 : 0;
    last = a;
  }
  for (const c of conns) {
    if (c.buf.length) {
      refused++;
      const m = /X-Shinken-Decision: (\S+)/.exec(c.buf.toString('latin1'));
      if (m) codes[m[1]] = (codes[m[1]] ?? 0) + 1;
    }
  }
  return { conns, refused, codes, close: () => conns.forEach((c) => c.close()) };
}

async function otherSessionWorks(canary, sy) {
  const o = await observe(canary, () => connectTunnel(sy, 'ok.test:443'), 200);
  const okNow = o.r.status === 200;
  if (okNow) {
    await echoCheck(o.r.conn, rnd(1000));
    // Ended, not dropped: the proxy closes its side once the tunnel is gone
    // from its count, so a revoke after this sees only the tunnels still open.
    o.r.conn.sock.end();
    await o.r.conn.until((b, closed) => (closed ? true : undefined), 3000);
  }
  return { ok: okNow && o.up.length === 1 && o.up[0].startsWith(`conn ${OK_ADDR} 443`), o };
}

export async function groupFlood({ dns, canary }) {
  const base = { allow_private_cidrs: [`${OK_ADDR}/32`], hosts: { 'ok.test': [OK_ADDR] } };
  {
    const h = await startHost({ nofile: 1024 });
    const a = await h.open('a', base), b = await h.open('b', base);
    ok((await h.cmd('grant b 5 ok.test session')) === 'ok', 'grant');
    ok((await h.cmd('grant a 6 ok.test session')) === 'ok', 'grant');
    const tunnel = await connectTunnel(b, 'ok.test:443');
    const cpu0 = h.cpu();
    const f = await flood(a, 3000);
    await t('flood: 3,000 idle connections to one session are held to its setup limit, the rest refused at once (429)', async () => {
      console.log(`#   ${f.conns.length} connected, ${f.refused} refused: ${JSON.stringify(f.codes)}`);
      ok(f.conns.length === 3000, `only ${f.conns.length} connected`);
      ok(f.codes['session-setup-limit'] >= 3000 - 128 - 10, `refusals: ${JSON.stringify(f.codes)}`);
      ok(f.conns.length - f.refused <= 128, `${f.conns.length - f.refused} are waiting`);
    });
    await t('flood: the other session\'s connection goes through (its upstream sees it)', async () => {
      const r = await otherSessionWorks(canary, b);
      ok(r.ok, describe(r.o));
    });
    await t('flood: the flooded session refuses SOCKS5 with 0x02 and DNS with REFUSED while at its limit', async () => {
      const s5 = await socks(a, 3, 'ok.test', 443);
      ok(s5.rep === 2, `SOCKS5 reply ${s5.rep}`);
      const d = await dnsAsk(a.dns, 'ok.test', 'A');
      ok(d.rcode === 5, `DNS ${JSON.stringify(d)}`);
    });
    await t('flood: a revoke in the other session lands at once: its tunnel closes, its next connection is refused', async () => {
      ok(tunnel.status === 200, `tunnel ${tunnel.status}`);
      ok((await h.cmd('revoke b 5')) === 'ok 1', 'revoke did not count the tunnel');
      await tunnel.conn.until((buf, closed) => (closed ? true : undefined), 3000);
      ok(tunnel.conn.closed, 'the revoked tunnel is still open');
      const o = await observe(canary, () => connectTunnel(b, 'ok.test:443'));
      ok(o.r.status === 403 && o.up.length === 0, describe(o));
    });
    await t('flood: the host keeps descriptors for its control plane, holds few, and does not spin', async () => {
      ok((await h.cmd('probe')) === 'ok', 'the control plane could not open a descriptor');
      const fds = Number((await h.cmd('fds')).split(' ')[1]);
      ok(fds < 400, `${fds} descriptors open`);
      const c0 = h.cpu();
      await sleep(2000);
      const used = h.cpu() - c0;
      console.log(`#   ${fds} descriptors; ${(h.cpu() - cpu0).toFixed(2)} s of CPU over the flood, ${used.toFixed(2)} s over 2 s while it held`);
      ok(used < 0.5, `${used.toFixed(2)} s of CPU in 2 s with nothing to do`);
    });
    await t('flood: the refusals are in the audit, for the flooded session only', async () => {
      const lines = h.audit().filter((l) => l.reason === 'session-setup-limit');
      ok(lines.length >= 2800 && lines.every((l) => l.session === 'a' && l.decision === 'deny'), `${lines.length} lines`);
    });
    f.close();
    await stopHost(h, 'flood limits');
  }
  {
    // The control: no limits and no reserve. The same flood takes every
    // descriptor, and the other session's connection gets nowhere.
    const h = await startHost({ nofile: 1024 });
    const off = { ...base, limits: { connections: 1000000, setup: 1000000, fd_reserve: 0, idle_timeout_ms: 3600000, request_timeout_ms: 3600000 } };
    const a = await h.open('a', off), b = await h.open('b', off);
    ok((await h.cmd('grant b 5 ok.test session')) === 'ok', 'grant');
    const f = await flood(a, 3000);
    await t('flood control: without the limits the flood exhausts the host, and the other session\'s connection reaches nothing', async () => {
      const o = await observe(canary, () => connectTunnel(b, 'ok.test:443'), 1000);
      console.log(`#   other session: ${describe(o)}; control plane probe: ${await h.cmd('probe')}`);
      ok(o.r.status !== 200 && o.up.length === 0, describe(o));
    });
    f.close();
    await sleep(500);
    h.proc.kill('SIGKILL');
    await h.exited;
  }
  {
    // The reserve alone: no per-session limits, the default reserve. The
    // flood is refused (503) before the host runs out, and the control
    // plane keeps its descriptors.
    const h = await startHost({ nofile: 1024 });
    const noLimits = { ...base, limits: { connections: 1000000, setup: 1000000 } };
    const a = await h.open('a', noLimits);
    const f = await flood(a, 3000);
    await t('flood: with the per-session limits off, the descriptor reserve refuses the flood (503) and keeps the control plane\'s share', async () => {
      console.log(`#   ${f.conns.length} connected, ${f.refused} refused: ${JSON.stringify(f.codes)}`);
      ok(f.codes['proxy-descriptor-reserve'] >= 1000, `refusals: ${JSON.stringify(f.codes)}`);
      ok((await h.cmd('probe')) === 'ok', 'the control plane could not open a descriptor');
      const c0 = h.cpu();
      await sleep(2000);
      ok(h.cpu() - c0 < 0.5, `${(h.cpu() - c0).toFixed(2)} s of CPU in 2 s with nothing to do`);
    });
    f.close();
    await sleep(300);
    await t('flood: once the flood is gone, new connections are served again', async () => {
      ok((await h.cmd('grant a 7 ok.test session')) === 'ok', 'grant');
      const r = await otherSessionWorks(canary, a);
      ok(r.ok, describe(r.o));
    });
    await stopHost(h, 'flood reserve');
  }
}
