// SPDX-License-Identifier: Apache-2.0
// The official engine (@cedar-policy/cedar-wasm) decides every
// counterexample the analysis produced: one JSON object a line, with the
// schema, the policy sets by name, the request, the entities and what each
// set must decide ("allow", "deny", or "errors" for a policy that errors).
//
//   node wasm-check.js FILE
//
// Prints each disagreement; exits 1 on any, or when the file is empty. Run
// it with --harmony-json-parse-with-source: a Long beyond 2^53 must reach the
// engine as written, not rounded to a double, so such numbers are read with
// their source text and passed on as raw JSON.
'use strict';
const fs = require('fs');
const path = require('path');
const cedar = require(path.join(process.env.SHINKEN_SRCDIR || '.', 'tests/node/node_modules/@cedar-policy/cedar-wasm/nodejs'));

const lines = fs.readFileSync(process.argv[2], 'utf8').split('\n').filter((l) => l.trim());
let bad = 0, checked = 0;
for (const [n, line] of lines.entries()) {
  const t = JSON.parse(line, (k, v, ctx) =>
    typeof v === 'number' && !Number.isSafeInteger(v) ? JSON.rawJSON(ctx.source) : v);
  for (const [name, text] of Object.entries(t.policies)) {
    const a = cedar.isAuthorized({
      principal: t.request.principal, action: t.request.action, resource: t.request.resource,
      context: t.request.context, policies: { staticPolicies: text }, entities: t.entities,
      schema: t.schema, validateRequest: true,
    });
    checked++;
    let got;
    if (a.type !== 'success') got = `failure: ${a.errors.map((e) => e.message).join('; ')}`;
    else if (t.expect[name] === 'errors') got = a.response.diagnostics.errors.length ? 'errors' : 'no errors';
    else got = a.response.decision;
    if (got !== t.expect[name]) {
      bad++;
      console.log(`DISAGREE line ${n + 1} (${t.what}), set ${name}: the analysis says ${t.expect[name]}, ` +
                  `cedar-wasm says ${got}\n  policies: ${text}\n  request: ${JSON.stringify(t.request)}\n` +
                  `  entities: ${JSON.stringify(t.entities)}`);
    }
  }
}
console.log(`cedar-wasm: ${lines.length} counterexamples, ${checked} decisions, ${bad} disagreements`);
process.exit(bad || lines.length === 0 ? 1 : 0);
