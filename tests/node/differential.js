// SPDX-License-Identifier: Apache-2.0
// Differential test: random policies, entities and requests decided by both
// Shinken (`shinken cedar authorize --requests`, batch mode) and the official
// engine (@cedar-policy/cedar-wasm), compared on decision, reasons and the
// set of policies that errored. Every other world has a schema: entities and
// contexts are then read as it types them and each request is validated.
//
//   node differential.js --shinken PATH [--seed N] [--worlds N] [--requests N] [--policies N]
//                        [--literals N]
//
// --literals N adds N sets of 100 policies, each testing one extension
// literal (ip, decimal, datetime, duration) near the edge of its grammar;
// each policy is one case, compared on whether it holds, fails or errors.
//
// Prints each disagreement with what is needed to reproduce it, then one
// summary line; exits 1 on any disagreement.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const { spawnSync } = require('child_process');
const cedar = require('@cedar-policy/cedar-wasm/nodejs');
const { rng, makeWorld, makePolicies, makeLiteralPolicies, makeRequest, SCHEMA } = require('./cedar-random');

function args() {
  const a = { seed: 20261130, worlds: 100, requests: 40, policies: 8, literals: 20, shinken: null };
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i += 2) {
    const k = argv[i].replace(/^--/, '');
    if (!(k in a) || i + 1 >= argv.length) {
      console.error(`differential: unknown or incomplete option '${argv[i]}'`);
      process.exit(2);
    }
    a[k] = k === 'shinken' ? argv[i + 1] : Number(argv[i + 1]);
  }
  if (!a.shinken) {
    console.error('differential: --shinken PATH is required');
    process.exit(2);
  }
  return a;
}

const sameSet = (a, b) => {
  const x = new Set(a), y = new Set(b);
  return x.size === y.size && [...x].every((v) => y.has(v));
};

function officialAnswers(id, policies, entities, requests, schema) {
  const parsed = cedar.preparsePolicySet(id, { staticPolicies: policies });
  if (parsed.type !== 'success') return { parseError: parsed.errors.map((e) => e.message).join('; ') };
  const typed = schema ? { preparsedSchemaName: id, validateRequest: true } : {};
  if (schema) {
    const ps = cedar.preparseSchema(id, schema);
    if (ps.type !== 'success') throw new Error(`the test's schema does not parse: ${JSON.stringify(ps.errors)}`);
  }
  return {
    answers: requests.map((q) => {
      const a = cedar.statefulIsAuthorized({ ...q, preparsedPolicySetId: id, entities, ...typed });
      if (a.type !== 'success') return { error: a.errors.map((e) => e.message).join('; ') };
      return {
        decision: a.response.decision,
        reasons: a.response.diagnostics.reason,
        errors: a.response.diagnostics.errors.map((e) => e.policyId),
        messages: a.response.diagnostics.errors.map((e) => `${e.policyId}: ${e.error.message}`),
      };
    }),
  };
}

function shinkenAnswers(bin, dir, policies, entities, requests, schema) {
  const pf = path.join(dir, 'policies.cedar');
  const ef = path.join(dir, 'entities.json');
  const sf = path.join(dir, 'schema.cedarschema');
  fs.writeFileSync(pf, policies);
  fs.writeFileSync(ef, JSON.stringify(entities));
  if (schema) fs.writeFileSync(sf, schema);
  const input = requests.map((q) => JSON.stringify(q)).join('\n') + '\n';
  const args = ['cedar', 'authorize', '--policies', pf, '--entities', ef, '--requests', '-'];
  if (schema) args.push('--schema', sf);
  const p = spawnSync(bin, args,
    { input, encoding: 'utf8', maxBuffer: 1 << 28 });
  // EPIPE only means Shinken stopped reading: it refused the policies or
  // entities before the first request, which its exit status tells.
  if (p.error && p.error.code !== 'EPIPE') return { broken: `cannot run ${bin}: ${p.error.message}` };
  const lines = p.stdout.split('\n').filter((l) => l.length);
  if (lines.length === 0 && p.status !== 0) return { parseError: p.stderr.trim() || `exit ${p.status}` };
  if (lines.length !== requests.length)
    return { broken: `expected ${requests.length} answers, got ${lines.length} (exit ${p.status}): ${p.stderr.trim()}` };
  return {
    answers: lines.map((l) => {
      const a = JSON.parse(l);
      if (a.error !== undefined) return { error: a.error };
      return { decision: a.decision, reasons: a.reasons, errors: a.errors.map((e) => e.policy),
        messages: a.errors.map((e) => `${e.policy}: ${e.message}`) };
    }),
  };
}

function agree(o, s) {
  if (o.error !== undefined || s.error !== undefined) return o.error !== undefined && s.error !== undefined;
  return o.decision === s.decision && sameSet(o.reasons, s.reasons) && sameSet(o.errors, s.errors);
}

function main() {
  const a = args();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'shk-diff-'));
  const stats = { cases: 0, agree: 0, differ: 0, allow: 0, deny: 0, withErrors: 0, refused: 0, unparsed: 0, literals: 0 };
  let shown = 0;
  const show = (msg) => { if (shown++ < 10) console.log(msg); };
  try {
    for (let w = 0; w < a.worlds; w++) {
      const r = rng(a.seed + w);
      const typed = w % 2 === 1;
      const schema = typed ? SCHEMA : null;
      const entities = makeWorld(r, typed);
      const policies = makePolicies(r, a.policies, 3);
      const requests = Array.from({ length: a.requests }, () => makeRequest(r, typed));
      const off = officialAnswers('world', policies, entities, requests, schema);
      const shk = shinkenAnswers(a.shinken, dir, policies, entities, requests, schema);
      if (shk.broken) {
        stats.cases += requests.length;
        stats.differ += requests.length;
        show(`DIFFER world ${w}: shinken gave no usable answers: ${shk.broken}`);
        continue;
      }
      // Policies or entities that do not load: Shinken refuses the whole
      // batch; the official engine refuses the policies once, or (entities
      // being given with each request) every request.
      const offRefused = off.parseError || off.answers.every((x) => x.error !== undefined);
      if (shk.parseError || off.parseError) {
        stats.cases += 1;
        stats.unparsed += 1;
        if (shk.parseError && offRefused) stats.agree++;
        else {
          stats.differ++;
          show(`DIFFER world ${w}: the inputs load in ${shk.parseError ? 'the official engine' : 'Shinken'} only: ` +
            `${off.parseError || shk.parseError}\n${policies}\n${JSON.stringify(entities)}`);
        }
        continue;
      }
      requests.forEach((q, i) => {
        const o = off.answers[i], s = shk.answers[i];
        stats.cases++;
        if (o.error !== undefined) stats.refused++;
        else {
          stats[o.decision]++;
          if (o.errors.length) stats.withErrors++;
        }
        if (agree(o, s)) {
          stats.agree++;
          return;
        }
        stats.differ++;
        show(`DIFFER world ${w}${typed ? ' (with the schema)' : ''} request ${i}: ${JSON.stringify(q)}\n` +
          `  official: ${JSON.stringify(o)}\n  shinken:  ${JSON.stringify(s)}\n` +
          `  policies (policyN is the Nth):\n${policies.replace(/^/gm, '    ')}`);
      });
    }
    // Extension literals: one request, and each policy's outcome compared.
    const q = { principal: { type: 'U', id: 'u' }, action: { type: 'Action', id: 'a' },
      resource: { type: 'U', id: 'u' }, context: {} };
    for (let w = 0; w < a.literals; w++) {
      const policies = makeLiteralPolicies(rng(a.seed + 1000000 + w), 100);
      const off = officialAnswers('literals', policies, [], [q]);
      const shk = shinkenAnswers(a.shinken, dir, policies, [], [q]);
      const outcome = (ans, id) => (ans.reasons.includes(id) ? 'holds' : ans.errors.includes(id) ? 'errors' : 'fails');
      policies.split('\n').forEach((text, i) => {
        stats.cases++;
        stats.literals++;
        const o = off.answers && off.answers[0], s = shk.answers && shk.answers[0];
        const id = `policy${i}`;
        if (o && s && o.error === undefined && s.error === undefined && outcome(o, id) === outcome(s, id)) {
          stats.agree++;
          return;
        }
        stats.differ++;
        show(`DIFFER literal: ${text}\n  official: ${o ? (o.error || outcome(o, id)) : off.parseError}\n` +
          `  shinken:  ${s ? (s.error || outcome(s, id)) : shk.parseError || shk.broken}`);
      });
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  if (shown > 10) console.log(`(${shown - 10} more disagreements not shown)`);
  console.log(`differential: ${stats.cases} cases (${stats.allow} allow, ${stats.deny} deny, ` +
    `${stats.withErrors} with policy errors, ${stats.refused} refused requests, ${stats.unparsed} worlds whose policies or entities do not load, ` +
    `${stats.literals} extension literals), ` +
    `${stats.agree} agree, ${stats.differ} differ`);
  process.exit(stats.differ ? 1 : 0);
}

main();
