// SPDX-License-Identifier: Apache-2.0
// The Permission Panel in a real browser: Debian's chromium, headless,
// driven by playwright-core. A real `shinken daemon` serves the panel; the
// workload's side is a client on a session's proxy socket and a loopback
// upstream that counts what reaches it, so every effect is judged outside
// the browser: the held connection completes only after the click, a
// revoked grant's open tunnel closes and its next use is refused, a card
// answered from the CLI leaves the page, and the timeline records each
// answer as the panel's.
//
// Usage: node panel-browser.js --shinken PATH --src DIR [--screenshots DIR]
'use strict';

const fs = require('fs');
const os = require('os');
const path = require('path');
const { chromium } = require('playwright-core');

const args = {};
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];
const SHINKEN = args.shinken;
const SRC = args.src;

let passed = 0;
const failed = [];
function chk(cond, what) {
  if (cond) passed++;
  else { failed.push(what); console.error('FAIL:', what); }
  return cond;
}

const { sleep, upstream, control, proxyConnect, echoes, startDaemon: daemon, cli: run } = require('./panellib.js');
const startDaemon = (dir, conf) => daemon(SHINKEN, dir, conf);
const cli = (env, ...argv) => run(SHINKEN, env, ...argv);

async function main() {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'shk-panel-browser-'));
  const up = await upstream();
  // auto.test is at Auto (granted with no human), every other .test name
  // at Ask: the unlock form's grant is decided at once, a held connection
  // to api.test raises a card.
  const manifest = path.join(tmp, 'manifest.json');
  fs.writeFileSync(manifest, JSON.stringify({ image: 'panel-test', capabilities: [
    { class: 'net.egress', tier: 'Auto', scope: { domains: ['auto.test'] } },
    { class: 'net.egress', tier: 'Ask', scope: { domains: ['**.test'] } },
  ] }));
  const proxyConf = path.join(tmp, 'proxy.json');
  fs.writeFileSync(proxyConf, JSON.stringify({ allow_private_cidrs: ['127.0.0.1/32'],
    hosts: { 'api.test': ['127.0.0.1'], 'auto.test': ['127.0.0.1'], 'other.test': ['127.0.0.1'],
             'key.test': ['127.0.0.1'], 'a.svc.test': ['127.0.0.1'], 'b.svc.test': ['127.0.0.1'] } }));
  const ddir = path.join(tmp, 'd');
  const conf = { socket: path.join(ddir, 'run', 'manager.sock'), audit_db: path.join(ddir, 'audit.db'),
                 policy_dir: path.join(SRC, 'policies'), manifest, panel: { listen: '127.0.0.1:0' },
                 audit_checkpoint_ms: 300 };
  const d = await startDaemon(ddir, conf);
  const ctl = control(conf.socket);
  const browser = await chromium.launch({ executablePath: process.env.SHINKEN_CHROMIUM || '/usr/bin/chromium',
    headless: true, args: process.getuid() === 0 ? ['--no-sandbox'] : [] });
  const timings = {};
  try {
    // A page opened without a token is not logged in, and says how to.
    const anon = await browser.newContext();
    const ap = await anon.newPage();
    await ap.goto(d.url.replace(/#.*/, ''));
    await ap.waitForSelector('#login:not([hidden])', { timeout: 10000 });
    chk((await ap.textContent('#login')).includes('shinken panel'), 'without a token the page says how to log in');
    chk(await ap.isHidden('#requests'), 'and shows nothing of the manager');
    await anon.close();

    // Log in with the token URL.
    const ctx = await browser.newContext();
    const page = await ctx.newPage();
    const consoleErrors = [];
    page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()); });
    page.on('pageerror', (e) => consoleErrors.push(String(e)));
    // Every fetch of the timeline the page makes: once per connection of
    // its event stream, after which the events come on the stream itself.
    let timelineFetches = 0;
    page.on('request', (rq) => { if (new URL(rq.url()).pathname === '/api/timeline') timelineFetches++; });
    await page.goto(d.url);
    await page.waitForSelector('#status.live', { timeout: 10000 });
    chk(!page.url().includes('#'), `the token leaves the address bar (${page.url()})`);
    const cookies = await ctx.cookies();
    const ck = cookies.find((c) => c.name === 'shk_panel');
    chk(ck && ck.httpOnly && ck.sameSite === 'Strict', `the session cookie is HttpOnly, SameSite=Strict (${JSON.stringify(ck)})`);
    chk(await page.evaluate(() => document.cookie) === '', 'no script on the page can read the cookie');

    // The token is spent: the same URL in another browser is refused.
    const again = await browser.newContext();
    const gp = await again.newPage();
    await gp.goto(d.url);
    await gp.waitForSelector('#login:not([hidden])', { timeout: 10000 });
    chk((await gp.textContent('#login-why')).includes('not valid'), 'a replayed token URL does not log in');
    await again.close();

    // A held request raises a card; the page shows it; approve once.
    const a = await ctl.call({ op: 'open_session', name: 'agent-a', egress: true, proxy_config: proxyConf });
    chk(a.ok === true, `open_session agent-a (${JSON.stringify(a)})`);
    const n0 = up.count;
    const t0 = Date.now();
    const held = proxyConnect(a.egress_dir, 'api.test', up.port);
    let settled = false;
    held.then(() => { settled = true; });
    const card = page.locator('.card', { hasText: 'api.test' });
    await card.waitFor({ timeout: 10000 });
    timings.card_shown_ms = Date.now() - t0;
    // A page opened after the card was raised shows it too.
    const late = await browser.newContext();
    const lp = await late.newPage();
    await lp.goto(cli(d.env, 'panel', '--config', d.file).out.trim());
    const lateCard = lp.locator('.card', { hasText: 'api.test' });
    await lateCard.waitFor({ timeout: 10000 });
    chk(true, 'a page opened after the card was raised shows it');
    const text = await card.textContent();
    chk(text.includes(`api.test on port ${up.port}`) && text.includes('agent-a') && text.includes('tier ask'),
      `the card says who wants what, and why it asks (${text})`);
    await sleep(300);
    chk(!settled && up.count === n0, 'while the card is open the request is held and nothing reached the upstream');
    const t1 = Date.now();
    await card.locator('[data-action=once]').click();
    const r = await held;
    timings.click_to_answer_ms = Date.now() - t1;
    chk(r.status === 200 && await echoes(r.sock), `after approve once the held request completes (${r.status})`);
    chk(up.count === n0 + 1, 'the upstream saw exactly that connection');
    r.sock.destroy();
    await card.waitFor({ state: 'detached', timeout: 10000 });
    chk(true, 'the answered card leaves the page');
    await lateCard.waitFor({ state: 'detached', timeout: 10000 });
    chk(true, 'and every other page');
    await late.close();

    // A card answered elsewhere (the CLI) leaves the page too.
    const held2 = proxyConnect(a.egress_dir, 'other.test', up.port);
    const card2 = page.locator('.card', { hasText: 'other.test' });
    await card2.waitFor({ timeout: 10000 });
    const cards = await ctl.call({ op: 'cards' });
    const c2 = (cards.cards || []).find((c) => (c.scope.domains || []).includes('other.test')) || {};
    const den = cli(d.env, 'deny', c2.id || 'x', '--reason', 'not now');
    chk(den.status === 0, `shinken deny (${den.status} ${den.err})`);
    await card2.waitFor({ state: 'detached', timeout: 10000 });
    chk(true, 'a card answered from the CLI disappears from the page');
    chk((await held2).status === 403, 'and its held request was refused');

    // The keyboard: type a reason, focus the card, press d. The agent
    // reads the reason in its refusal; nothing reached the upstream.
    const n1 = up.count;
    const held3 = proxyConnect(a.egress_dir, 'key.test', up.port);
    const card3 = page.locator('.card', { hasText: 'key.test' });
    await card3.waitFor({ timeout: 10000 });
    await card3.locator('[data-field=reason]').fill('use the mirror instead');
    await card3.focus();
    await page.keyboard.press('d');
    const r3 = await held3;
    await Promise.race([r3.closed, sleep(5000)]);
    chk(r3.status === 403 && r3.rest().includes('use the mirror instead') && up.count === n1,
      `the d key denies the focused card with the typed reason (${r3.status} ${JSON.stringify(r3.rest())})`);

    // Approve a pattern: the card's editor offers exactly the patterns the
    // manager put on the card (the control: the held request waits), and
    // the p key approves the one chosen. Judged from outside: the held
    // request completes, and a sibling under the pattern then reaches the
    // upstream with no card.
    const n2 = up.count;
    const held4 = proxyConnect(a.egress_dir, 'a.svc.test', up.port);
    const card4 = page.locator('.card', { hasText: 'a.svc.test' });
    await card4.waitFor({ timeout: 10000 });
    const c4 = ((await ctl.call({ op: 'cards' })).cards || []).find((c) => (c.scope.domains || []).includes('a.svc.test')) || {};
    const offered = await card4.locator('[data-field=pattern] option').evaluateAll((os) => os.map((o) => o.value));
    const want = (c4.patterns || []).map((p) => p.pattern);
    chk(want.length > 0 && JSON.stringify(offered) === JSON.stringify(want),
      `the pattern editor offers exactly the card's patterns (${offered} vs ${want})`);
    chk(offered[0] === `*.svc.test:${up.port}`, `the proposed pattern covers the host's siblings (${offered[0]})`);
    await sleep(200);
    chk(up.count === n2, 'control: while the card is open nothing reached the upstream');
    if (args.screenshots) await page.screenshot({ path: path.join(args.screenshots, 'panel-requests.png'), fullPage: true });
    await card4.locator('[data-field=pattern]').selectOption(offered[0]);
    await card4.focus();
    await page.keyboard.press('p');
    const r4 = await held4;
    chk(r4.status === 200 && await echoes(r4.sock), `the p key approves the pattern and the held request completes (${r4.status})`);
    r4.sock.destroy();
    await card4.waitFor({ state: 'detached', timeout: 10000 });
    const sib = await proxyConnect(a.egress_dir, 'b.svc.test', up.port);
    chk(sib.status === 200 && await echoes(sib.sock), `a sibling under the approved pattern goes through (${sib.status})`);
    sib.sock.destroy();
    chk(await page.locator('.card', { hasText: 'b.svc.test' }).count() === 0, 'and raised no card');
    chk(up.count === n2 + 2, `the upstream saw exactly those two connections (${up.count - n2})`);

    // Unlock: a second session, whose opener asks no human (no card: what
    // no handle covers is refused at once). Grant it egress from the form.
    const b = await ctl.call({ op: 'open_session', name: 'agent-b', egress: true, proxy_config: proxyConf, ask: false });
    chk(b.ok === true, `open_session agent-b (${JSON.stringify(b)})`);
    // auto.test is at Auto, so a connection would now get a handle of its
    // own with no human: the control is that agent-b holds none before the
    // unlock, and after it exactly one, the panel's.
    const handlesFor = async (host) => {
      const g = await ctl.call({ op: 'grants', session: b.session });
      return (g.grants || []).filter((h) => JSON.stringify(h.scope || {}).includes(host) && h.live);
    };
    chk((await handlesFor('auto.test')).length === 0, 'control: before the unlock agent-b holds no handle for auto.test');
    await page.locator(`#unlock-session option[value="${b.session}"]`).waitFor({ state: 'attached', timeout: 10000 });
    await page.selectOption('#unlock-session', b.session);
    await page.fill('#unlock-host', 'auto.test');
    await page.fill('#unlock-port', String(up.port));
    await page.click('#unlock-go');
    await page.waitForSelector('#unlock-result.good', { timeout: 10000 });
    const t = await proxyConnect(b.egress_dir, 'auto.test', up.port);
    chk(t.status === 200 && await echoes(t.sock), `after the unlock agent-b's next request succeeds (${t.status})`);
    chk((await handlesFor('auto.test')).length === 1, 'the request went through the panel\'s handle, not one of its own');

    // An unlock the policy answers "ask" (api.test is at Ask) waits for a
    // human: the person at the panel approves it there, and it works.
    const askBefore = await proxyConnect(b.egress_dir, 'api.test', up.port);
    chk(askBefore.status === 403, `control: agent-b cannot reach api.test before (${askBefore.status})`);
    askBefore.sock.destroy();
    await page.fill('#unlock-host', 'api.test');
    await page.click('#unlock-go');
    await page.click('#unlock-result [data-action=approve-pending]', { timeout: 10000 });
    await page.waitForSelector('#unlock-result.good', { timeout: 10000 });
    const askAfter = await proxyConnect(b.egress_dir, 'api.test', up.port);
    chk(askAfter.status === 200 && await echoes(askAfter.sock), `an Ask-tier unlock approved in the panel works (${askAfter.status})`);
    askAfter.sock.destroy();

    // Revoke in one click: the open tunnel closes, the next use fails.
    const row = page.locator(`[data-session="${b.session}"] tr[data-handle]`, { hasText: 'auto.test' });
    await row.waitFor({ timeout: 10000 });
    const t2 = Date.now();
    await row.locator('[data-action=revoke]').click();
    const closed = await Promise.race([t.closed.then(() => true), sleep(10000).then(() => false)]);
    timings.revoke_to_close_ms = Date.now() - t2;
    chk(closed, 'the revoked grant\'s open tunnel closes');
    const after = await proxyConnect(b.egress_dir, 'auto.test', up.port);
    chk(after.status === 403, `and the next use is refused (${after.status})`);
    after.sock.destroy();
    await page.locator(`[data-session="${b.session}"] tr[data-handle] .state-dead`).waitFor({ timeout: 10000 });
    chk(true, 'the page shows the grant revoked');
    // The Timeline view: the revoke appears live, as the panel's; the chain
    // verifies; an event opens to its inclusion proof.
    const rev = page.locator('#event-rows tr', { hasText: 'revoke' }).filter({ hasText: 'panel' });
    await rev.first().waitFor({ timeout: 10000 });
    chk(true, 'the Timeline shows the revoke, by the panel, live');
    chk(timelineFetches === 1, `the timeline was fetched once, and every later event streamed (${timelineFetches} fetches)`);
    await sleep(800); // a checkpoint covers it
    await page.click('#verify-now');
    await page.waitForSelector('#chain.good', { timeout: 10000 });
    chk((await page.textContent('#chain')).includes('Verified'), 'the Timeline says the chain verified');
    await page.fill('#f-session', b.session);
    const shown = await page.locator('#event-rows tr').allTextContents();
    chk(shown.length > 0 && shown.every((t) => t.includes(b.session)), `the filter keeps one session's events (${shown.length})`);
    await rev.first().click();
    await page.waitForFunction(() => document.getElementById('event-detail').textContent.includes('inclusion proof'),
      null, { timeout: 10000 });
    chk(true, 'an event opens to its fields and its inclusion proof');
    if (args.screenshots) await page.screenshot({ path: path.join(args.screenshots, 'panel-timeline.png'), fullPage: true });
    // The Host view says what is enforced, and what a running session can
    // be granted, plainly: a class with no mechanism says so.
    await page.waitForSelector('#host-sandbox tr[data-class=network]', { timeout: 15000 });
    const egressRow = await page.textContent('#host-live tr[data-class="net.egress"]');
    const gpuRow = await page.textContent('#host-live tr[data-class="gpu"]');
    const sudoRow = await page.textContent('#host-live tr[data-class="install.privileged"]');
    const doctor = JSON.parse(cli(d.env, 'doctor', '--json').out || '{}');
    // Privileged commands have a mechanism where the manager is root, and
    // the row says which, or that there is none, as doctor does.
    const sudoLive = ((doctor.live_unlocks || []).find((c) => c.class === 'install.privileged') || {}).available;
    chk(egressRow.includes('proxy') && gpuRow.includes('device nodes') &&
        sudoRow.includes(sudoLive ? 'sudo shim' : 'no enforcement point'),
      `the Host view names the live mechanisms, and their absence (${egressRow} | ${gpuRow} | ${sudoRow})`);
    const net = (doctor.classes || []).find((c) => c.class === 'network') || {};
    chk((await page.textContent('#host-sandbox tr[data-class=network]')).includes(net.level || '?'),
      `the Host view agrees with shinken doctor (${net.level})`);
    chk(consoleErrors.length === 0, `no script error and no CSP violation on the page (${consoleErrors.join('; ')})`);

    // The timeline, from outside: each act is the panel's.
    await sleep(1500);
    const tail = cli(d.env, 'audit', 'tail', '--db', conf.audit_db, '-n', '0', '--json');
    const evs = tail.out.split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l));
    const byPanel = (name) => evs.some((e) => e['event.name'] === name && e['shinken.human.surface'] === 'panel');
    chk(byPanel('card-resolved'), 'the timeline records the approval as the panel\'s');
    chk(byPanel('grant'), 'the unlock as the panel\'s');
    chk(byPanel('revoke'), 'and the revoke as the panel\'s');
  } finally {
    await browser.close();
    ctl.close();
    const exited = new Promise((r) => d.p.on('exit', (code, sig) => r(code === null ? sig : code)));
    d.p.kill('SIGTERM');
    const code = await Promise.race([exited, sleep(20000).then(() => 'no exit in 20 s')]);
    chk(code === 0, `the daemon ends cleanly (${code})`);
    up.srv.close();
  }
  console.log(`timings ${JSON.stringify(timings)}`);
  console.log(`${passed} of ${passed + failed.length} checks passed`);
  process.exit(failed.length ? 1 : 0);
}

main().catch((e) => { console.error('FAIL:', e && e.stack ? e.stack : e); process.exit(1); });
