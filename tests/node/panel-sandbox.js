// SPDX-License-Identifier: Apache-2.0
// The Permission Panel against a real sandbox: `shinken run --panel` runs
// a workload in a sandbox whose own manager serves the panel, and Debian's
// chromium (driven by playwright-core) logs in. Judged from outside the
// browser and the sandbox:
//  - the Sessions view shows the layers stage 2 reported it enforced, the
//    same the manager's sessions answer holds, and the limits the run was
//    started with (memory, pids, cpu, the net mode, the live grants'
//    ceiling); a session with no sandbox
//    (the control) says it has no start report;
//  - the Unlock form offers exactly the live classes the Host view names;
//  - an fs.scope read unlock made from the form makes a --deny'd host file
//    readable inside the running sandbox: the workload prints its content
//    only after the unlock (the control: before it, it cannot), and the read
//    grant does not let it write there;
//  - a take over from the Sessions view's button shows the session frozen,
//    and nothing runs in the sandbox until resume, from the r key (the
//    control: every step before it ran).
//
// Usage: node panel-sandbox.js --shinken PATH --src DIR [--screenshots DIR]
'use strict';

const child = require('child_process');
const fs = require('fs');
const path = require('path');
const { chromium } = require('playwright-core');
const { sleep, control } = require('./panellib.js');

const args = {};
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];
const SHINKEN = args.shinken;

let passed = 0;
const failed = [];
function chk(cond, what) {
  if (cond) passed++;
  else { failed.push(what); console.error('FAIL:', what); }
  return cond;
}

// The workload: runs the step files go.N the test writes into the working
// directory, one after the other, leaving out.N and rc.N.
const LOOP = `
i=1
while [ $i -le 20 ]; do
  while [ ! -e go.$i ]; do sleep 0.01; done
  sh go.$i > out.$i 2>&1; echo $? > rc.tmp.$i; mv rc.tmp.$i rc.$i
  i=$((i+1))
done
`;

async function main() {
  // The host paths granted live must lie inside the default manifest's
  // fs.scope ceiling and outside the sandbox's private /tmp: /srv.
  fs.mkdirSync('/srv', { recursive: true });
  const tmp = fs.mkdtempSync('/srv/shk-panel-sandbox.');
  const hostDir = fs.mkdtempSync('/srv/shk-panel-host.');
  fs.chmodSync(tmp, 0o755);
  fs.chmodSync(hostDir, 0o755);
  const secret = `panel-secret-${process.pid}\n`;
  fs.writeFileSync(path.join(hostDir, 'f'), secret, { mode: 0o644 });
  const ws = path.join(tmp, 'ws'), xdg = path.join(tmp, 'xdg');
  fs.mkdirSync(ws);
  fs.mkdirSync(xdg, { mode: 0o700 });
  const env = { PATH: '/usr/bin:/bin', HOME: tmp, XDG_RUNTIME_DIR: xdg, SHINKEN_SOCKET: path.join(tmp, 'none.sock'),
                SHINKEN_POLICY_DIR: process.env.SHINKEN_POLICY_DIR || path.join(args.src, 'policies') };
  for (const k of ['ASAN_OPTIONS', 'UBSAN_OPTIONS']) if (process.env[k]) env[k] = process.env[k];
  // On a terminal (script(1) gives it one, as a person's would be), so the
  // run's Ask loop has its freezer and a take over can stop the sandbox.
  Object.assign(env, { SHELL: '/bin/sh', SHK_BIN: SHINKEN, SHK_DENY: hostDir, SHK_LOOP: LOOP });
  const run = child.spawn('script', ['-qfec', '"$SHK_BIN" run --allow-degraded --panel --deny "$SHK_DENY" --mem 256M --pids 300 --cpu 0.5 ' +
    '--net proxy --verbose -- sh -c "$SHK_LOOP"', '/dev/null'], { cwd: ws, env, stdio: ['pipe', 'pipe', 'inherit'] });
  let errText = '';
  const lines = new Promise((res, rej) => {
    run.stdout.on('data', (d) => {
      errText += String(d).replace(/\r/g, '');
      const url = /^shinken: panel (\S+)$/m.exec(errText);
      const sess = /session (\S+); grant egress with: (?:SHINKEN_SOCKET=(\S+) )?/.exec(errText);
      if (url && sess) res({ url: url[1], sid: sess[1], sock: sess[2] });
    });
    run.on('exit', (code) => rej(new Error(`shinken run exited (${code}): ${errText}`)));
  });
  const t = await Promise.race([lines, sleep(30000).then(() => { throw new Error(`no panel line: ${errText}`); })]);
  let n = 0;
  const inside = async (script) => {
    n++;
    fs.writeFileSync(path.join(ws, 'go.tmp'), script + '\n', { mode: 0o644 });
    fs.renameSync(path.join(ws, 'go.tmp'), path.join(ws, `go.${n}`));
    const rc = path.join(ws, `rc.${n}`);
    const end = Date.now() + 20000;
    while (!fs.existsSync(rc)) {
      if (Date.now() > end || run.exitCode !== null) throw new Error(`the sandbox did not run step ${n} (${script})`);
      await sleep(10);
    }
    const r = { status: Number(fs.readFileSync(rc, 'utf8')), out: fs.readFileSync(path.join(ws, `out.${n}`), 'utf8') };
    console.error(`inside: ${script} -> ${r.status} ${JSON.stringify(r.out)}`);
    return r;
  };
  // Once a step ran inside, the launcher has reported the start.
  await inside('true');
  const ctl = control(t.sock);
  const browser = await chromium.launch({ executablePath: process.env.SHINKEN_CHROMIUM || '/usr/bin/chromium',
    headless: true, args: process.getuid() === 0 ? ['--no-sandbox'] : [] });
  try {
    const ctx = await browser.newContext();
    const page = await ctx.newPage();
    const consoleErrors = [];
    page.on('pageerror', (e) => consoleErrors.push(String(e)));
    // The browser's own ask for /favicon.ico (the panel has none) is not
    // the page's: every other error counts.
    page.on('console', (m) => {
      if (m.type() === 'error' && !/\/favicon\.ico$/.test(m.location().url || ''))
        consoleErrors.push(`${m.text()} at ${m.location().url}`);
    });
    await page.goto(t.url);
    await page.waitForSelector('#status.live', { timeout: 15000 });

    // The Sessions view: the start report, as the manager holds it.
    const list = await ctl.call({ op: 'sessions' });
    const mine = (list.sessions || []).find((s) => s.session === t.sid) || {};
    const rep = mine.sandbox || {};
    chk(Array.isArray(rep.enforced) && rep.enforced.length > 0 && Array.isArray(rep.degraded),
      `the sessions answer carries the sandbox's start report (${JSON.stringify(mine)})`);
    chk(mine.frozen === false, `and says the session is not frozen (${mine.frozen})`);
    chk((rep.enforced || []).includes('seccomp') && (rep.enforced || []).includes('no-new-privs'),
      `the report names layers stage 2 enforced (${JSON.stringify(rep.enforced)})`);
    const box = page.locator(`[data-session="${t.sid}"]`);
    await box.locator('[data-field=enforced]').waitFor({ timeout: 10000 });
    const shown = await box.locator('[data-field=enforced]').textContent();
    chk((rep.enforced || []).every((l) => shown.includes(l)), `the Sessions view lists every enforced layer (${shown})`);
    if ((rep.degraded || []).length) {
      const deg = await box.locator('[data-field=degraded]').textContent();
      chk(rep.degraded.every((l) => deg.includes(l)), `and every layer it could not enforce (${deg})`);
    }
    chk(await box.locator('[data-field=frozen]').count() === 0, 'a running session is not shown frozen');
    // Its limits: those the run was started with, as the manager holds
    // them, and whether a session cgroup holds them.
    const lim = rep.limits || {};
    chk(lim.memory === 256 * 2 ** 20 && lim.pids === 300 && lim.cpu_milli === 500 && lim.net === 'proxy',
      `the sessions answer carries the run's limits (${JSON.stringify(lim)})`);
    const limText = await box.locator('[data-field=limits]').textContent();
    chk(limText.includes('memory 256 MiB') && limText.includes('pids 300') && limText.includes('cpu 0.5 cores') &&
        limText.includes('egress proxy'), `the Sessions view shows the limits and the net mode (${limText})`);
    chk((await box.locator('[data-field=ceiling]').textContent()).includes('/srv'),
      'and how far live grants can make paths writable (the manifest\'s ceiling)');
    const held = lim.cgroup === true;
    chk(limText.includes('do not hold') === !held, `the view says whether a cgroup holds them (cgroup ${lim.cgroup})`);
    if (args.screenshots) await page.screenshot({ path: path.join(args.screenshots, 'panel-sessions.png'), fullPage: true });


    // The control: a session with no sandbox has no start report.
    const bare = await ctl.call({ op: 'open_session', name: 'no-sandbox', ask: false });
    chk(bare.ok === true, `open_session no-sandbox (${JSON.stringify(bare)})`);
    const bareBox = page.locator(`[data-session="${bare.session}"] [data-field=sandbox]`);
    await bareBox.waitFor({ timeout: 10000 });
    chk((await bareBox.textContent()).includes('not started'), 'control: a session with no sandbox says so');
    const bareAns = ((await ctl.call({ op: 'sessions' })).sessions || []).find((s) => s.session === bare.session) || {};
    chk(bareAns.sandbox === null, `and its sessions answer has "sandbox": null (${JSON.stringify(bareAns.sandbox)})`);

    // The Unlock form offers exactly the live classes the Host view names.
    await page.waitForSelector('#host-live tr[data-class="fs.scope"]', { timeout: 20000 });
    const host = await page.evaluate(async () => (await (await fetch('/api/host')).json()).live);
    const live = host.filter((c) => c.mechanism && ['net.egress', 'fs.scope'].includes(c.class)).map((c) => c.class);
    const offered = await page.$$eval('#unlock-class option', (os) => os.map((o) => o.value));
    chk(JSON.stringify(offered) === JSON.stringify(live), `the form offers the grantable classes (${offered} vs ${live})`);
    chk(live.includes('fs.scope'), `this host has a live fs.scope mechanism (${JSON.stringify(host)})`);

    // The control: before the unlock the workload cannot read the file.
    const before = await inside(`cat ${hostDir}/f`);
    chk(before.status !== 0 && !before.out.includes(secret.trim()), `control: before the unlock the file is unreadable (${before.status})`);
    await page.selectOption('#unlock-session', t.sid);
    await page.selectOption('#unlock-class', 'fs.scope');
    chk(await page.isHidden('#unlock-host'), 'the fs.scope form hides the egress fields');
    await page.fill('#unlock-path', hostDir);
    await page.selectOption('#unlock-access', 'read');
    await page.click('#unlock-go');
    await page.waitForSelector('#unlock-result.good, #unlock-result.bad', { timeout: 15000 });
    const res = await page.textContent('#unlock-result');
    chk((await page.getAttribute('#unlock-result', 'class')).includes('good') && res.includes('Granted'),
      `the form's fs.scope unlock is granted (${res})`);
    const after = await inside(`cat ${hostDir}/f`);
    chk(after.status === 0 && after.out === secret, `after the unlock the workload prints the host file (${JSON.stringify(after.out)})`);
    const w = await inside(`echo x > ${hostDir}/w`);
    chk(w.status !== 0 && !fs.existsSync(path.join(hostDir, 'w')), 'a read unlock does not let the workload write there');
    await page.locator(`[data-session="${t.sid}"] tr[data-handle]`, { hasText: 'fs.scope' }).waitFor({ timeout: 10000 });
    chk(true, 'the Sessions view lists the fs.scope grant');

    // Take over from the Sessions view's button: the sandbox's processes
    // stop, and the view says the session is frozen. Judged from outside:
    // a step handed to the workload does not run until resume, which the
    // r key on the focused session gives.
    await box.locator('[data-action=takeover-session]').click();
    await box.locator('[data-field=frozen]').waitFor({ timeout: 10000 });
    chk(true, 'the Take over button freezes the session, and the Sessions view shows it');
    const fz = ((await ctl.call({ op: 'sessions' })).sessions || []).find((s) => s.session === t.sid) || {};
    chk(fz.frozen === true, `and the sessions answer says frozen (${fz.frozen})`);
    n++;
    fs.writeFileSync(path.join(ws, `go.${n}`), 'echo ran\n', { mode: 0o644 });
    await sleep(1500);
    chk(!fs.existsSync(path.join(ws, `rc.${n}`)), 'while frozen the workload runs nothing');
    chk(await box.locator('[data-action=resume-session]').count() === 1, 'a frozen session offers Resume');
    await box.focus();
    await page.keyboard.press('r');
    await box.locator('[data-field=frozen]').waitFor({ state: 'detached', timeout: 10000 });
    chk(true, 'after the r key the Sessions view no longer shows it frozen');
    const end = Date.now() + 20000;
    while (!fs.existsSync(path.join(ws, `rc.${n}`)) && Date.now() < end) await sleep(20);
    chk(fs.existsSync(path.join(ws, `rc.${n}`)) && fs.readFileSync(path.join(ws, `out.${n}`), 'utf8') === 'ran\n',
      'and the held step runs');
    const th = ((await ctl.call({ op: 'sessions' })).sessions || []).find((s) => s.session === t.sid) || {};
    chk(th.frozen === false, `the sessions answer says it runs again (${th.frozen})`);
    chk(consoleErrors.length === 0, `no script error and no CSP violation (${consoleErrors.join('; ')})`);
  } finally {
    await browser.close();
    ctl.close();
    run.kill('SIGTERM');
    await Promise.race([new Promise((r) => run.on('exit', r)), sleep(10000)]);
    fs.rmSync(tmp, { recursive: true, force: true });
    fs.rmSync(hostDir, { recursive: true, force: true });
  }
  console.log(`${passed} of ${passed + failed.length} checks passed`);
  process.exit(failed.length ? 1 : 0);
}

main().catch((e) => { console.error('FAIL:', e && e.stack ? e.stack : e); process.exit(1); });
