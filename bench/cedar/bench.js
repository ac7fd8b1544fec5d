// SPDX-License-Identifier: Apache-2.0
// Workloads for the Cedar benchmark, and the official engine's side of it.
//
//   node bench.js make OUT CONFORMANCE_DIR   writes OUT/{sandbox_a,sandbox_b,gen1000}/
//       policies.cedar, entities.json, [schema.cedarschema], requests.jsonl
//   node bench.js wasm DIR                   decides DIR/requests.jsonl with
//       cedar-wasm's preparsed path (preparsePolicySet, preparseSchema,
//       statefulIsAuthorized) and prints {"decisions","seconds","allow"},
//       seconds of CPU time (user and system) spent deciding
'use strict';
const fs = require('fs');
const path = require('path');
const srcdir = path.resolve(__dirname, '../..');
const random = require(path.join(srcdir, 'tests/node/cedar-random'));

// Requests per workload: enough for a stable rate, few enough that the
// official engine finishes in seconds.
const SIZES = { sandbox_a: 20000, sandbox_b: 20000, gen1000: 2000 };

function repeat(base, n) {
  return Array.from({ length: n }, (_, i) => JSON.stringify(base[i % base.length])).join('\n') + '\n';
}

// A sample-data sandbox: the hand-written tests that use its entities and
// main schema, their policies as one set, their requests over and over.
function sandbox(conf, name, out) {
  const tests = [];
  for (const d of fs.readdirSync(path.join(conf, 'tests')))
    for (const f of fs.readdirSync(path.join(conf, 'tests', d)))
      if (f.endsWith('.json')) tests.push(JSON.parse(fs.readFileSync(path.join(conf, 'tests', d, f), 'utf8')));
  const mine = tests.filter((t) => t.schema === `sample-data/${name}/schema.cedarschema`);
  const policies = [...new Set(mine.map((t) => t.policies))].map((p) => fs.readFileSync(path.join(conf, p), 'utf8'));
  const requests = mine.flatMap((t) => t.requests.map((q) =>
    ({ principal: q.principal, action: q.action, resource: q.resource, context: q.context })));
  fs.mkdirSync(out, { recursive: true });
  fs.writeFileSync(path.join(out, 'policies.cedar'), policies.join('\n'));
  fs.copyFileSync(path.join(conf, `sample-data/${name}/entities.json`), path.join(out, 'entities.json'));
  fs.copyFileSync(path.join(conf, `sample-data/${name}/schema.cedarschema`), path.join(out, 'schema.cedarschema'));
  fs.writeFileSync(path.join(out, 'requests.jsonl'), repeat(requests, SIZES[name]));
}

// 1,000 random policies over a random world (no schema), from a fixed seed.
function generated(out) {
  const r = random.rng(1000);
  // The generator's deliberately invalid values are for the differential
  // test; a benchmark wants every request decided.
  const entities = random.makeWorld(r);
  for (const e of entities) delete e.attrs.bad;
  const policies = random.makePolicies(r, 1000, 2);
  const requests = Array.from({ length: 200 }, () => random.makeRequest(r));
  for (const q of requests) delete q.context.bad;
  fs.mkdirSync(out, { recursive: true });
  fs.writeFileSync(path.join(out, 'policies.cedar'), policies);
  fs.writeFileSync(path.join(out, 'entities.json'), JSON.stringify(entities));
  fs.writeFileSync(path.join(out, 'requests.jsonl'), repeat(requests, SIZES.gen1000));
}

function wasm(dir) {
  const cedar = require(path.join(srcdir, 'tests/node/node_modules/@cedar-policy/cedar-wasm/nodejs'));
  const read = (f) => fs.readFileSync(path.join(dir, f), 'utf8');
  const check = (what, a) => {
    if (a.type !== 'success') throw new Error(`${what}: ${JSON.stringify(a.errors)}`);
  };
  check('policies', cedar.preparsePolicySet('bench', { staticPolicies: read('policies.cedar') }));
  const hasSchema = fs.existsSync(path.join(dir, 'schema.cedarschema'));
  if (hasSchema) check('schema', cedar.preparseSchema('bench', read('schema.cedarschema')));
  const entities = JSON.parse(read('entities.json'));
  const requests = read('requests.jsonl').split('\n').filter((l) => l).map((l) => JSON.parse(l));
  let allow = 0;
  const t0 = process.cpuUsage();
  for (const q of requests) {
    const a = cedar.statefulIsAuthorized({
      ...q, entities, preparsedPolicySetId: 'bench',
      ...(hasSchema ? { preparsedSchemaName: 'bench', validateRequest: true } : {}),
    });
    if (a.type === 'success' && a.response.decision === 'allow') allow++;
  }
  const used = process.cpuUsage(t0);
  const seconds = (used.user + used.system) / 1e6;
  console.log(JSON.stringify({ decisions: requests.length, seconds, allow }));
}

const [cmd, a1, a2] = process.argv.slice(2);
if (cmd === 'make') {
  sandbox(a2, 'sandbox_a', path.join(a1, 'sandbox_a'));
  sandbox(a2, 'sandbox_b', path.join(a1, 'sandbox_b'));
  generated(path.join(a1, 'gen1000'));
} else if (cmd === 'wasm') {
  wasm(a1);
} else {
  console.error('usage: node bench.js make OUT CONFORMANCE_DIR | wasm DIR');
  process.exit(2);
}
