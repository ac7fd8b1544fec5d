// SPDX-License-Identifier: Apache-2.0
// The egress proxy's cases, by group (the argument): config, canon, policy,
// ssrf, dns, http, socks5, ops, load. Each case prints one "ok"/"not ok"
// line; the last line counts them. Every address dialed or handed out is a
// loopback address of the proxy namespace or a test host address in the host
// namespace (see netns.sh): blocked cases aim at loopback, where the canary
// listens, and at the host namespace's addresses that are not opted in.
import crypto from 'node:crypto';
import fs from 'node:fs';
import {
  t, ok, finish, startProxy, stopChecked, Conn, rawHttp, get, connectTunnel, socks,
  echoCheck, startResolver, startCanary, observe, isBlocked, isRefused, isAllowed,
  upstreamEcho, describe, sleep, SHINKEN, TMP,
} from './harness.mjs';
import { groupPool, groupHold, groupFlood } from './session-groups.mjs';

const group = process.argv[2];
const OK_ADDR = '10.77.0.2';
const CLASS_ADDRS = ['100.64.77.2', '169.254.77.2', '172.16.77.2', '192.168.77.2', '192.0.0.77',
  '198.18.77.2', '192.0.2.77', '198.51.100.77', '203.0.113.77', '240.0.77.2'];

const zone = {
  'lo.test': { A: ['127.0.0.1'] },
  'lo2.test': { A: ['127.53.0.1'] },
  'mixed.test': { A: [OK_ADDR, '127.0.0.1'] },
  'mixed-rev.test': { A: ['127.0.0.1', OK_ADDR] },
  'mixed6.test': { A: [OK_ADDR], AAAA: ['::1'] },
  'v6lo.test': { AAAA: ['::1'] },
  'mapped.test': { AAAA: ['::ffff:127.0.0.1'] },
  'compat.test': { AAAA: ['::127.0.0.1'] },
  'nat64.test': { AAAA: ['64:ff9b::127.0.0.1'] },
  'sixtofour.test': { AAAA: ['2002:7f00:1::1'] },
  'zero.test': { A: ['0.0.0.0'] },
  'unspec6.test': { AAAA: ['::'] },
  'ula.test': { AAAA: ['fd77::2'] },
  'other.test': { A: ['10.77.0.3'] },
  'mc.test': { A: ['224.0.0.1'] },
  'bcast.test': { A: ['255.255.255.255'] },
  'localhost': { A: ['127.0.0.1'], AAAA: ['::1'] },
  'pin-ok.test': { A: ['127.0.0.1'] },
  'pin-lo.test': { A: [OK_ADDR] },
  'servfail.test': { rcode: 2 },
  'nx.test': { rcode: 3 },
  'refused.test': { rcode: 5 },
  'timeout.test': { drop: true },
  'empty.test': {},
  'rebind-http.test': { seq: [{ A: [OK_ADDR] }, { A: ['127.0.0.1'] }] },
  'rebind-connect.test': { seq: [{ A: [OK_ADDR] }, { A: ['127.0.0.1'] }] },
  'rebind-socks.test': { seq: [{ A: [OK_ADDR] }, { A: ['127.0.0.1'] }] },
  'rebind6.test': { seq: [{ A: [OK_ADDR] }, { A: [OK_ADDR], AAAA: ['::1'] }] },
  // Unreachable addresses of the host namespace's range first (nothing
  // answers there), the loopback one last: a proxy that checked only the
  // first few, or only the address it dials first, would reach loopback.
  'long.test': { A: [...Array.from({ length: 12 }, (_, i) => `10.77.0.${100 + i}`), '127.0.0.1'] },
  'toolong.test': { A: [...Array.from({ length: 30 }, () => OK_ADDR), '127.0.0.1'] },
};
CLASS_ADDRS.forEach((a, i) => { zone[`class${i}.test`] = { A: [a] }; });

const dns = await startResolver(zone);
const canary = await startCanary();
const rnd = (n) => crypto.randomBytes(n);

function cfg(over = {}) {
  return {
    listen: { http: '127.0.0.1:0', socks5: '127.0.0.1:0' },
    domains: {}, cidrs: {}, allow_private_cidrs: [`${OK_ADDR}/32`], hosts: {},
    dns_upstream: dns.addr, mode: 'full', ...over,
  };
}

// A policy that allows every name and every address class by rule, so that
// only the non-public check stands between a case and loopback.
const ALL_CIDRS = ['0.0.0.0/8', '127.0.0.0/8', '10.0.0.0/8', '100.64.0.0/10', '169.254.0.0/16',
  '172.16.0.0/12', '192.168.0.0/16', '192.0.0.0/24', '192.0.2.0/24', '198.18.0.0/15',
  '198.51.100.0/24', '203.0.113.0/24', '224.0.0.0/4', '240.0.0.0/4', '255.255.255.255/32',
  '::/128', '::1/128', '::ffff:0:0/96', '::/96', '64:ff9b::/96', '2002::/16', 'fc00::/7', 'ff00::/8'];
const PINS = {
  'pin-ok.test': [OK_ADDR], 'pin-lo.test': ['127.0.0.1'], 'pin-mixed.test': [OK_ADDR, '127.0.0.1'],
  'pin-v6lo.test': ['::1'], 'pin-mapped.test': ['::ffff:127.0.0.1'], 'pin-other.test': ['10.77.0.3'],
  'pin-link.test': ['169.254.77.2'],
};
const allowAll = (over = {}) => cfg({
  domains: { '*': 'allow' }, dangerously_allow_all: true,
  cidrs: Object.fromEntries(ALL_CIDRS.map((c) => [c, 'allow'])), hosts: PINS, ...over,
});

// ---------------------------------------------------------------- config
async function groupConfig() {
  const bad = [
    ['unknown top-level key', { ...cfg(), bogus_key: 1 }, 'bogus_key'],
    ['unknown listen key', cfg({ listen: { http: '127.0.0.1:0', ftp: '127.0.0.1:0' } }), 'ftp'],
    ['bad domain verdict', cfg({ domains: { 'a.test': 'maybe' } }), 'a.test'],
    ['bare * in deny', cfg({ domains: { '*': 'deny' } }), '*'],
    ['bare * in allow without dangerously_allow_all', cfg({ domains: { '*': 'allow' } }), '*'],
    ['bare ** pattern', cfg({ domains: { '**': 'deny' } }), '**'],
    ['pattern with empty label', cfg({ domains: { 'a..test': 'allow' } }), 'a..test'],
    ['pattern with a space', cfg({ domains: { 'a b.test': 'allow' } }), 'a b.test'],
    ['pattern with an underscore', cfg({ domains: { 'a_b.test': 'allow' } }), 'a_b.test'],
    ['pattern with a mid-name wildcard', cfg({ domains: { 'a.*.test': 'allow' } }), 'a.*.test'],
    ['pattern *.*.test', cfg({ domains: { '*.*.test': 'allow' } }), '*.*.test'],
    ['pattern with port 70000', cfg({ domains: { 'a.test:70000': 'allow' } }), 'a.test:70000'],
    ['pattern with port 0', cfg({ domains: { 'a.test:0': 'allow' } }), 'a.test:0'],
    ['pattern with non-ASCII (not punycode)', cfg({ domains: { 'bücher.test': 'allow' } }), 'domains'],
    ['pattern with percent-encoding', cfg({ domains: { 'a%2eb.test': 'allow' } }), 'a%2eb.test'],
    ['cidr prefix /33', cfg({ cidrs: { '10.77.0.0/33': 'allow' } }), '10.77.0.0/33'],
    ['cidr not an address', cfg({ cidrs: { 'not-a-cidr': 'allow' } }), 'not-a-cidr'],
    ['cidr with octal octet', cfg({ cidrs: { '010.77.0.0/24': 'allow' } }), '010.77.0.0/24'],
    ['cidr bad verdict', cfg({ cidrs: { '10.77.0.0/24': 'perhaps' } }), '10.77.0.0/24'],
    ['allow_private_cidrs not a list', cfg({ allow_private_cidrs: '10.77.0.0/24' }), 'allow_private_cidrs'],
    ['allow_private_cidrs bad entry', cfg({ allow_private_cidrs: ['300.1.1.1/8'] }), '300.1.1.1/8'],
    ['hosts pin not an address', cfg({ hosts: { 'a.test': ['nope'] } }), 'a.test'],
    ['hosts pin not a list', cfg({ hosts: { 'a.test': '10.77.0.2' } }), 'a.test'],
    ['hosts name not a DNS name', cfg({ hosts: { 'a_b.test': [OK_ADDR] } }), 'a_b.test'],
    ['dns_upstream not an address', cfg({ dns_upstream: 'nonsense' }), 'dns_upstream'],
    ['unknown mode', cfg({ mode: 'bogus' }), 'mode'],
    ['listen on 0.0.0.0', cfg({ listen: { http: '0.0.0.0:0' } }), 'listen'],
    ['listen on [::]', cfg({ listen: { http: '[::]:0' } }), 'listen'],
    ['listen on a veth address', cfg({ listen: { socks5: '10.77.0.1:0' } }), 'listen'],
    ['listen port 99999', cfg({ listen: { http: '127.0.0.1:99999' } }), 'listen'],
    ['dangerously_allow_all not a boolean', cfg({ dangerously_allow_all: 'yes' }), 'dangerously_allow_all'],
    ['domains not an object', cfg({ domains: ['a.test'] }), 'domains'],
    ['top level not an object', '[1,2]', null],
    ['malformed JSON', '{"listen": {"http": "127.0.0.1:0"', null],
    ['empty file', '', null],
    ['NUL inside a pattern', cfg({ domains: { 'a\u0000.test': 'allow' } }), null],
  ];
  for (const [name, c, key] of bad) {
    await t(`config rejected: ${name}`, async () => {
      const px = await startProxy(c, { wantListen: false });
      ok(px.code === 1, `exit ${px.code ?? px.signal}, expected 1 (bad input); stderr: ${px.errText.trim().slice(0, 300)}`);
      ok(!px.out.some((l) => l.startsWith('listening')), 'printed a listener before refusing');
      const lines = px.errText.trim().split('\n').filter((l) => l && !l.startsWith('{'));
      ok(lines.length >= 1, 'no error message');
      if (key) ok(px.errText.includes(key), `message does not name '${key}': ${px.errText.trim().slice(0, 300)}`);
      ok(!px.sanitizerReport(), 'sanitizer report');
    });
  }
  await t('config rejected: missing file', async () => {
    const px = await startProxy('', { wantListen: false });
    fs.unlinkSync(px.file);
    const px2 = await (async () => {
      const { spawnSync } = await import('node:child_process');
      return spawnSync(SHINKEN, ['proxy', '--config', `${TMP}/does-not-exist.json`], { encoding: 'utf8', timeout: 10000 });
    })();
    ok(px2.status !== 0 && px2.status !== null, `exit ${px2.status}`);
    ok(px2.stderr.includes('does-not-exist.json'), `message does not name the file: ${px2.stderr}`);
  });

  const good = [
    ['the documented shape', cfg({
      domains: { 'example.test': 'allow', '**.corp.test:443': 'allow', '*.bad.test': 'deny' },
      cidrs: { '203.0.113.0/24': 'allow' }, allow_private_cidrs: ['10.77.0.0/24'],
      hosts: { 'api.example.test': [OK_ADDR] } })],
    ['bare * allowed with dangerously_allow_all', cfg({ domains: { '*': 'allow' }, dangerously_allow_all: true })],
    ['punycode pattern', cfg({ domains: { 'xn--bcher-kva.test': 'allow' } })],
    ['IPv6 cidr and pin', cfg({ cidrs: { 'fd77::/64': 'allow' }, hosts: { 'v6.test': ['fd77::2'] } })],
    ['audit to a file', cfg({ audit: `${TMP}/audit-cfg.log` })],
  ];
  for (const [name, c] of good) {
    await t(`config accepted: ${name}`, async () => {
      const px = await startProxy(c);
      ok(px.http > 0 && px.socks > 0, `listeners: ${px.out.join(' | ')}`);
      ok(await px.stop(), 'did not stop');
      ok(!px.sanitizerReport(), 'sanitizer report');
    });
  }
  await t('config accepted: one listener prints one line', async () => {
    const px = await startProxy(cfg({ listen: { http: '127.0.0.1:0' } }));
    await sleep(200);
    ok(px.out.filter((l) => l.startsWith('listening')).length === 1 && px.http > 0, px.out.join(' | '));
    ok(await px.stop(), 'did not stop');
  });
  await t('config accepted: non-loopback listener with dangerously_allow_non_loopback', async () => {
    const c = cfg({ listen: { http: '10.77.0.1:0' }, dangerously_allow_non_loopback: true });
    const px = await startProxy(c, { wantListen: false });
    ok(px.code === 'still running' && px.out.some((l) => /^listening http 10\.77\.0\.1:\d+$/.test(l)), `exit ${px.code}: ${px.out.join(' | ')} ${px.errText.slice(0, 300)}`);
  });
}

// ---------------------------------------------------------------- canon
async function groupCanon() {
  const px = await startProxy(cfg({
    domains: { '**.test': 'allow', 'xn--bcher-kva.test': 'allow' }, cidrs: { '10.77.0.0/24': 'allow' } }));
  const allowed = ['api.test', 'API.TEST', 'Api.Test', 'api.test.', 'xn--bcher-kva.test',
    `${'a'.repeat(63)}.test`, 'a-b.test', '10.77.0.2'];
  for (const h of allowed) {
    await t(`canon allowed over HTTP: ${h}`, async () => isAllowed(await observe(canary, () => get(px, `http://${h}/`))));
  }
  for (const h of ['API.TEST', 'api.test.']) {
    await t(`canon allowed over SOCKS5: ${h}`, async () => {
      const o = await observe(canary, () => socks(px, 3, h, 7));
      ok(o.r.rep === 0, describe(o));
      await echoCheck(o.r.conn, rnd(1000)); o.r.conn.close();
    });
    await t(`canon allowed over CONNECT: ${h}`, async () => {
      const o = await observe(canary, () => connectTunnel(px, `${h}:443`));
      ok(o.r.status === 200, describe(o));
      await echoCheck(o.r.conn, rnd(1000)); o.r.conn.close();
    });
  }
  const long = Array(4).fill('b'.repeat(62)).join('.') + '.test'; // 256 characters
  const rejected = ['api%2etest', 'ap%69.test', 'api.test%00', 'api_x.test', 'api!.test', 'api$.test',
    'a..test', '.api.test', 'api.test..', `${'a'.repeat(64)}.test`, long, 'bücher.test',
    'api\u0000.test', 'api\u0001.test', 'api\u007f.test', 'api\t.test', 'api\\.test', 'api,x.test',
    'xn--.test', '-', '.', '..'];
  for (const h of rejected) {
    const label = JSON.stringify(h).slice(1, -1).slice(0, 60);
    await t(`canon rejected over HTTP: ${label}`, async () =>
      isRefused(await observe(canary, () => rawHttp(px.http,
        `GET http://${h}/ HTTP/1.1\r\nHost: ${h}\r\nConnection: close\r\n\r\n`))));
    await t(`canon rejected over CONNECT: ${label}`, async () =>
      isRefused(await observe(canary, () => connectTunnel(px, `${h}:443`))));
  }
  const socksRejected = [...rejected, 'api.test\u0000.evil', 'api\r\n.test', 'api .test', 'api.test\n', ''];
  for (const h of socksRejected) {
    const label = JSON.stringify(h).slice(1, -1).slice(0, 60);
    await t(`canon rejected over SOCKS5: ${label || '(empty)'}`, async () => {
      const o = await observe(canary, () => socks(px, 3, Buffer.from(h, 'utf8'), 7));
      ok(o.r.rep !== 0, `accepted: ${describe(o)}`);
      ok(o.canary === 0 && o.up.length === 0, `reached something: ${describe(o)}`);
    });
  }
  // Userinfo, fragments and backslashes are the classic ways to make two
  // parsers disagree on the host; whatever the proxy makes of them, it must
  // not reach loopback.
  for (const target of ['http://api.test@127.0.0.1/', 'http://127.0.0.1#@api.test/', 'http://api.test\\@127.0.0.1/',
    'http://127.0.0.1\\@api.test/', 'http://api.test:80@127.0.0.1:80/', 'http://127.0.0.1%2f@api.test/',
    'http://api.test/@127.0.0.1/', 'http:///127.0.0.1/', 'http:127.0.0.1/', 'HTTP://127.0.0.1/']) {
    await t(`canon confusion reaches no loopback: ${target}`, async () => {
      const host = target.replace(/^[a-zA-Z]+:\/*/, '').split('/')[0];
      const o = await observe(canary, () => rawHttp(px.http,
        `GET ${target} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`));
      ok(o.canary === 0, `reached the canary: ${describe(o)}`);
    });
  }
  await stopChecked(px, 'canon');
}

// ---------------------------------------------------------------- policy
async function groupPolicy() {
  const px = await startProxy(cfg({
    domains: {
      'exact.test': 'allow', '*.sub.test': 'allow', '**.apex.test': 'allow', '**.corp.test:443': 'allow',
      'port.test:8080': 'allow', '**.mix.test': 'allow', 'bad.mix.test': 'deny', '*.deny.mix.test': 'deny',
      '**.dp.test': 'allow', 'x.dp.test:443': 'deny', '**.cidr.test': 'allow',
    },
    cidrs: { '10.77.0.0/24': 'allow' } }));
  const http = [
    ['exact.test', true], ['EXACT.test', true], ['www.exact.test', false], ['exactx.test', false],
    ['a.sub.test', true], ['sub.test', false], ['asub.test', false],
    ['apex.test', true], ['x.apex.test', true], ['x.y.apex.test', true], ['notapex.test', false], ['apex.test.evil.test', false],
    ['port.test:8080', true], ['port.test', false],
    ['ok.mix.test', true], ['bad.mix.test', false], ['BAD.MIX.TEST', false], ['bad.mix.test.', false],
    ['x.deny.mix.test', false], ['deny.mix.test', true], ['mix.test', true],
    ['x.dp.test', true], ['unknown.test', false], ['corp.test', false], ['a.corp.test', false],
    ['10.77.0.2', true],
  ];
  for (const [h, allow] of http) {
    await t(`policy HTTP ${h}: ${allow ? 'allow' : 'deny'}`, async () => {
      const o = await observe(canary, () => get(px, `http://${h}/`));
      allow ? isAllowed(o) : isBlocked(o);
    });
  }
  const tunnels = [
    ['corp.test:443', true], ['a.corp.test:443', true], ['A.b.Corp.test:443', true], ['a.corp.test:7', false],
    ['x.dp.test:443', false], ['x.dp.test:7', true], ['exact.test:443', true], ['bad.mix.test:443', false],
  ];
  for (const [a, allow] of tunnels) {
    await t(`policy CONNECT ${a}: ${allow ? 'allow' : 'deny'}`, async () => {
      const o = await observe(canary, () => connectTunnel(px, a));
      if (allow) { ok(o.r.status === 200 && o.up.length === 1, describe(o)); await echoCheck(o.r.conn, rnd(4096)); o.r.conn.close(); } else isBlocked(o);
    });
    const [h, p] = a.split(':');
    await t(`policy SOCKS5 ${a}: ${allow ? 'allow' : 'deny'}`, async () => {
      const o = await observe(canary, () => socks(px, 3, h, Number(p)));
      if (allow) { ok(o.r.rep === 0 && o.up.length === 1, describe(o)); await echoCheck(o.r.conn, rnd(4096)); o.r.conn.close(); } else {
        ok(o.r.rep === 2, `reply ${o.r.rep}, expected 2`); ok(o.up.length === 0 && o.canary === 0, describe(o));
      }
    });
  }
  await stopChecked(px, 'policy');

  // Deny wins over allow for addresses too, and an empty allowlist blocks all.
  const px2 = await startProxy(cfg({ domains: { '**.test': 'allow' }, cidrs: { '10.77.0.0/24': 'allow', '10.77.0.2/32': 'deny' } }));
  await t('policy cidr deny wins over a wider allow', async () => isBlocked(await observe(canary, () => get(px2, 'http://10.77.0.2/'))));
  await t('policy cidr deny applies to SOCKS5 IPv4', async () => {
    const o = await observe(canary, () => socks(px2, 1, '10.77.0.2', 7));
    ok(o.r.rep === 2 && o.up.length === 0, describe(o));
  });
  await stopChecked(px2, 'policy cidr deny');
  const px3 = await startProxy(cfg({ domains: {}, cidrs: {} }));
  for (const h of ['api.test', '10.77.0.2', 'exact.test']) {
    await t(`policy empty allowlist blocks ${h}`, async () => isBlocked(await observe(canary, () => get(px3, `http://${h}/`))));
  }
  await t('policy empty allowlist blocks SOCKS5', async () => {
    const o = await observe(canary, () => socks(px3, 3, 'api.test', 7));
    ok(o.r.rep === 2 && o.up.length === 0, describe(o));
  });
  await stopChecked(px3, 'policy empty');
  const px4 = await startProxy(cfg({ domains: { 'bad.test': 'deny' }, cidrs: { '10.77.0.0/24': 'deny' } }));
  await t('policy deny-only list blocks everything else', async () => isBlocked(await observe(canary, () => get(px4, 'http://api.test/'))));
  await stopChecked(px4, 'policy deny-only');
}

// ---------------------------------------------------------------- ssrf
async function groupSsrf() {
  const px = await startProxy(allowAll());
  // Loopback in every spelling, and the other non-public classes at the host
  // namespace's addresses; the policy allows each by rule.
  const exactLiterals = ['127.0.0.1', '127.0.0.2', '127.255.255.254', '0.0.0.0', '10.77.0.3',
    ...CLASS_ADDRS, '224.0.0.1', '255.255.255.255',
    '[::1]', '[::]', '[::ffff:127.0.0.1]', '[::127.0.0.1]', '[64:ff9b::7f00:1]', '[2002:7f00:1::1]',
    '[fd77::2]', '[::ffff:10.77.0.3]', '[ff02::1]', '[fe80::2]'];
  const spellings = ['2130706433', '0177.0.0.1', '0x7f.1', '0x7f.0.0.1', '127.1', '127.0.1', '0x7f000001',
    '017700000001', '0177.1', '0x7F.0x0.0x0.0x1', '0', '0x0', '127.000.000.001', '00000127.0.0.1', '127.0.0.1.',
    '[0:0:0:0:0:0:0:1]', '[0000::0001]', '[::ffff:7f00:1]', '[::ffff:127.1]', '[::1%25lo]', '[::1%lo]',
    '1.2130706433', '127.0.0.1:80'];
  for (const h of exactLiterals) {
    await t(`ssrf HTTP literal ${h}: blocked`, async () => isBlocked(await observe(canary, () => get(px, `http://${h}/`))));
  }
  for (const h of spellings) {
    await t(`ssrf HTTP spelling ${h}: refused`, async () => isRefused(await observe(canary, () => get(px, `http://${h}/`))));
  }
  await t('ssrf HTTP literal 127.0.0.1:8080: blocked', async () => isBlocked(await observe(canary, () => get(px, 'http://127.0.0.1:8080/'))));
  for (const a of ['127.0.0.1:443', '[::1]:443', '2130706433:443', '0x7f.1:443', 'localhost:443', '0.0.0.0:443', '10.77.0.3:443', '[::ffff:127.0.0.1]:443']) {
    await t(`ssrf CONNECT ${a}: refused`, async () => isRefused(await observe(canary, () => connectTunnel(px, a))));
  }
  const socks4 = ['127.0.0.1', '127.1.2.3', '0.0.0.0', '10.77.0.3', ...CLASS_ADDRS, '224.0.0.1', '255.255.255.255'];
  for (const a of socks4) {
    await t(`ssrf SOCKS5 IPv4 ${a}: reply 2`, async () => {
      const o = await observe(canary, () => socks(px, 1, a, 7));
      ok(o.r.rep === 2, `reply ${o.r.rep}`); ok(o.up.length === 0 && o.canary === 0, describe(o));
    });
  }
  for (const a of ['::1', '::', '::ffff:127.0.0.1', '::127.0.0.1', '64:ff9b::127.0.0.1', '2002:7f00:1::1', 'fd77::2', '::ffff:10.77.0.3', 'ff02::1', 'fe80::2']) {
    await t(`ssrf SOCKS5 IPv6 ${a}: reply 2`, async () => {
      const o = await observe(canary, () => socks(px, 4, a, 7));
      ok(o.r.rep === 2, `reply ${o.r.rep}`); ok(o.up.length === 0 && o.canary === 0, describe(o));
    });
  }
  for (const a of ['127.0.0.1', '2130706433', '0x7f.1', '0177.0.0.1', '::1', '[::1]', 'localhost', '0', '::ffff:127.0.0.1']) {
    await t(`ssrf SOCKS5 domain-type ${a}: refused`, async () => {
      const o = await observe(canary, () => socks(px, 3, a, 7));
      ok(o.r.rep !== 0, `accepted: reply ${o.r.rep}`); ok(o.up.length === 0 && o.canary === 0, describe(o));
    });
  }
  // Names: pinned and resolved; one non-public address among several refuses.
  const names = ['pin-lo.test', 'pin-mixed.test', 'pin-v6lo.test', 'pin-mapped.test', 'pin-other.test', 'pin-link.test',
    'lo.test', 'lo2.test', 'mixed.test', 'mixed-rev.test', 'mixed6.test', 'v6lo.test', 'mapped.test', 'compat.test',
    'nat64.test', 'sixtofour.test', 'zero.test', 'unspec6.test', 'ula.test', 'other.test', 'mc.test', 'bcast.test',
    'localhost', ...CLASS_ADDRS.map((_, i) => `class${i}.test`)];
  for (const n of names) {
    await t(`ssrf HTTP name ${n}: blocked`, async () => isBlocked(await observe(canary, () => get(px, `http://${n}/`))));
    await t(`ssrf CONNECT name ${n}: blocked`, async () => isBlocked(await observe(canary, () => connectTunnel(px, `${n}:443`))));
    await t(`ssrf SOCKS5 name ${n}: reply 2`, async () => {
      const o = await observe(canary, () => socks(px, 3, n, 7));
      ok(o.r.rep === 2, `reply ${o.r.rep}`); ok(o.up.length === 0 && o.canary === 0, describe(o));
    });
  }
  // The opted-in host is reachable every way, and a pin beats the resolver.
  // Pins are looked up by the canonical name.
  for (const n of ['PIN-LO.TEST', 'pin-lo.test.', 'Pin-Mixed.Test.']) {
    await t(`ssrf pin honoured for ${n}: blocked`, async () => isBlocked(await observe(canary, () => get(px, `http://${n}/`))));
  }
  await t('ssrf pin honoured for PIN-OK.TEST. (resolver says loopback): allowed', async () =>
    isAllowed(await observe(canary, () => get(px, 'http://PIN-OK.TEST./'))));
  await t('ssrf CONNECT to an unbracketed IPv6 loopback reaches nothing', async () =>
    isRefused(await observe(canary, () => connectTunnel(px, '::1:443'))));
  await t('ssrf SOCKS5 IPv4-mapped opted-in host goes nowhere else', async () => {
    const o = await observe(canary, () => socks(px, 4, '::ffff:10.77.0.2', 7));
    ok(o.canary === 0 && o.up.every((l) => l.startsWith(`conn ${OK_ADDR} `)), describe(o));
    if (o.r.conn) o.r.conn.close();
  });
  await t('ssrf opted-in literal 10.77.0.2 over HTTP: allowed', async () => isAllowed(await observe(canary, () => get(px, 'http://10.77.0.2/'))));
  await t('ssrf pinned name pin-ok.test (resolver says loopback): allowed at the pin', async () =>
    isAllowed(await observe(canary, () => get(px, 'http://pin-ok.test/'))));
  await t('ssrf resolved name ok.test over HTTP: allowed', async () => isAllowed(await observe(canary, () => get(px, 'http://ok.test/'))));
  await t('ssrf opted-in 10.77.0.2 over SOCKS5 IPv4: echo', async () => {
    const o = await observe(canary, () => socks(px, 1, OK_ADDR, 7));
    ok(o.r.rep === 0 && o.up.length === 1, describe(o)); await echoCheck(o.r.conn, rnd(10000)); o.r.conn.close();
  });
  await t('ssrf opted-in 10.77.0.2 over CONNECT: echo', async () => {
    const o = await observe(canary, () => connectTunnel(px, `${OK_ADDR}:443`));
    ok(o.r.status === 200 && o.up.length === 1, describe(o)); await echoCheck(o.r.conn, rnd(10000)); o.r.conn.close();
  });
  // Hex spelling of the opted-in host: normalized to it or refused, never elsewhere.
  await t('ssrf hex spelling of the opted-in host goes nowhere else', async () => {
    const o = await observe(canary, () => get(px, 'http://0xa4d0002/'));
    ok(o.canary === 0 && o.up.every((l) => l.startsWith(`conn ${OK_ADDR} `)), describe(o));
  });
  await stopChecked(px, 'ssrf');
  const px3 = await startProxy(allowAll({ allow_private_cidrs: [`${OK_ADDR}/32`, '10.77.0.0/24'] }));
  for (const n of ['long.test', 'toolong.test']) {
    await t(`ssrf long answer ${n} with loopback last: blocked`, async () => isBlocked(await observe(canary, () => get(px3, `http://${n}/`))));
  }
  await stopChecked(px3, 'ssrf long answers');
  // An IPv6 test host opted in is reachable by literal, pin and SOCKS5.
  const px6 = await startProxy(cfg({ domains: { '**.test': 'allow' }, cidrs: { 'fd77::/64': 'allow' },
    allow_private_cidrs: ['fd77::2/128'], hosts: { 'six.test': ['fd77::2'] } }));
  await t('ssrf opted-in IPv6 host by literal [fd77::2]: allowed', async () => isAllowed(await observe(canary, () => get(px6, 'http://[fd77::2]/')), 'fd77::2'));
  await t('ssrf opted-in IPv6 host by pin: allowed', async () => isAllowed(await observe(canary, () => get(px6, 'http://six.test/')), 'fd77::2'));
  await t('ssrf opted-in IPv6 host over SOCKS5 IPv6: echo', async () => {
    const o = await observe(canary, () => socks(px6, 4, 'fd77::2', 7));
    ok(o.r.rep === 0 && o.up.length === 1 && o.up[0].startsWith('conn fd77::2 '), describe(o));
    await echoCheck(o.r.conn, rnd(5000)); o.r.conn.close();
  });
  await t('ssrf IPv6 opt-in does not open the IPv4 host', async () => isBlocked(await observe(canary, () => get(px6, 'http://ok.test/'))));
  await stopChecked(px6, 'ssrf IPv6');
  // allow_private_cidrs is what opts a range in: without it the same host is blocked.
  const px2 = await startProxy(allowAll({ allow_private_cidrs: [] }));
  await t('ssrf without allow_private_cidrs the test host is blocked (HTTP)', async () => isBlocked(await observe(canary, () => get(px2, 'http://ok.test/'))));
  await t('ssrf without allow_private_cidrs the test host is blocked (SOCKS5 IPv4)', async () => {
    const o = await observe(canary, () => socks(px2, 1, OK_ADDR, 7));
    ok(o.r.rep === 2 && o.up.length === 0, describe(o));
  });
  await stopChecked(px2, 'ssrf no opt-in');
}

// ---------------------------------------------------------------- dns
async function groupDns() {
  const px = await startProxy(cfg({ domains: { '**.test': 'allow' }, cidrs: { '10.77.0.0/24': 'allow' } }));
  for (const n of ['servfail.test', 'nx.test', 'refused.test', 'empty.test', 'timeout.test']) {
    await t(`dns lookup failure ${n}: HTTP refused`, async () => {
      const t0 = Date.now();
      const o = await observe(canary, () => rawHttp(px.http, `GET http://${n}/ HTTP/1.1\r\nHost: ${n}\r\nConnection: close\r\n\r\n`, 30000));
      isRefused(o); ok(o.r.status >= 400, `no answer within 30 s (${Date.now() - t0} ms)`);
      console.log(`#   ${n}: ${o.r.status} ${o.r.headers?.['x-shinken-decision'] ?? ''} after ${Date.now() - t0} ms`);
    });
    await t(`dns lookup failure ${n}: SOCKS5 refused`, async () => {
      const o = await observe(canary, () => socks(px, 3, n, 7));
      ok(o.r.rep !== 0 && o.up.length === 0 && o.canary === 0, describe(o));
    });
  }
  // Rebinding: the first answer is the allowed test host, every later one is
  // loopback (TTL 0). The proxy must dial the address it checked; it may
  // cache the first answer, but it must never reach loopback.
  await t('dns rebinding over HTTP: first request reaches the checked address', async () => {
    isAllowed(await observe(canary, () => get(px, 'http://rebind-http.test/')));
  });
  for (let i = 0; i < 3; i++) {
    await t(`dns rebinding over HTTP: request ${i + 2} never reaches loopback`, async () => {
      const o = await observe(canary, () => get(px, 'http://rebind-http.test/'));
      ok(o.canary === 0, `reached loopback: ${describe(o)}`);
      if (o.r.status === 200) isAllowed(o); else isBlocked(o);
    });
  }
  await t('dns rebinding over CONNECT: tunnel reaches the checked address', async () => {
    const o = await observe(canary, () => connectTunnel(px, 'rebind-connect.test:443'));
    ok(o.canary === 0 && o.r.status === 200 && o.up.length === 1 && o.up[0].startsWith(`conn ${OK_ADDR}`), describe(o));
    await echoCheck(o.r.conn, rnd(2048)); o.r.conn.close();
    const o2 = await observe(canary, () => connectTunnel(px, 'rebind-connect.test:443'));
    ok(o2.canary === 0, `second tunnel reached loopback: ${describe(o2)}`);
    if (o2.r.conn) o2.r.conn.close();
  });
  await t('dns rebinding over SOCKS5: reaches the checked address, never loopback', async () => {
    const o = await observe(canary, () => socks(px, 3, 'rebind-socks.test', 7));
    ok(o.canary === 0 && o.r.rep === 0 && o.up.length === 1 && o.up[0].startsWith(`conn ${OK_ADDR}`), describe(o));
    o.r.conn.close();
    const o2 = await observe(canary, () => socks(px, 3, 'rebind-socks.test', 7));
    ok(o2.canary === 0, `second request reached loopback: ${describe(o2)}`);
    if (o2.r.conn) o2.r.conn.close();
  });
  await t('dns rebinding to a mixed answer (loopback AAAA appears): never loopback', async () => {
    isAllowed(await observe(canary, () => get(px, 'http://rebind6.test/')));
    const o = await observe(canary, () => get(px, 'http://rebind6.test/'));
    ok(o.canary === 0, describe(o));
  });
  await t('dns the proxy asks the configured resolver', async () => {
    ok(dns.log.some((q) => q.name === 'rebind-http.test'), 'no query for rebind-http.test reached the test resolver');
  });
  await stopChecked(px, 'dns');
}

// ---------------------------------------------------------------- http
async function groupHttp() {
  const px = await startProxy(cfg({ domains: { '**.test': 'allow' }, cidrs: { '10.77.0.0/24': 'allow' } }));
  await t('http hop-by-hop headers and Proxy-Authorization are stripped', async () => {
    const o = await observe(canary, () => get(px, 'http://ok.test/path?q=1', { headers: [
      'Proxy-Authorization: Basic c2VjcmV0OnNlY3JldA==', 'Proxy-Connection: keep-alive', 'Keep-Alive: timeout=5',
      'TE: trailers', 'Trailer: X-Trail', 'Upgrade: h2c', 'Connection: X-Hop', 'X-Hop: 1', 'X-Keep: yes'] }));
    isAllowed(o);
    const e = upstreamEcho(o);
    const names = e.headers.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase());
    for (const h of ['proxy-authorization', 'proxy-connection', 'keep-alive', 'te', 'trailer', 'upgrade', 'x-hop']) {
      ok(!names.includes(h), `${h} reached the upstream: ${JSON.stringify(e.headers)}`);
    }
    ok(names.includes('x-keep'), 'an end-to-end header was dropped');
    ok(!JSON.stringify(e.headers).includes('c2VjcmV0'), 'proxy credentials reached the upstream');
    ok(e.url.endsWith('/path?q=1'), `target became ${e.url}`);
  });
  await t('http body is forwarded byte for byte', async () => {
    const body = rnd(3000).toString('latin1');
    const o = await observe(canary, () => get(px, 'http://ok.test/post', { method: 'POST', body }));
    isAllowed(o);
    const got = Buffer.from(upstreamEcho(o).body, 'base64').toString('latin1');
    let i = 0; while (i < body.length && got[i] === body[i]) i++;
    ok(got === body, `body changed on the way: ${got.length} of ${body.length} bytes arrived, first difference at ${i}`);
  });
  await t('http Host differing only in case matches', async () => isAllowed(await observe(canary, () => get(px, 'http://ok.test/', { host: 'OK.Test' }))));
  const mismatch = [['http://ok.test/', 'other.test'], ['http://ok.test/', '127.0.0.1'], ['http://127.0.0.1/', 'ok.test'],
    ['http://ok.test/', 'ok.test:8080'], ['http://ok.test:8080/', 'ok.test'], ['http://ok.test/', 'ok.test.evil']];
  for (const [target, host] of mismatch) {
    await t(`http Host ${host} for ${target}: 400`, async () => {
      const o = await observe(canary, () => get(px, target, { host }));
      isRefused(o); ok(o.r.status === 400 || (target.includes('127.') && o.r.status === 403), `status ${o.r.status}`);
    });
  }
  await t('http two Host headers: 400', async () => {
    const o = await observe(canary, () => rawHttp(px.http, 'GET http://ok.test/ HTTP/1.1\r\nHost: ok.test\r\nHost: lo.test\r\nConnection: close\r\n\r\n'));
    isRefused(o); ok(o.r.status === 400, `status ${o.r.status}`);
  });
  const refusedShapes = [
    ['origin-form request', 'GET / HTTP/1.1\r\nHost: ok.test\r\n\r\n'],
    ['origin-form to loopback Host', 'GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n'],
    ['https:// absolute-form', 'GET https://ok.test/ HTTP/1.1\r\nHost: ok.test\r\n\r\n'],
    ['ftp:// absolute-form', 'GET ftp://ok.test/ HTTP/1.1\r\nHost: ok.test\r\n\r\n'],
    ['two Content-Length (equal)', 'POST http://ok.test/ HTTP/1.1\r\nHost: ok.test\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc'],
    ['two Content-Length (different)', 'POST http://ok.test/ HTTP/1.1\r\nHost: ok.test\r\nContent-Length: 3\r\nContent-Length: 40\r\n\r\nabc'],
    ['Content-Length list', 'POST http://ok.test/ HTTP/1.1\r\nHost: ok.test\r\nContent-Length: 3, 3\r\n\r\nabc'],
    ['Content-Length with sign', 'POST http://ok.test/ HTTP/1.1\r\nHost: ok.test\r\nContent-Length: +3\r\n\r\nabc'],
    ['Content-Length with Transfer-Encoding', 'POST http://ok.test/ HTTP/1.1\r\nHost: ok.test\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n'],
    ['Transfer-Encoding with Content-Length', 'POST http://ok.test/ HTTP/1.1\r\nHost: ok.test\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n'],
    ['obs-fold', 'GET http://ok.test/ HTTP/1.1\r\nHost: ok.test\r\nX-Folded: a\r\n b\r\n\r\n'],
    ['obs-fold with tab', 'GET http://ok.test/ HTTP/1.1\r\nHost: ok.test\r\nX-Folded: a\r\n\tb\r\n\r\n'],
    ['bare LF everywhere', 'GET http://ok.test/ HTTP/1.1\nHost: ok.test\n\n'],
    ['bare LF in one header', 'GET http://ok.test/ HTTP/1.1\r\nHost: ok.test\r\nX-A: 1\nX-B: 2\r\n\r\n'],
    ['space before colon', 'POST http://ok.test/ HTTP/1.1\r\nHost: ok.test\r\nContent-Length : 3\r\n\r\nabc'],
    ['NUL in a header value', 'GET http://ok.test/ HTTP/1.1\r\nHost: ok.test\r\nX-A: a\u0000b\r\n\r\n'],
    ['space in the target', 'GET http://ok.test/a b HTTP/1.1\r\nHost: ok.test\r\n\r\n'],
    ['HTTP/0.9 request', 'GET http://ok.test/\r\n\r\n'],
    ['unknown version', 'GET http://ok.test/ HTTP/7.1\r\nHost: ok.test\r\n\r\n'],
  ];
  for (const [name, raw] of refusedShapes) {
    await t(`http refused: ${name}`, async () => {
      const o = await observe(canary, () => rawHttp(px.http, raw));
      isRefused(o);
      ok(o.r.status >= 400 || o.r.status === 0, `status ${o.r.status}`);
    });
  }
  await t('http oversized head is refused and the proxy lives on', async () => {
    const o = await observe(canary, () => rawHttp(px.http, `GET http://ok.test/ HTTP/1.1\r\nHost: ok.test\r\nX-Big: ${'a'.repeat(200000)}\r\n\r\n`));
    isRefused(o);
    isAllowed(await observe(canary, () => get(px, 'http://ok.test/')));
  });
  await t('http keep-alive: a second request on the connection is checked too', async () => {
    const o = await observe(canary, async () => {
      const c = await Conn.open(px.http);
      c.write('GET http://ok.test/ HTTP/1.1\r\nHost: ok.test\r\n\r\n');
      const r1 = await c.response();
      c.write('GET http://lo.test/ HTTP/1.1\r\nHost: lo.test\r\nConnection: close\r\n\r\n');
      const r2 = await c.response();
      c.close();
      return { status: r2.status, headers: r2.headers ?? {}, first: r1.status };
    });
    ok(o.canary === 0, `second request reached loopback: ${describe(o)}`);
    ok(o.r.first === 200, `first request: ${o.r.first}`);
    ok(o.r.status === 403 || o.r.status === 0, `second request: ${o.r.status}`);
  });
  await t('http pipelined: a second request in the same write is checked too', async () => {
    const o = await observe(canary, () => rawHttp(px.http,
      'GET http://ok.test/ HTTP/1.1\r\nHost: ok.test\r\n\r\nGET http://lo.test/ HTTP/1.1\r\nHost: lo.test\r\n\r\n'));
    ok(o.canary === 0, `pipelined request reached loopback: ${describe(o)}`);
  });
  await t('http keep-alive to a second allowed host reaches the right host', async () => {
    const o = await observe(canary, async () => {
      const c = await Conn.open(px.http);
      c.write('GET http://ok.test/ HTTP/1.1\r\nHost: ok.test\r\n\r\n');
      const r1 = await c.response();
      c.write('GET http://pin-other.test/ HTTP/1.1\r\nHost: pin-other.test\r\nConnection: close\r\n\r\n');
      const r2 = await c.response();
      c.close();
      return { status: r2.status, headers: r2.headers ?? {}, first: r1.status };
    });
    ok(o.up.every((l) => l.startsWith(`conn ${OK_ADDR} `)), `reached a host not opted in: ${describe(o)}`);
  });
  // Bytes after a request's body are the next request, checked on its own;
  // they must never reach the first request's upstream connection.
  const reqLog = () => { try { return fs.readFileSync(`${TMP}/upstream.log.req`, 'utf8').split('\n').filter(Boolean); } catch { return []; } };
  const smuggle = [
    ['Content-Length body', 'POST http://ok.test/a HTTP/1.1\r\nHost: ok.test\r\nContent-Length: 5\r\n\r\nhello'],
    ['chunked body', 'POST http://ok.test/a HTTP/1.1\r\nHost: ok.test\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n'],
  ];
  for (const [name, first] of smuggle) {
    await t(`http request after a ${name} is not smuggled upstream`, async () => {
      const r0 = reqLog().length;
      const o = await observe(canary, () => rawHttp(px.http,
        `${first}GET http://lo.test/b HTTP/1.1\r\nHost: lo.test\r\n\r\nGET /c HTTP/1.1\r\nHost: ok.test\r\n\r\n`), 300);
      const reqs = reqLog().slice(r0);
      ok(o.canary === 0, `reached loopback: ${describe(o)}`);
      ok(o.r.status === 200, `first request: ${describe(o)}`);
      ok(reqs.length === 1 && / POST \/a 5$/.test(reqs[0]), `upstream saw: ${JSON.stringify(reqs)}`);
    });
  }
  for (const [name, chunks] of [['size with a sign', '+5'], ['hex prefix', '0x5'], ['overflowing size', 'ffffffffffffffffffff'],
    ['size with trailing space', '5 '], ['empty size', ''], ['negative size', '-1']]) {
    await t(`http bad chunk ${name} never reaches loopback`, async () => {
      const r0 = reqLog().length;
      const o = await observe(canary, () => rawHttp(px.http,
        `POST http://ok.test/a HTTP/1.1\r\nHost: ok.test\r\nTransfer-Encoding: chunked\r\n\r\n${chunks}\r\nhello\r\n0\r\n\r\nGET http://lo.test/ HTTP/1.1\r\nHost: lo.test\r\n\r\n`), 300);
      ok(o.canary === 0, `reached loopback: ${describe(o)}`);
      const reqs = reqLog().slice(r0);
      ok(reqs.every((l) => / POST \/a /.test(l)) && reqs.length <= 1, `upstream saw: ${JSON.stringify(reqs)}`);
    });
  }
  await t('http CONNECT: 256 KiB echo byte for byte', async () => {
    const o = await observe(canary, () => connectTunnel(px, 'ok.test:443'));
    ok(o.r.status === 200, describe(o));
    await echoCheck(o.r.conn, rnd(262144)); o.r.conn.close();
  });
  await t('http CONNECT with early data to a blocked host reaches nothing', async () => {
    const o = await observe(canary, () => rawHttp(px.http, 'CONNECT lo.test:443 HTTP/1.1\r\nHost: lo.test:443\r\n\r\nGET / HTTP/1.1\r\n\r\n'));
    isBlocked(o);
  });
  await t('http CONNECT without a port is refused', async () => isRefused(await observe(canary, () => connectTunnel(px, 'ok.test'))));
  await t('http CONNECT to port 0 is refused', async () => isRefused(await observe(canary, () => connectTunnel(px, 'ok.test:0'))));
  await t('http CONNECT to port 65536 is refused', async () => isRefused(await observe(canary, () => connectTunnel(px, 'ok.test:65536'))));
  await stopChecked(px, 'http');
}

// ---------------------------------------------------------------- socks5
async function groupSocks() {
  const px = await startProxy(cfg({ domains: { '**.test': 'allow', 'denied.test': 'deny', '**.corp.test:443': 'allow' },
    cidrs: { '10.77.0.0/24': 'allow', 'fd77::/64': 'allow' } }));
  await t('socks5 offering only username/password gets 0xFF', async () => {
    const o = await observe(canary, () => socks(px, 3, 'ok.test', 7, { methods: [2] }));
    ok(o.r.rep === 'method' && o.r.method === 0xff, `reply ${JSON.stringify(o.r.rep)} ${o.r.method}`);
    ok(o.up.length === 0, describe(o));
  });
  await t('socks5 version 4 greeting is refused', async () => {
    const o = await observe(canary, () => socks(px, 1, OK_ADDR, 7, { version: 4 }));
    ok(o.r.rep !== 0 && o.up.length === 0, describe(o));
  });
  await t('socks5 domain CONNECT: 256 KiB echo', async () => {
    const o = await observe(canary, () => socks(px, 3, 'ok.test', 7));
    ok(o.r.rep === 0 && o.r.complete && o.up.length === 1 && o.up[0].startsWith(`conn ${OK_ADDR}`), describe(o));
    await echoCheck(o.r.conn, rnd(262144)); o.r.conn.close();
  });
  await t('socks5 IPv4 CONNECT: echo', async () => {
    const o = await observe(canary, () => socks(px, 1, OK_ADDR, 7));
    ok(o.r.rep === 0 && o.up.length === 1, describe(o)); await echoCheck(o.r.conn, rnd(5000)); o.r.conn.close();
  });
  const blocked = [[1, '10.77.0.3', 7], [1, '127.0.0.1', 7], [4, '::1', 7], [4, 'fd77::2', 7], [3, 'denied.test', 7],
    [3, 'lo.test', 7]];
  for (const [atyp, a, p] of blocked) {
    await t(`socks5 blocked atyp ${atyp} ${a}:${p}: reply 2`, async () => {
      const o = await observe(canary, () => socks(px, atyp, a, p));
      ok(o.r.rep === 2, `reply ${o.r.rep}`); ok(o.up.length === 0 && o.canary === 0, describe(o));
    });
  }
  await t('socks5 port pattern: a.corp.test:443 allowed', async () => {
    const o = await observe(canary, () => socks(px, 3, 'a.corp.test', 443));
    ok(o.r.rep === 0 && o.up.length === 1, describe(o)); await echoCheck(o.r.conn, rnd(100)); o.r.conn.close();
  });
  for (const [cmd, name] of [[3, 'UDP ASSOCIATE'], [2, 'BIND'], [9, 'unknown command']]) {
    for (const [atyp, a] of [[1, OK_ADDR], [3, 'ok.test']]) {
      await t(`socks5 ${name} (atyp ${atyp}) refused`, async () => {
        const o = await observe(canary, () => socks(px, atyp, a, 7, { cmd }));
        ok(o.r.rep !== 0, `accepted: ${o.r.rep}`); ok(o.up.length === 0 && o.canary === 0, describe(o));
      });
    }
  }
  await t('socks5 unknown address type refused', async () => {
    const o = await observe(canary, async () => {
      const c = await Conn.open(px.socks);
      c.write(Buffer.from([5, 1, 0])); await c.take(2);
      c.write(Buffer.from([5, 1, 0, 9, 10, 77, 0, 2, 0, 7]));
      const r = await c.take(2, 3000); c.close();
      return { rep: r ? r[1] : 'closed' };
    });
    ok(o.r.rep !== 0 && o.up.length === 0, describe(o));
  });
  await t('socks5 truncated request, then the proxy still serves', async () => {
    const c = await Conn.open(px.socks);
    c.write(Buffer.from([5, 1, 0, 5, 1, 0, 3, 40, 0x61])); await sleep(100); c.close();
    const o = await observe(canary, () => socks(px, 3, 'ok.test', 7));
    ok(o.r.rep === 0, describe(o)); o.r.conn.close();
  });
  await t('socks5 data sent before the reply is not delivered to a blocked host', async () => {
    const o = await observe(canary, async () => {
      const c = await Conn.open(px.socks);
      c.write(Buffer.concat([Buffer.from([5, 1, 0, 5, 1, 0, 1, 127, 0, 0, 1, 0, 80]), Buffer.from('GET / HTTP/1.0\r\n\r\n')]));
      const g = await c.take(2, 3000);
      const r = g && await c.take(4, 3000); c.close();
      return { rep: r ? r[1] : 'closed' };
    });
    ok(o.canary === 0 && o.r.rep !== 0, describe(o));
  });
  // Every reply code the proxy sends, each for its own reason: a failed
  // lookup is 0x04, a refusal 0x02, an upstream that refuses 0x05.
  const codes = [
    ['a lookup that fails (NXDOMAIN)', 3, 'nx.test', 7, 4],
    ['a lookup that fails (SERVFAIL)', 3, 'servfail.test', 7, 4],
    ['a lookup with no address', 3, 'empty.test', 7, 4],
    ['a lookup that times out', 3, 'timeout.test', 7, 4],
    ['a name the policy denies', 3, 'denied.test', 7, 2],
    ['a name that resolves to loopback', 3, 'lo.test', 7, 2],
    ['an upstream port nobody listens on', 3, 'ok.test', 9, 5],
    ['an address outside the policy', 1, '10.77.0.3', 7, 2],
  ];
  for (const [name, atyp, a, p, want] of codes) {
    await t(`socks5 reply code for ${name}: 0x0${want}`, async () => {
      const o = await observe(canary, () => socks(px, atyp, a, p));
      ok(o.r.rep === want, `reply ${o.r.rep}`);
      ok(o.up.length === 0 && o.canary === 0, describe(o));
    });
  }
  await stopChecked(px, 'socks5');
  // An allowed address where no host answers: unreachable, 0x04.
  const pu = await startProxy(cfg({ domains: {}, cidrs: { '10.77.0.0/24': 'allow' }, allow_private_cidrs: ['10.77.0.0/24'] }));
  await t('socks5 reply code for a host that does not answer ARP: 0x04', async () => {
    const o = await observe(canary, () => socks(pu, 1, '10.77.0.200', 7));
    ok(o.r.rep === 4, `reply ${o.r.rep}`);
  });
  await t('http answers the same case 502 with a body that says so', async () => {
    const o = await observe(canary, () => get(pu, 'http://10.77.0.200/'));
    ok(o.r.status === 502 && o.r.headers['x-shinken-decision'] === 'connect-unreachable', describe(o));
    ok(/could not be reached/.test(o.r.body), o.r.body);
  });
  await stopChecked(pu, 'socks5 unreachable');
}

// ---------------------------------------------------------------- ops: audit and reload
async function groupOps() {
  const px = await startProxy(cfg({ domains: { '**.test': 'allow', 'denied.test': 'deny' }, cidrs: { '10.77.0.0/24': 'allow' } }));
  const secrets = ['secret-path-7f3a', 'SECRETQ9', 'SECRETH8', 'SECRETC7', 'U0VDUkVUUEE='];
  await t('audit: allowed and blocked HTTP requests', async () => {
    const hdr = ['X-Api-Key: SECRETH8', 'Cookie: s=SECRETC7', 'Proxy-Authorization: Basic U0VDUkVUUEE='];
    isAllowed(await observe(canary, () => get(px, 'http://ok.test/secret-path-7f3a?token=SECRETQ9', { headers: hdr })));
    isBlocked(await observe(canary, () => get(px, 'http://denied.test/secret-path-7f3a?token=SECRETQ9', { headers: hdr })));
    const o = await observe(canary, () => socks(px, 3, 'denied.test', 7));
    ok(o.r.rep === 2, describe(o));
    await sleep(200);
  });
  const audit = px.audit();
  await t('audit: one JSON line per decision with the required fields', async () => {
    ok(audit.length >= 3, `${audit.length} audit lines: ${px.errText.slice(0, 500)}`);
    for (const a of audit) {
      for (const k of ['time', 'session', 'protocol', 'host', 'port', 'decision', 'reason', 'rule']) ok(k in a, `no '${k}' in ${JSON.stringify(a)}`);
    }
    ok(audit.some((a) => a.host === 'ok.test' && a.port === 80), 'no line for ok.test:80');
    ok(audit.some((a) => a.host === 'denied.test' && a.decision !== audit.find((b) => b.host === 'ok.test').decision), 'allow and deny not told apart');
    ok(new Set(audit.map((a) => a.protocol)).size >= 2, 'HTTP and SOCKS5 not told apart');
  });
  await t('audit: never a path, a query or a header value', async () => {
    for (const s of secrets) ok(!px.errText.includes(s), `'${s}' appears in the audit output`);
  });
  await stopChecked(px, 'audit');

  const file = `${TMP}/audit-file.log`;
  const pxf = await startProxy(cfg({ domains: { '**.test': 'allow' }, cidrs: { '10.77.0.0/24': 'allow' }, audit: file }));
  await t('audit: "audit": FILE receives the lines', async () => {
    isAllowed(await observe(canary, () => get(pxf, 'http://ok.test/x')));
    await sleep(200);
    const lines = fs.existsSync(file) ? fs.readFileSync(file, 'utf8').split('\n').filter(Boolean) : [];
    ok(lines.length >= 1 && JSON.parse(lines[0]).host === 'ok.test', `audit file: ${lines.join(' | ')}`);
    ok(!pxf.errText.includes('"decision"'), 'audit lines also went to stderr');
  });
  await stopChecked(pxf, 'audit file');

  // SIGHUP: the new policy applies from the next connection; a bad file
  // must not crash the proxy nor widen the policy.
  const c1 = cfg({ domains: { 'a.test': 'allow' } });
  const pr = await startProxy(c1);
  await t('reload: before SIGHUP b.test is blocked', async () => isBlocked(await observe(canary, () => get(pr, 'http://b.test/'))));
  fs.writeFileSync(pr.file, JSON.stringify(cfg({ domains: { 'b.test': 'allow' } })));
  pr.proc.kill('SIGHUP');
  await t('reload: after SIGHUP b.test is allowed and a.test blocked', async () => {
    let o;
    for (let i = 0; i < 30; i++) { o = await observe(canary, () => get(pr, 'http://b.test/'), 0); if (o.r.status === 200) break; await sleep(100); }
    isAllowed(o);
    isBlocked(await observe(canary, () => get(pr, 'http://a.test/')));
  });
  // A tunnel opened before a reload lives on; a lookup in flight during
  // one ends cleanly (the sanitizers watch the old policy's teardown).
  await t('reload: an open tunnel survives a reload that no longer allows it', async () => {
    fs.writeFileSync(pr.file, JSON.stringify(cfg({ domains: { 'b.test': 'allow', 'tun.test:443': 'allow', 'timeout.test': 'allow' } })));
    pr.proc.kill('SIGHUP');
    let o;
    for (let i = 0; i < 30; i++) { o = await observe(canary, () => connectTunnel(pr, 'tun.test:443'), 0); if (o.r.status === 200) break; await sleep(100); }
    ok(o.r.status === 200, describe(o));
    const slow = rawHttp(pr.http, 'GET http://timeout.test/ HTTP/1.1\r\nHost: timeout.test\r\n\r\n', 15000);
    await sleep(200);
    fs.writeFileSync(pr.file, JSON.stringify(cfg({ domains: { 'b.test': 'allow' } })));
    pr.proc.kill('SIGHUP');
    await sleep(500);
    await echoCheck(o.r.conn, rnd(20000));
    o.r.conn.close();
    const s2 = await slow;
    ok(s2.status >= 400, `request in flight during the reload: ${s2.status}`);
    isBlocked(await observe(canary, () => connectTunnel(pr, 'tun.test:443')));
  });
  fs.writeFileSync(pr.file, '{"domains": {"*": "allow"}, "bogus": 1}');
  pr.proc.kill('SIGHUP');
  await sleep(500);
  await t('reload: a bad file keeps the proxy up and widens nothing', async () => {
    ok(pr.code === undefined && !pr.signal, `proxy exited ${pr.code ?? pr.signal}`);
    isBlocked(await observe(canary, () => get(pr, 'http://a.test/')));
    isBlocked(await observe(canary, () => get(pr, 'http://c.test/')));
  });
  await stopChecked(pr, 'reload');
}

// ---------------------------------------------------------------- load
function procStatus(pid) {
  const s = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (k) => Number((new RegExp(`${k}:\\s+(\\d+)`).exec(s) || [0, 0])[1]);
  const fds = fs.readdirSync(`/proc/${pid}/fd`);
  const pipes = fds.filter((f) => { try { return fs.readlinkSync(`/proc/${pid}/fd/${f}`).startsWith('pipe:'); } catch { return false; } }).length;
  return { rss: kb('VmRSS'), hwm: kb('VmHWM'), fds: fds.length, pipes };
}
async function groupLoad() {
  const N = Number(process.env.EGRESS_LOAD_TUNNELS || 1000), SIZE = 65536;
  // The name is pinned: this group measures tunnels, and a thousand lookups
  // racing a loaded machine's test resolver would measure that instead.
  const px = await startProxy(cfg({ domains: { 'ok.test:443': 'allow' }, hosts: { 'ok.test': [OK_ADDR] },
    listen: { http: '127.0.0.1:0' } }));
  await sleep(200);
  const before = procStatus(px.proc.pid);
  let peak = before.rss;
  const sampler = setInterval(() => { try { peak = Math.max(peak, procStatus(px.proc.pid).rss); } catch {} }, 50);
  const tunnels = [];
  await t(`load: ${N} concurrent CONNECT tunnels open`, async () => {
    const t0 = Date.now();
    const batch = 100;
    for (let i = 0; i < N; i += batch) {
      const rs = await Promise.all(Array.from({ length: Math.min(batch, N - i) }, () => connectTunnel(px, 'ok.test:443')));
      for (const r of rs) { ok(r.status === 200, `tunnel ${tunnels.length}: status ${r.status}`); tunnels.push(r.conn); }
    }
    const st = procStatus(px.proc.pid);
    const open = st.fds - before.fds, pipes = st.pipes - before.pipes;
    console.log(`#   ${N} tunnels open in ${Date.now() - t0} ms; proxy holds ${open} more descriptors, ${pipes} of them pipes`);
    ok(open >= 2 * N, `only ${open} descriptors for ${N} tunnels: they are not all open at once`);
    // splice(2) moves bytes through a pipe: one per direction per tunnel.
    ok(pipes >= 2 * N, `only ${pipes} pipe ends for ${N} tunnels: not relayed with splice(2)`);
  });
  await t(`load: ${N} x ${SIZE} bytes of random data echoed byte-exact, all at once`, async () => {
    const t0 = Date.now();
    const datas = tunnels.map(() => rnd(SIZE));
    const results = await Promise.all(tunnels.map((c, i) => echoCheck(c, datas[i]).then(() => true, (e) => e.message)));
    const bad = results.filter((r) => r !== true);
    console.log(`#   echoed ${(N * SIZE / 1048576).toFixed(0)} MiB each way in ${Date.now() - t0} ms`);
    ok(bad.length === 0, `${bad.length} tunnels failed, e.g. ${bad[0]}`);
  });
  await t('load: memory stays bounded', async () => {
    clearInterval(sampler);
    const st = procStatus(px.proc.pid);
    const grown = (Math.max(peak, st.hwm) - before.rss) / 1024;
    console.log(`#   RSS before ${(before.rss / 1024).toFixed(1)} MiB, peak ${(Math.max(peak, st.hwm) / 1024).toFixed(1)} MiB (+${grown.toFixed(1)} MiB for ${N} tunnels)`);
    // 64 KiB in flight per direction per tunnel would be 128 MiB; even under
    // ASan the proxy must not hold much more than what is in flight.
    ok(grown < 512, `grew by ${grown.toFixed(1)} MiB`);
  });
  await t('load: closing every tunnel releases every descriptor', async () => {
    for (const c of tunnels) c.close();
    let st;
    for (let i = 0; i < 50; i++) { await sleep(100); st = procStatus(px.proc.pid); if (st.fds <= before.fds) break; }
    ok(st.fds <= before.fds, `proxy still holds ${st.fds - before.fds} extra descriptors`);
  });
  await t('load: clean shutdown (SIGTERM, exit 0, no sanitizer report)', async () => {
    ok(await px.stop(), 'did not exit within 10 s');
    ok(px.code === 0, `exit ${px.code ?? px.signal}`);
    ok(!px.sanitizerReport(), px.errText.slice(0, 800));
  });
}

// ---------------------------------------------------------------- limits
// The request phase's timeouts and the limits of the configuration's
// "limits" object, on the standalone proxy (one process, one policy: the
// limits are the proxy's). Each protection has its control: the same
// client against the defaults.
async function groupLimits() {
  const pq = await startProxy(cfg({ domains: { '**.test': 'allow' }, limits: { idle_timeout_ms: 300 } }));
  const pd = await startProxy(cfg({ domains: { '**.test': 'allow' } }));
  const silent = async (px) => {
    const c = await Conn.open(px.http);
    const r = await c.response(2500);
    const closed = c.closed;
    c.close();
    return { ...r, closed };
  };
  await t('limits: a connection that sends nothing is answered 408 and closed after idle_timeout_ms', async () => {
    const r = await silent(pq);
    ok(r.status === 408 && r.headers['x-shinken-decision'] === 'request-idle-timeout', `status ${r.status}`);
    ok(/did not arrive in time/.test(r.body), r.body);
  });
  await t('limits: control: with the default idle timeout the same connection is still open', async () => {
    const r = await silent(pd);
    ok(r.status === 0 && !r.closed, `status ${r.status} closed ${r.closed}`);
  });
  const pr = await startProxy(cfg({ domains: { '**.test': 'allow' }, limits: { idle_timeout_ms: 1000, request_timeout_ms: 1500 } }));
  const trickle = async (px) => {
    const c = await Conn.open(px.http);
    const head = 'GET http://ok.test/ HTTP/1.1\r\nHost: ok.test\r\nX-Slow: ';
    let i = 0;
    const timer = setInterval(() => { if (!c.closed) c.write(head[i++ % head.length] ?? 'a'); }, 200);
    const r = await c.response(3000);
    clearInterval(timer);
    const closed = c.closed;
    c.close();
    return { ...r, closed };
  };
  await t('limits: a request that trickles in (slowloris) is cut at request_timeout_ms', async () => {
    const r = await trickle(pr);
    ok(r.status === 408 && r.headers['x-shinken-decision'] === 'request-timeout', `status ${r.status}`);
  });
  await t('limits: control: with the default timeouts the trickle goes on', async () => {
    const r = await trickle(pd);
    ok(r.status === 0 && !r.closed, `status ${r.status} closed ${r.closed}`);
  });
  await stopChecked(pq, 'limits idle');
  await stopChecked(pr, 'limits request');
  await stopChecked(pd, 'limits defaults');

  const ps = await startProxy(cfg({ domains: { '**.test': 'allow' }, cidrs: { '10.77.0.0/24': 'allow' }, limits: { setup: 5 } }));
  await t('limits: past the setup limit a new connection is refused at once: HTTP 429, SOCKS5 0x02', async () => {
    const idle = await Promise.all(Array.from({ length: 5 }, () => Conn.open(ps.http)));
    await sleep(100);
    const o = await observe(canary, () => get(ps, 'http://ok.test/'));
    ok(o.r.status === 429 && o.r.headers['x-shinken-decision'] === 'session-setup-limit' && o.up.length === 0, describe(o));
    ok(/5 connections being set up/.test(o.r.body), o.r.body);
    const s5 = await observe(canary, () => socks(ps, 3, 'ok.test', 7));
    ok(s5.r.rep === 2 && s5.up.length === 0, describe(s5));
    idle.forEach((c) => c.close());
    await sleep(200);
    isAllowed(await observe(canary, () => get(ps, 'http://ok.test/')));
    const a = ps.audit().filter((l) => l.reason === 'session-setup-limit');
    ok(a.length === 2 && a.every((l) => l.decision === 'deny'), `${a.length} audit lines`);
  });
  await stopChecked(ps, 'limits setup');

  const pc = await startProxy(cfg({ domains: { '**.test': 'allow' }, limits: { connections: 3 } }));
  await t('limits: the connection limit counts both sides: a second tunnel is refused at its dial (429)', async () => {
    const one = await connectTunnel(pc, 'ok.test:443');
    ok(one.status === 200, `first tunnel ${one.status}`);
    await echoCheck(one.conn, rnd(100)); // the upstream has logged it by now
    const o = await observe(canary, () => connectTunnel(pc, 'ok.test:443'));
    ok(o.r.status === 429 && o.r.headers['x-shinken-decision'] === 'session-connection-limit' && o.up.length === 0, describe(o));
    const extra = await Conn.open(pc.http);
    const third = await rawHttp(pc.http, 'CONNECT ok.test:443 HTTP/1.1\r\nHost: ok.test:443\r\n\r\n');
    ok(third.status === 429 && third.headers['x-shinken-decision'] === 'session-connection-limit', `at accept: ${third.status}`);
    extra.close();
    await echoCheck(one.conn, rnd(1000));
    one.conn.close();
  });
  await stopChecked(pc, 'limits connections');
}

const groups = { config: groupConfig, canon: groupCanon, policy: groupPolicy, ssrf: groupSsrf, dns: groupDns,
  http: groupHttp, socks5: groupSocks, ops: groupOps, load: groupLoad, limits: groupLimits,
  pool: () => groupPool({ dns, canary }), hold: () => groupHold({ dns, canary }), flood: () => groupFlood({ dns, canary }) };
if (!groups[group]) { console.log(`unknown group ${group}`); process.exit(2); }
await groups[group]();
dns.close(); canary.close();
finish(`egress-${group}`);
