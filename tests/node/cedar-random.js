// SPDX-License-Identifier: Apache-2.0
// Random Cedar worlds: policies, entities and requests, from a fixed seed.
// Shared by the differential test (tests/node/differential.js) and the
// benchmark (bench/cedar/), so both exercise the same shapes of input.
//
// The generator aims at the places two engines can disagree: every operator,
// every extension function with valid and invalid literals, values of the
// wrong type, missing attributes and entities, integer overflow, tags,
// hierarchy through `in`, and `is`. Subexpressions are always parenthesised,
// so every generated policy is syntactically valid.
'use strict';

function rng(seed) {
  // mulberry32: small, fast and the same everywhere.
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const r = {
    next,
    int: (n) => Math.floor(next() * n),
    pick: (arr) => arr[Math.floor(next() * arr.length)],
    chance: (p) => next() < p,
  };
  return r;
}

const TYPES = ['User', 'Group', 'Doc', 'Folder'];
const ACTIONS = ['read', 'write', 'delete', 'share'];
const ACTION_GROUPS = ['all', 'edit'];
const ATTRS = ['age', 'name', 'level', 'tags', 'flag', 'owner', 'addr', 'score', 'created', 'ttl', 'info'];
const STRINGS = ['', 'a', 'alice', 'bob', 'a*b', 'x y', 'caf\u00e9', '\u{1F600}', 'admin', 'pypi.example', 'files.pypi.example'];
const IPS = ['10.0.0.1', '10.0.0.0/8', '192.168.1.7', '127.0.0.1', '::1', 'ff02::1', '224.0.0.1',
  '2001:db8::/32', '2001:db8::5', '0.0.0.0/0', '1.2.3', '::ffff:1.2.3.4', '10.1.2.3/33'];
const DECIMALS = ['1.0', '-1.5', '0.0001', '123.4567', '-0.5', '922337203685477.5807', '1.23456', 'x'];
const DATETIMES = ['2024-01-01', '2024-06-30T12:00:00Z', '1970-01-01', '2024-02-29T23:59:59.999+0100',
  '1969-12-31T23:59:59Z', '2024-13-01', '2024-01-01T00:00:00'];
const DURATIONS = ['1h', '-30m', '1d2h3m4s5ms', '0ms', '90s', '9223372036854775807ms', '1x', '-9223372036854775808ms'];
const LONGS = [0, 1, -1, 2, 7, 42, 1000, -1000, 9223372036854775807n, -9223372036854775807n];

// JSON values that are not Cedar values: each makes a request or an entity
// file invalid.
const BAD_VALUES = [
  { __extn: { fn: 'ip', arg: '1.2.3' } },
  { __extn: { fn: 'nope', arg: 'x' } },
  { __extn: { fn: 'ip', arg: 1 } },
  { __entity: { type: 'no such::type', id: 'x' } },
  { __expr: '1' },
  null,
  [1, null],
  1.5,
];

function cedarString(s) {
  let out = '"';
  for (const ch of s) {
    if (ch === '"') out += '\\"';
    else if (ch === '\\') out += '\\\\';
    else if (ch.codePointAt(0) > 0x7e) out += `\\u{${ch.codePointAt(0).toString(16)}}`;
    else out += ch;
  }
  return out + '"';
}

const uidText = (t, id) => `${t}::${cedarString(id)}`;
const longText = (v) => (typeof v === 'bigint' ? v.toString() : String(v));

// Entity ids: a few per type, some with characters that need escaping in
// policy text and JSON, and the empty id. ("ghost" never exists.)
function ids(type) {
  const base = { User: ['alice', 'bob', 'carol'], Group: ['admins', 'staff'], Doc: ['d0', 'd1', 'd"2 \u00e9\\'],
    Folder: ['root', 'f1', ''] };
  return base[type];
}

// With `typed`, the world fits SCHEMA: tags are strings and the actions
// come from the schema rather than the entity file.
function makeWorld(r, typed = false) {
  const entities = [];
  const extn = (fn, arg) => ({ __extn: { fn, arg } });
  const value = (attr) => {
    switch (attr) {
      case 'age': return r.pick([0, 17, 18, 42, -3, 9007199254740991]);
      case 'name': return r.pick(STRINGS);
      case 'level': return r.pick([1, 5, 10]);
      case 'tags': return [...new Set([r.pick(STRINGS), r.pick(STRINGS)])];
      case 'flag': return r.chance(0.5);
      case 'owner': return { __entity: { type: 'User', id: r.pick(['alice', 'bob', 'nobody']) } };
      case 'addr': return extn('ip', r.pick(IPS.slice(0, 10)));
      case 'score': return extn('decimal', r.pick(DECIMALS.slice(0, 6)));
      case 'created': return extn('datetime', r.pick(DATETIMES.slice(0, 5)));
      case 'ttl': return extn('duration', r.pick(DURATIONS.slice(0, 6)));
      case 'info': return { depth: r.int(3), label: r.pick(STRINGS), inner: { ok: r.chance(0.5) } };
      default: throw new Error(attr);
    }
  };
  const parentsOf = (type, id) => {
    const out = [];
    if (type === 'User') for (const g of ids('Group')) if (r.chance(0.4)) out.push({ type: 'Group', id: g });
    if (type === 'Group' && id === 'staff' && r.chance(0.5)) out.push({ type: 'Group', id: 'admins' });
    if (type === 'Doc') out.push({ type: 'Folder', id: r.pick(ids('Folder')) });
    if (type === 'Folder' && id === 'f1') out.push({ type: 'Folder', id: 'root' });
    return out;
  };
  for (const t of TYPES) {
    for (const id of ids(t)) {
      const attrs = {};
      for (const a of ATTRS) if (r.chance(0.6)) attrs[a] = value(a);
      if (r.chance(0.002)) attrs.bad = r.pick(BAD_VALUES);
      const tags = {};
      for (const k of ['env', 'team']) if (r.chance(0.4)) tags[k] = r.pick(typed ? ['prod', 'dev'] : ['prod', 'dev', 7]);
      entities.push({ uid: { type: t, id }, attrs, parents: parentsOf(t, id), tags });
    }
  }
  if (typed) return entities;
  for (const a of ACTIONS) {
    const parents = [];
    if (r.chance(0.7)) parents.push({ type: 'Action', id: 'all' });
    if (a !== 'read' && r.chance(0.6)) parents.push({ type: 'Action', id: 'edit' });
    entities.push({ uid: { type: 'Action', id: a }, attrs: {}, parents });
  }
  for (const g of ACTION_GROUPS) entities.push({ uid: { type: 'Action', id: g }, attrs: {}, parents: [] });
  return entities;
}

// ---------------------------------------------------------------- expressions

function makeExprGen(r) {
  const anyUid = () => {
    const t = r.pick(TYPES);
    return uidText(t, r.chance(0.1) ? 'ghost' : r.pick(ids(t)));
  };
  const entityVar = () => r.pick(['principal', 'resource', 'principal', 'resource', 'action', 'context.who']);
  const attrName = () => r.pick(ATTRS.concat(['missing']));

  // An expression that is usually of type `want`; sometimes deliberately not.
  const gen = (want, depth) => {
    if (depth <= 0 || r.chance(0.25)) return leaf(want);
    if (r.chance(0.04)) return leaf(r.pick(['long', 'string', 'bool', 'entity']));
    switch (want) {
      case 'bool': return genBool(depth - 1);
      case 'long': return genLong(depth - 1);
      case 'string': return r.chance(0.5) ? `(${gen('entity', depth - 1)}).name` : `(${gen('record', depth - 1)}).label`;
      case 'entity': return r.pick([entityVar(), `(${entityVar()}).owner`, `if (${genBool(depth - 1)}) then ${anyUid()} else ${entityVar()}`]);
      case 'set': return r.pick([`[${gen('long', depth - 1)}, ${gen('long', depth - 1)}]`, `(${gen('entity', depth - 1)}).tags`, `[${anyUid()}, ${entityVar()}]`, `[]`]);
      case 'record': return r.pick([`{depth: ${gen('long', depth - 1)}, label: ${gen('string', depth - 1)}}`, `(${gen('entity', depth - 1)}).info`, 'context']);
      case 'ip': return r.pick([`ip(${cedarString(r.pick(IPS))})`, `(${gen('entity', depth - 1)}).addr`, 'context.ip']);
      case 'decimal': return r.pick([`decimal(${cedarString(r.pick(DECIMALS))})`, `(${gen('entity', depth - 1)}).score`]);
      case 'datetime': return r.pick([`datetime(${cedarString(r.pick(DATETIMES))})`, `(${gen('entity', depth - 1)}).created`, 'context.now',
        `(${gen('datetime', depth - 1)}).offset(${gen('duration', depth - 1)})`, `(${gen('datetime', depth - 1)}).toDate()`]);
      case 'duration': return r.pick([`duration(${cedarString(r.pick(DURATIONS))})`, `(${gen('entity', depth - 1)}).ttl`,
        `(${gen('datetime', depth - 1)}).durationSince(${gen('datetime', depth - 1)})`, `(${gen('datetime', depth - 1)}).toTime()`]);
      default: throw new Error(want);
    }
  };

  const leaf = (want) => {
    switch (want) {
      case 'bool': return r.pick(['true', 'false', 'context.flag', `(${entityVar()}).flag`]);
      case 'long': return r.chance(0.6) ? longText(r.pick(LONGS)) : r.pick(['context.n', `(${entityVar()}).age`, `(${entityVar()}).level`]);
      case 'string': return r.chance(0.7) ? cedarString(r.pick(STRINGS)) : r.pick(['context.s', `(${entityVar()}).name`]);
      case 'entity': return r.chance(0.5) ? anyUid() : entityVar();
      case 'set': return r.pick(['[]', '[1, 2, 3]', `["a", "alice"]`, 'context.set', `(${entityVar()}).tags`]);
      case 'record': return r.pick(['context', '{}', '{depth: 1, label: "a"}', `(${entityVar()}).info`]);
      case 'ip': return `ip(${cedarString(r.pick(IPS))})`;
      case 'decimal': return `decimal(${cedarString(r.pick(DECIMALS))})`;
      case 'datetime': return `datetime(${cedarString(r.pick(DATETIMES))})`;
      case 'duration': return `duration(${cedarString(r.pick(DURATIONS))})`;
      default: throw new Error(want);
    }
  };

  const cmp = (t, d) => `(${gen(t, d)}) ${r.pick(['<', '<=', '>', '>='])} (${gen(t, d)})`;
  const genBool = (d) => {
    switch (r.int(22)) {
      case 0: return `(${gen('bool', d)}) && (${gen('bool', d)})`;
      case 1: return `(${gen('bool', d)}) || (${gen('bool', d)})`;
      case 2: return `!(${gen('bool', d)})`;
      case 3: { const t = r.pick(['long', 'string', 'entity', 'set', 'record', 'ip', 'decimal', 'datetime', 'bool']);
        return `(${gen(t, d)}) ${r.pick(['==', '!='])} (${gen(r.chance(0.8) ? t : 'long', d)})`; }
      case 4: return cmp(r.pick(['long', 'long', 'datetime', 'duration', 'decimal', 'string']), d);
      case 5: return `(${gen('entity', d)}) in (${r.chance(0.6) ? anyUid() : `[${anyUid()}, ${anyUid()}]`})`;
      case 6: return `(${gen(r.pick(['entity', 'record', 'entity']), d)}) has ${r.chance(0.8) ? attrName() : '"x y"'}`;
      case 7: return `(${gen('string', d)}) like ${cedarString(r.pick(['*', 'a*', '*b', 'al*ce', '\\*', '', '*.pypi.example', '*o*']))}`;
      case 8: return `(${gen('entity', d)}) is ${r.pick(TYPES)}${r.chance(0.3) ? ` in ${anyUid()}` : ''}`;
      case 9: return `(${gen('set', d)}).contains(${gen(r.pick(['long', 'string', 'entity']), d)})`;
      case 10: return `(${gen('set', d)}).${r.pick(['containsAll', 'containsAny'])}(${gen('set', d)})`;
      case 11: return `(${gen('set', d)}).isEmpty()`;
      case 12: return `(${gen('entity', d)}).hasTag(${gen('string', d)})`;
      case 13: return `(${gen('entity', d)}).getTag(${cedarString(r.pick(['env', 'team', 'nope']))}) == ${cedarString(r.pick(['prod', 'dev']))}`;
      case 14: return `(${gen('ip', d)}).${r.pick(['isIpv4', 'isIpv6', 'isLoopback', 'isMulticast'])}()`;
      case 15: return `(${gen('ip', d)}).isInRange(${gen('ip', d)})`;
      case 16: return `(${gen('decimal', d)}).${r.pick(['lessThan', 'lessThanOrEqual', 'greaterThan', 'greaterThanOrEqual'])}(${gen('decimal', d)})`;
      case 17: return `if (${gen('bool', d)}) then (${gen('bool', d)}) else (${gen('bool', d)})`;
      case 18: return `(${gen('record', d)}).${r.pick(['depth', 'label', 'inner', 'flag'])} == (${gen('long', d)})`;
      case 19: return `context has ${r.pick(['n', 's', 'flag', 'ip', 'now', 'nope'])}`;
      case 20: return `(${gen('entity', d)})["${r.pick(ATTRS)}"] == (${gen(r.pick(['long', 'string']), d)})`;
      default: return `(${gen('record', d)}) has info.inner.ok`;
    }
  };
  const genLong = (d) => {
    switch (r.int(7)) {
      case 0: return `(${gen('long', d)}) + (${gen('long', d)})`;
      case 1: return `(${gen('long', d)}) - (${gen('long', d)})`;
      case 2: return `(${gen('long', d)}) * (${gen('long', d)})`;
      case 3: return `-(${gen('long', d)})`;
      case 4: return `(${gen('duration', d)}).${r.pick(['toDays', 'toHours', 'toMinutes', 'toSeconds', 'toMilliseconds'])}()`;
      case 5: return `if (${gen('bool', d)}) then (${gen('long', d)}) else (${gen('long', d)})`;
      default: return `(${gen('record', d)}).depth`;
    }
  };
  return { gen, anyUid };
}

function scope(r, v, anyUid) {
  const ofType = (t) => uidText(t, r.pick(ids(t)));
  const pt = v === 'principal' ? r.pick(['User', 'Group']) : r.pick(['Doc', 'Folder']);
  switch (r.int(6)) {
    case 0: return `${v} == ${ofType(pt)}`;
    case 1: return `${v} in ${r.chance(0.8) ? ofType(v === 'principal' ? 'Group' : 'Folder') : anyUid()}`;
    case 2: return `${v} is ${pt}`;
    case 3: return `${v} is ${pt} in ${ofType(v === 'principal' ? 'Group' : 'Folder')}`;
    default: return v;
  }
}

function actionScope(r) {
  const a = () => uidText('Action', r.pick(ACTIONS.concat(ACTION_GROUPS)));
  switch (r.int(4)) {
    case 0: return `action == ${a()}`;
    case 1: return `action in ${a()}`;
    case 2: return `action in [${a()}, ${a()}]`;
    default: return 'action';
  }
}

function makePolicies(r, n, depth) {
  const { gen, anyUid } = makeExprGen(r);
  const out = [];
  for (let i = 0; i < n; i++) {
    const effect = r.chance(0.25) ? 'forbid' : 'permit';
    let text = `${effect} (${scope(r, 'principal', anyUid)}, ${actionScope(r)}, ${scope(r, 'resource', anyUid)})`;
    const nconds = r.int(3);
    for (let c = 0; c < nconds; c++) text += `\n  ${r.chance(0.75) ? 'when' : 'unless'} { ${gen('bool', depth)} }`;
    out.push(text + ';');
  }
  return out.join('\n');
}

// With `typed`, the context usually fits SCHEMA (a homogeneous set, a User
// in `who`); a value of the wrong type still appears now and then.
function makeRequest(r, typed = false) {
  const ent = (types) => { const t = r.pick(types); return { type: t, id: r.chance(0.08) ? 'ghost' : r.pick(ids(t)) }; };
  const context = {};
  if (r.chance(0.8)) context.n = r.pick([0, 5, -2, 100]);
  if (r.chance(0.8)) context.s = r.pick(STRINGS);
  if (r.chance(0.7)) context.flag = r.chance(0.5);
  if (r.chance(0.6)) context.ip = { __extn: { fn: 'ip', arg: r.pick(IPS.slice(0, 10)) } };
  if (r.chance(0.6)) context.now = { __extn: { fn: 'datetime', arg: r.pick(DATETIMES.slice(0, 5)) } };
  if (r.chance(0.5)) context.set = typed && r.chance(0.9) ? [r.pick([1, 2, 7]), r.pick([3, 4])] : [r.pick([1, 2, 'a']), r.pick([3, 'alice'])];
  if (r.chance(0.3)) context.info = { depth: r.int(3), label: 'a', inner: { ok: true } };
  if (r.chance(0.5)) context.who = { __entity: ent(typed && r.chance(0.9) ? ['User'] : ['User', 'Group', 'Doc']) };
  // Now and then a value no engine may accept, so that both must refuse.
  if (r.chance(0.03)) context.bad = r.pick(BAD_VALUES);
  return {
    principal: ent(['User', 'User', 'Group']),
    action: { type: 'Action', id: r.pick(ACTIONS) },
    resource: ent(['Doc', 'Doc', 'Folder', 'User']),
    context,
  };
}

// Extension literals near the edge of each grammar: mostly well formed,
// often with one thing wrong (a leading zero, a prefix too long, a 30th of
// February, units out of order, a value one past the limit).
function makeLiteral(r) {
  const pad = (n, w) => String(n).padStart(w, '0');
  // Usually a valid piece, sometimes a bad one.
  const edge = (good, bad) => (r.chance(0.12) ? r.pick(bad) : r.pick(good));
  const gens = {
    ip() {
      let s;
      if (r.chance(0.5)) {
        s = Array.from({ length: edge([4], [3, 5]) },
          () => edge(['0', '1', '10', '127', '192', '224', '239', '255'], ['256', '01', '1000', ''])).join('.');
      } else {
        const g = Array.from({ length: edge([8], [7, 9]) },
          () => edge(['0', '0', '1', 'ff', 'FF00', 'fe80', '2001', 'db8', '7f00'], ['12345', 'g', '']));
        s = g.join(':');
        if (r.chance(0.6)) { // compress a run of groups into ::
          const a = r.int(g.length), b = a + 1 + r.int(g.length - a);
          s = `${g.slice(0, a).join(':')}::${g.slice(b).join(':')}`;
        }
        if (r.chance(0.03)) s = `::ffff:${r.int(256)}.${r.int(256)}.0.1`;
      }
      if (r.chance(0.5)) s += `/${edge(['0', '4', '8', '16', '24', '32', '64', '127', '128'], ['33', '129', '01', '', '1280'])}`;
      return s;
    },
    decimal() {
      const int = edge(['0', '1', '-1', '-0', '42', '00007', '922337203685477', '-922337203685477'], ['922337203685478', '', '+1']);
      const frac = edge(['0', '5', '05', '1234', '5807', '5808'], ['5809', '12345', '']);
      return r.chance(0.97) ? `${int}.${frac}` : `${int}${frac}`;
    },
    datetime() {
      let s = `${pad(edge([0, 1, 1969, 1970, 2000, 2024, 2100, 9999], [10000]), 4)}-` +
        `${pad(edge([1, 2, 4, 12], [0, 13]), 2)}-${pad(edge([1, 15, 28, 29, 30, 31], [0, 32]), 2)}`;
      if (r.chance(0.7)) {
        s += `T${pad(edge([0, 12, 23], [24]), 2)}:${pad(edge([0, 59], [60]), 2)}:${pad(edge([0, 59], [60]), 2)}`;
        if (r.chance(0.5)) s += `.${pad(r.int(1000), edge([3], [2, 4]))}`;
        s += edge(['Z', `+${pad(edge([0, 1, 23], [24]), 2)}${pad(edge([0, 30, 59], [60]), 2)}`, `-${pad(r.pick([0, 11, 23]), 2)}${pad(r.pick([0, 59]), 2)}`],
          ['', '+01:00', 'ZZ']);
      }
      return s;
    },
    duration() {
      const units = ['d', 'h', 'm', 's', 'ms'];
      let s = r.chance(0.3) ? '-' : '';
      for (let k = r.int(3); k < units.length; k += 1 + r.int(2)) {
        if (r.chance(0.04)) k = r.int(units.length); // out of order, sometimes
        s += edge(['0', '1', '12', '90', '00001', '1000'], ['106751991167', '106751991168', '9223372036854775807', '9223372036854775808', '']) + units[k];
      }
      return s;
    },
  };
  const uses = {
    ip: ['isIpv4()', 'isIpv6()', 'isLoopback()', 'isMulticast()', 'isInRange(ip("10.0.0.0/8"))', 'isInRange(ip("2001:db8::/32"))', '== ip("127.0.0.1")'],
    decimal: ['lessThan(decimal("0.0"))', 'greaterThan(decimal("1.5"))', 'lessThanOrEqual(decimal("-922337203685477.5808"))', '== decimal("-0.0")'],
    datetime: ['toTime() == duration("0ms")', 'toDate() < datetime("2024-01-01")', 'offset(duration("1d")) > datetime("2000-01-01")',
      'durationSince(datetime("1970-01-01")).toDays() > 10000', 'offset(duration("-9223372036854775807ms")) < datetime("1970-01-01")'],
    duration: ['toDays() > 1', 'toMilliseconds() < 0', 'toSeconds() == 0', 'toHours() > 100', '== duration("1d")'],
  };
  const t = r.pick(Object.keys(gens));
  return `${t}(${cedarString(gens[t]())}).${r.pick(uses[t])}`.replace(/\.== /, ' == ');
}

function makeLiteralPolicies(r, n) {
  return Array.from({ length: n }, () => `permit (principal, action, resource) when { ${makeLiteral(r)} };`).join('\n');
}

// The schema of a typed world. Every attribute is optional, as the world
// leaves some out; the action hierarchy is fixed here.
const ATTR_TYPES = 'age?: Long, name?: String, level?: Long, tags?: Set<String>, flag?: Bool, owner?: User, ' +
  'addr?: ipaddr, score?: decimal, created?: datetime, ttl?: duration, info?: Info';
const APPLIES = 'principal: [User, Group], resource: [Doc, Folder, User], context: Ctx';
const SCHEMA = `
type Info = { depth: Long, label: String, inner: { ok: Bool } };
entity Group in [Group] { ${ATTR_TYPES} } tags String;
entity User in [Group] { ${ATTR_TYPES} } tags String;
entity Folder in [Folder] { ${ATTR_TYPES} } tags String;
entity Doc in [Folder] { ${ATTR_TYPES} } tags String;
type Ctx = {
  n?: Long, s?: String, flag?: Bool, ip?: ipaddr, now?: datetime, set?: Set<Long>,
  info?: Info, who?: User,
};
action all, edit;
action read in [all] appliesTo { ${APPLIES} };
action write, delete in [all, edit] appliesTo { ${APPLIES} };
action share in [edit] appliesTo { ${APPLIES} };
`;

module.exports = { rng, makeWorld, makePolicies, makeLiteralPolicies, makeRequest, SCHEMA };
