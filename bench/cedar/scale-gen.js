// SPDX-License-Identifier: Apache-2.0
// Workloads for the Cedar scale benchmark, and the official engine's side.
//
//   node scale-gen.js make OUT        writes OUT/p10, OUT/p100, OUT/p1000,
//       OUT/p10000 (policy sets where ten policies apply to each request),
//       OUT/p10000-one (the largest set, every request from one session)
//       and OUT/deep (100,000 entities in a deep hierarchy)
//   node scale-gen.js wasm DIR SLICE  decides DIR/requests.jsonl with
//       cedar-wasm's preparsed path and prints {"decisions","seconds",
//       "allow","reasons"}: CPU seconds spent deciding; with SLICE=slice
//       each call gets only the request's entities and their ancestors,
//       with SLICE=full the whole store
//   node scale-gen.js wasm-load DIR   one call over the whole store of DIR;
//       prints {"seconds"} (CPU), for the load-time comparison
//
// Each directory holds policies.cedar (static policies, then the
// templates), links.tsv (template id, new id, principal, resource),
// policies.json (the same set in cedar-wasm's PolicySet form),
// entities.json and requests.jsonl. Everything comes from fixed seeds.
'use strict';
const fs = require('fs');
const path = require('path');
const srcdir = path.resolve(__dirname, '../..');

// A small deterministic generator (xorshift32): same files on every run.
function rng(seed) {
  let s = seed >>> 0 || 1;
  return (n) => {
    s ^= s << 13; s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5; s >>>= 0;
    return s % n;
  };
}

// The store of the policy-scaling workloads is the same at every size, so
// that only the number of policies changes: TENANTS sessions, each with a
// user in a team, and a folder of DOCS documents.
const TENANTS = 1000;
const DOCS = 4;
const REQUESTS = 2000;

const uid = (type, id) => ({ type, id });
const ref = (u) => `${u.type}::"${u.id}"`;

function tenantEntities(t) {
  const es = [
    { uid: uid('User', `u${t}`), attrs: { level: 5, dept: `dept${t % 7}` }, parents: [uid('Team', `t${t}`)] },
    { uid: uid('Team', `t${t}`), attrs: {}, parents: [] },
    { uid: uid('Folder', `f${t}`), attrs: {}, parents: [] },
  ];
  for (let k = 0; k < DOCS; k++)
    es.push({
      uid: uid('Doc', `d${t}_${k}`),
      attrs: { owner: { __entity: uid('User', `u${t}`) }, level: k, tags: ['shared', `k${k}`] },
      parents: [uid('Folder', `f${t}`)],
    });
  return es;
}

// The ten policies of tenant t: scopes of every indexable kind (==, in,
// is ... in, action lists, no constraint on one side) and two template
// links. Nine permits hold for the tenant's requests and the forbid does
// not, so every decision is an allow with nine reasons: proof that the ten
// were evaluated, not skipped.
function tenantPolicies(t) {
  const u = `User::"u${t}"`, team = `Team::"t${t}"`, f = `Folder::"f${t}"`;
  return [
    `permit(principal == ${u}, action == Action::"read", resource in ${f}) when { resource.owner == principal };`,
    `permit(principal == ${u}, action in [Action::"read", Action::"write"], resource) when { principal.level >= resource.level };`,
    `permit(principal in ${team}, action, resource) when { resource.tags.contains("shared") };`,
    `permit(principal in ${team}, action == Action::"read", resource is Doc in ${f}) when { context.hour < 18 };`,
    `permit(principal is User in ${team}, action, resource) when { principal.dept like "dept*" };`,
    `permit(principal, action == Action::"read", resource in ${f}) when { context.session == "s${t}" };`,
    `permit(principal, action, resource is Doc in ${f}) unless { resource.tags.contains("secret") };`,
    `forbid(principal == ${u}, action, resource) when { context.blocked || resource.level > 100 };`,
  ];
}
const TEMPLATES = [
  'permit(principal == ?principal, action == Action::"read", resource in ?resource) when { context.session like "s*" };',
  'permit(principal in ?principal, action, resource) when { context.hour >= 0 };',
];
const tenantLinks = (t) => [
  { tmpl: 0, newId: `link${t}a`, principal: uid('User', `u${t}`), resource: uid('Folder', `f${t}`) },
  { tmpl: 1, newId: `link${t}b`, principal: uid('Team', `t${t}`) },
];

function request(t, k) {
  return {
    principal: uid('User', `u${t}`), action: uid('Action', 'read'), resource: uid('Doc', `d${t}_${k}`),
    context: { hour: 9 + k, session: `s${t}`, blocked: false },
  };
}

function write(out, statics, links, entities, requests) {
  fs.mkdirSync(out, { recursive: true });
  // In the text, the templates follow the static policies, so the
  // reference's numbering (policy0, policy1, ...) names them the same in
  // both engines.
  const tids = TEMPLATES.map((_, i) => `policy${statics.length + i}`);
  fs.writeFileSync(path.join(out, 'policies.cedar'), statics.concat(TEMPLATES).join('\n') + '\n');
  fs.writeFileSync(path.join(out, 'links.tsv'), links.map((l) =>
    [tids[l.tmpl], l.newId, ref(l.principal), l.resource ? ref(l.resource) : '-'].join('\t') + '\n').join(''));
  fs.writeFileSync(path.join(out, 'policies.json'), JSON.stringify({
    staticPolicies: Object.fromEntries(statics.map((p, i) => [`policy${i}`, p])),
    templates: Object.fromEntries(TEMPLATES.map((p, i) => [tids[i], p])),
    templateLinks: links.map((l) => ({
      templateId: tids[l.tmpl], newId: l.newId,
      values: l.resource ? { '?principal': l.principal, '?resource': l.resource } : { '?principal': l.principal },
    })),
  }));
  fs.writeFileSync(path.join(out, 'entities.json'), JSON.stringify(entities));
  fs.writeFileSync(path.join(out, 'requests.jsonl'), requests.map((q) => JSON.stringify(q) + '\n').join(''));
}

// N policies in N / 10 tenants; each request goes to one of them, or with
// `one` all to the first (the same set, with the data of one session hot in
// the caches: the index's own cost, without the memory traffic of many
// sessions).
function scaled(out, n, one) {
  const tenants = n / 10;
  const statics = [], links = [], entities = [];
  for (let t = 0; t < tenants; t++) {
    statics.push(...tenantPolicies(t));
    links.push(...tenantLinks(t));
  }
  for (let t = 0; t < TENANTS; t++) entities.push(...tenantEntities(t));
  const r = rng(n);
  const requests = Array.from({ length: REQUESTS }, () => request(one ? 0 : r(tenants), r(DOCS)));
  write(out, statics, links, entities, requests);
}

// 100,000 entities: 10,000 folders in chains 50 deep under one root (a
// document sits up to 51 levels down), 80,000 documents in them, and
// 10,000 users in 1,000 groups nested 10 deep.
function deep(out) {
  const CHAIN = 50, FOLDERS = 10000 - 1, DOCS_N = 80000, USERS = 9000, GROUPS = 1000, NEST = 10;
  const r = rng(100000);
  const entities = [{ uid: uid('Folder', 'root'), attrs: {}, parents: [] }];
  for (let i = 0; i < FOLDERS; i++)
    entities.push({
      uid: uid('Folder', `f${i}`), attrs: {},
      parents: [i % CHAIN === 0 ? uid('Folder', 'root') : uid('Folder', `f${i - 1}`)],
    });
  for (let g = 0; g < GROUPS; g++)
    entities.push({ uid: uid('Group', `g${g}`), attrs: {}, parents: g % NEST === 0 ? [] : [uid('Group', `g${g - 1}`)] });
  for (let u = 0; u < USERS; u++)
    entities.push({ uid: uid('User', `u${u}`), attrs: { level: u % 10 }, parents: [uid('Group', `g${r(GROUPS)}`)] });
  for (let d = 0; d < DOCS_N; d++)
    entities.push({
      uid: uid('Doc', `d${d}`),
      attrs: { owner: { __entity: uid('User', `u${r(USERS)}`) }, level: d % 10 },
      parents: [uid('Folder', `f${r(FOLDERS)}`)],
    });
  // Policies that walk the hierarchy: membership in the root folder and in
  // the top group of each nest.
  const statics = [
    'permit(principal, action == Action::"read", resource in Folder::"root") when { principal.level >= resource.level };',
    'permit(principal in Group::"g0", action, resource) when { resource.owner == principal };',
    'forbid(principal, action, resource in Folder::"f0") unless { principal in Group::"g0" };',
  ];
  const requests = Array.from({ length: 200 }, () => ({
    principal: uid('User', `u${r(USERS)}`), action: uid('Action', 'read'), resource: uid('Doc', `d${r(DOCS_N)}`),
    context: {},
  }));
  write(out, statics, [], entities, requests);
}

function load(dir) {
  const cedar = require(path.join(srcdir, 'tests/node/node_modules/@cedar-policy/cedar-wasm/nodejs'));
  const a = cedar.preparsePolicySet('scale', JSON.parse(fs.readFileSync(path.join(dir, 'policies.json'), 'utf8')));
  if (a.type !== 'success') throw new Error(`policies: ${JSON.stringify(a.errors)}`);
  const entities = JSON.parse(fs.readFileSync(path.join(dir, 'entities.json'), 'utf8'));
  return { cedar, entities };
}

const cpu = (t0) => { const u = process.cpuUsage(t0); return (u.user + u.system) / 1e6; };

function decide(cedar, q, entities) {
  const a = cedar.statefulIsAuthorized({ ...q, entities, preparsedPolicySetId: 'scale' });
  if (a.type !== 'success') throw new Error(`request: ${JSON.stringify(a.errors)}`);
  return a.response;
}

// Decides requests until they run out or a CPU budget is spent (the large
// sets are slow there), and says how many it decided.
function wasm(dir, mode) {
  const { cedar, entities } = load(dir);
  const byUid = new Map(entities.map((e) => [ref(e.uid), e]));
  const slice = (roots) => {
    const seen = new Map();
    const walk = (u) => {
      const e = byUid.get(ref(u));
      if (!e || seen.has(ref(u))) return;
      seen.set(ref(u), e);
      e.parents.forEach(walk);
    };
    roots.forEach(walk);
    return [...seen.values()];
  };
  const requests = fs.readFileSync(path.join(dir, 'requests.jsonl'), 'utf8').split('\n').filter((l) => l)
    .map((l) => JSON.parse(l));
  const slices = requests.map((q) => (mode === 'slice' ? slice([q.principal, q.resource]) : entities));
  let allow = 0, reasons = 0, n = 0;
  const t0 = process.cpuUsage();
  for (; n < requests.length && (n < 20 || cpu(t0) < 3); n++) {
    const resp = decide(cedar, requests[n], slices[n]);
    if (resp.decision === 'allow') allow++;
    reasons += resp.diagnostics.reason.length;
  }
  console.log(JSON.stringify({ decisions: n, seconds: cpu(t0), allow, reasons }));
}

// Its API has no store that outlives a call, so loading is one call with
// the whole store: reading the JSON text, converting it, building the
// hierarchy, and the (small) decision, as Shinken's load reads the text.
function wasmLoad(dir) {
  const cedar = require(path.join(srcdir, 'tests/node/node_modules/@cedar-policy/cedar-wasm/nodejs'));
  const a = cedar.preparsePolicySet('scale', JSON.parse(fs.readFileSync(path.join(dir, 'policies.json'), 'utf8')));
  if (a.type !== 'success') throw new Error(`policies: ${JSON.stringify(a.errors)}`);
  const q = JSON.parse(fs.readFileSync(path.join(dir, 'requests.jsonl'), 'utf8').split('\n')[0]);
  const t0 = process.cpuUsage();
  const entities = JSON.parse(fs.readFileSync(path.join(dir, 'entities.json'), 'utf8'));
  decide(cedar, q, entities);
  console.log(JSON.stringify({ seconds: cpu(t0) }));
}

const [cmd, a1, a2] = process.argv.slice(2);
if (cmd === 'make') {
  for (const n of [10, 100, 1000, 10000]) scaled(path.join(a1, `p${n}`), n, false);
  scaled(path.join(a1, 'p10000-one'), 10000, true);
  deep(path.join(a1, 'deep'));
} else if (cmd === 'wasm' && (a2 === 'slice' || a2 === 'full')) {
  wasm(a1, a2);
} else if (cmd === 'wasm-load') {
  wasmLoad(a1);
} else {
  console.error('usage: node scale-gen.js make OUT | wasm DIR slice|full | wasm-load DIR');
  process.exit(2);
}
