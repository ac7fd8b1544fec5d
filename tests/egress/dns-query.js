// SPDX-License-Identifier: Apache-2.0
// dns-query.js NAME TYPE [tcp]: one query to the first nameserver of
// /etc/resolv.conf (inside the sandbox: the stage-2 DNS stub); prints the
// response code and the addresses, e.g. "rcode 0 10.77.0.2" or "rcode 5".
// CommonJS, so that it runs as a plain script inside the sandbox.
const dgram = require('dgram');
const fs = require('fs');
const net = require('net');
const [name, type, proto] = process.argv.slice(2);
const server = /^nameserver\s+(\S+)/m.exec(fs.readFileSync('/etc/resolv.conf', 'utf8'))[1];
const qtype = { A: 1, AAAA: 28, TXT: 16 }[type];
const labels = name.split('.').map((l) => Buffer.concat([Buffer.from([l.length]), Buffer.from(l)]));
const q = Buffer.concat([Buffer.from([0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0]), ...labels,
  Buffer.from([0, qtype >> 8, qtype & 255, 0, 1])]);
const timer = setTimeout(() => { console.log('timeout'); process.exit(0); }, 5000);
function answer(m) {
  const rcode = m[3] & 15, an = m.readUInt16BE(6);
  let o = 12;
  while (m[o] !== 0) o += m[o] + 1;
  o += 5;
  const addrs = [];
  for (let i = 0; i < an; i++) {
    o += (m[o] & 0xc0) === 0xc0 ? 2 : (() => { let p = o; while (m[p] !== 0) p += m[p] + 1; return p + 1 - o; })();
    const t = m.readUInt16BE(o), len = m.readUInt16BE(o + 8);
    const rd = m.subarray(o + 10, o + 10 + len);
    if (t === 1) addrs.push([...rd].join('.'));
    if (t === 28) addrs.push(rd.toString('hex').match(/.{4}/g).join(':'));
    o += 10 + len;
  }
  console.log(['rcode', rcode, ...addrs].join(' '));
  clearTimeout(timer);
  process.exit(0);
}
if (proto === 'tcp') {
  // DNS over TCP: each message carries a two-byte length.
  let buf = Buffer.alloc(0);
  const c = net.connect(53, server, () => c.write(Buffer.concat([Buffer.from([q.length >> 8, q.length & 255]), q])));
  c.on('data', (d) => {
    buf = Buffer.concat([buf, d]);
    if (buf.length >= 2 && buf.length >= 2 + buf.readUInt16BE(0)) answer(buf.subarray(2));
  });
  c.on('error', (e) => { console.log(`error ${e.message}`); process.exit(0); });
} else {
  const s = dgram.createSocket(server.includes(':') ? 'udp6' : 'udp4');
  s.on('message', answer);
  s.send(q, 53, server);
}
