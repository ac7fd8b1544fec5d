// SPDX-License-Identifier: Apache-2.0
// The Permission Panel's page. Everything it shows comes from the manager's
// JSON API on this origin; everything it writes into the page goes through
// textContent, never through markup, so a scope or a reason an agent chose
// cannot become script.
'use strict';

let csrf = null;
let state = { sessions: [], grants: [], cards: [] };
let events = null;

const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  return e;
}

function setStatus(text, cls) {
  const s = $('status');
  s.textContent = text;
  s.className = 'status ' + (cls || '');
}

async function login() {
  const token = location.hash.slice(1);
  // The token leaves the address bar at once: it is spent by this login.
  if (token) history.replaceState(null, '', '/');
  if (token) {
    const r = await fetch('/api/login', {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ token }), credentials: 'same-origin',
    });
    const a = await r.json().catch(() => ({}));
    if (r.ok && a.ok) { csrf = a.csrf; return true; }
    showLogin(a.error || `login refused (${r.status})`);
    return false;
  }
  const r = await fetch('/api/session', { credentials: 'same-origin' });
  const a = await r.json().catch(() => ({}));
  if (r.ok && a.ok) { csrf = a.csrf; return true; }
  showLogin(a.error || 'not logged in');
  return false;
}

function showLogin(why) {
  $('login-why').textContent = why;
  $('login').hidden = false;
  for (const id of ['requests', 'sessions', 'unlock', 'host', 'timeline']) $(id).hidden = true;
  setStatus('not logged in', 'down');
}

async function call(req) {
  const r = await fetch('/api/call', {
    method: 'POST', credentials: 'same-origin',
    headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': csrf },
    body: JSON.stringify(req),
  });
  const a = await r.json().catch(() => ({ ok: false, error: `answer ${r.status}` }));
  if (r.status === 401) showLogin(a.error || 'logged out');
  return a;
}

function scopeText(cls, scope) {
  if (!scope) return '';
  if (cls === 'net.egress') {
    const hosts = (scope.domains || []).concat(scope.cidrs || []).join(', ') || 'any host';
    const ports = (scope.ports || []).join(', ') || 'any port';
    return `${hosts} on port ${ports}`;
  }
  return JSON.stringify(scope);
}

function left(ms) {
  const s = Math.max(0, Math.round((ms - Date.now()) / 1000));
  return s >= 60 ? `${Math.floor(s / 60)} min ${s % 60} s` : `${s} s`;
}

async function answerCard(card, resolution, reason, pattern) {
  const req = { op: 'resolve', card: card.id, resolution };
  if (reason) req.reason = reason;
  if (pattern) req.pattern = pattern;
  const a = await call(req);
  if (!a.ok) alert(a.error || 'the manager refused the answer');
  refresh();
}

function renderCard(c) {
  const box = el('div', { class: 'card', tabindex: '0', 'data-card': c.id });
  const sess = c.session || {};
  if (c.kind === 'breaker') {
    box.append(el('div', { class: 'what' }, `Session ${sess.name} is frozen`),
      el('div', { class: 'meta' }, c.reason || ''));
    const acts = el('div', { class: 'actions' },
      el('button', { class: 'approve', 'data-action': 'resume', onclick: () => answerCard(c, 'resume') }, 'Resume'),
      el('button', { class: 'deny', 'data-action': 'end', onclick: () => answerCard(c, 'end') }, 'End the session'));
    box.append(acts);
    box.addEventListener('keydown', (ev) => {
      if (ev.target !== box) return;
      const k = { r: 'resume', e: 'end' }[ev.key];
      if (k) answerCard(c, k);
    });
    return box;
  }
  const what = c.class === 'net.egress' ? `connect to ${scopeText(c.class, c.scope)}`
                                        : `${c.class} ${scopeText(c.class, c.scope)}`;
  box.append(el('div', { class: 'what' }, `${sess.label || sess.name} wants to ${what}`));
  const flags = [];
  if (c.provenance === 'external') flags.push('built from external data');
  if (c.ingested_external) flags.push('has read external content');
  if (c.touched_sensitive) flags.push('has touched sensitive data');
  box.append(el('div', { class: 'meta' },
    `session ${sess.name}` + (sess.command ? ` · ${sess.command}` : '') + (sess.cwd ? ` · in ${sess.cwd}` : '') +
    (c.agent ? ` · agent ${c.agent}` : '') + (c.model ? ` · model ${c.model}` : '')));
  box.append(el('div', { class: 'meta' },
    `tier ${c.tier}` + (c.rule ? ` by ${c.rule}` : '') + (c.why ? `: ${c.why}` : '') +
    ` · ${c.attempts} attempt${c.attempts === 1 ? '' : 's'}` + (flags.length ? ` · ${flags.join(', ')}` : '')));
  const timer = el('span', { class: 'meta countdown' },
    c.paused ? 'paused' : `times out in ${left(c.expires_ms)}`);
  if (!c.paused) timer.dataset.expires = c.expires_ms;
  // What was typed survives the card being drawn again.
  const reason = el('input', { placeholder: 'reason the agent reads (for deny)', 'data-field': 'reason',
    oninput: () => { reasons[c.id] = reason.value; } });
  reason.value = reasons[c.id] || '';
  // The pattern editor: only the patterns the manager put on the card,
  // which it offered because the manifest and the decision allow them
  // (the manager refuses any other); the page invents none.
  const pats = (c.patterns || []).filter((p) => p && p.pattern);
  const pick = pats.length ? el('select', { 'data-field': 'pattern', 'aria-label': 'pattern to approve',
    onchange: () => { patterns[c.id] = pick.value; } },
    ...pats.map((p) => el('option', { value: p.pattern }, `${p.pattern} (tier ${p.tier})`))) : null;
  if (pick && pats.some((p) => p.pattern === patterns[c.id])) pick.value = patterns[c.id];
  const approvePattern = () => answerCard(c, 'pattern', null, pick.value);
  box.append(el('div', { class: 'actions' },
    el('button', { class: 'approve', 'data-action': 'once', onclick: () => answerCard(c, 'once') }, 'Approve once'),
    el('button', { class: 'approve', 'data-action': 'session', onclick: () => answerCard(c, 'session') },
      'Approve for the session'),
    ...(pick ? [el('button', { class: 'approve', 'data-action': 'pattern', onclick: approvePattern },
      'Approve the pattern'), pick] : []),
    el('button', { class: 'deny', 'data-action': 'deny', onclick: () => answerCard(c, 'deny', reason.value) }, 'Deny'),
    reason,
    el('button', { 'data-action': 'cancel', onclick: () => answerCard(c, 'cancel') }, 'Cancel'),
    el('button', { 'data-action': 'takeover', onclick: () => answerCard(c, 'takeover') }, 'Take over'),
    timer));
  box.addEventListener('keydown', (ev) => {
    if (ev.target !== box) return;
    const k = { a: 'once', s: 'session', c: 'cancel', t: 'takeover' }[ev.key];
    if (k) answerCard(c, k);
    else if (ev.key === 'd') answerCard(c, 'deny', reason.value);
    else if (ev.key === 'p' && pick) approvePattern();
  });
  return box;
}

// What stage 2 reported when the sandbox started: the layers it enforced,
// and those it could not on this host. A session whose sandbox has not
// started (or that has none) says so rather than showing nothing.
function sandboxReport(r) {
  if (!r) return el('div', { class: 'hint', 'data-field': 'sandbox' }, 'sandbox: not started (no start report)');
  const box = el('div', { class: 'meta', 'data-field': 'sandbox' });
  box.append(el('div', { 'data-field': 'enforced' },
    `enforced: ${r.enforced && r.enforced.length ? r.enforced.join(', ') : 'nothing'}`));
  if (r.degraded && r.degraded.length)
    box.append(el('div', { class: 'degraded', 'data-field': 'degraded' }, `not enforced: ${r.degraded.join(', ')}`));
  box.append(limitsLine(r));
  return box;
}

function bytes(n) {
  for (const [u, k] of [['GiB', 2 ** 30], ['MiB', 2 ** 20], ['KiB', 2 ** 10]])
    if (n >= k) return `${+(n / k).toFixed(1)} ${u}`;
  return `${n} bytes`;
}

// The limits the sandbox was started with, and how far live grants can
// ever reach (the network mode, and the paths Landlock lets a grant make
// writable). A limit asked with no session cgroup to hold it (a degraded
// run) says so beside it, in red.
function limitsLine(r) {
  const l = r.limits;
  if (!l) return el('div', { class: 'hint', 'data-field': 'limits' }, 'limits: not reported');
  const noCgroup = l.cgroup === false;
  const parts = [
    l.memory ? `memory ${bytes(l.memory)}` : 'memory: no limit',
    l.pids ? `pids ${l.pids}` : 'pids: no limit',
    l.cpu_milli ? `cpu ${+(l.cpu_milli / 1000).toFixed(3)} cores` : 'cpu: no limit',
    { none: 'network: none', proxy: 'network: through the egress proxy, granted hosts only',
      host: 'network: the host\'s own' }[l.net] || `network: ${l.net}`,
  ];
  const box = el('div', { 'data-field': 'limits' }, `limits: ${parts.join(' · ')}`);
  if (noCgroup && (l.memory || l.pids || l.cpu_milli))
    box.append(el('span', { class: 'degraded' }, ' (the cgroup layer is not enforced: these limits do not hold)'));
  const c = r.ceiling || [];
  box.append(el('div', { 'data-field': 'ceiling' }, c.length
    ? `live grants may make writable at most: ${c.join(', ')}` : 'live grants may make nothing writable'));
  return box;
}

function renderSession(s) {
  const grants = state.grants.filter((g) => g.session === s.session);
  const box = el('div', { class: 'session', 'data-session': s.session });
  box.append(el('div', { class: 'title' }, s.session),
    el('div', { class: 'meta hint' }, `trust tier ${s.trust_tier}` + (s.model ? ` · model ${s.model}` : '') +
      ` · ${s.egress ? 'egress through the proxy' : 'no network'} · ${s.pending} pending`));
  if (s.frozen)
    box.querySelector('.title').append(el('span', { class: 'frozen', 'data-field': 'frozen' },
      'frozen: its processes are stopped until a human resumes it'));
  // Take over freezes every process of the session (and stops its cards'
  // countdowns) until resume; the manager refuses it, saying why, for a
  // session whose processes it cannot freeze.
  const freeze = async (op) => {
    const a = await call({ op, session: s.session });
    if (!a.ok) alert(a.error || `the manager refused the ${op}`);
    refresh();
  };
  box.tabIndex = 0;
  box.append(el('div', { class: 'actions' }, s.frozen
    ? el('button', { class: 'approve', 'data-action': 'resume-session', onclick: () => freeze('resume') }, 'Resume')
    : el('button', { 'data-action': 'takeover-session', onclick: () => freeze('takeover') }, 'Take over')));
  box.addEventListener('keydown', (ev) => {
    if (ev.target !== box) return;
    if (ev.key === 't' && !s.frozen) freeze('takeover');
    else if (ev.key === 'r' && s.frozen) freeze('resume');
  });
  box.append(sandboxReport(s.sandbox));
  if (!grants.length) {
    box.append(el('div', { class: 'hint' }, 'No grants.'));
    return box;
  }
  const t = el('table', {}, el('tr', {}, el('th', {}, 'class'), el('th', {}, 'scope'), el('th', {}, 'lifecycle'),
    el('th', {}, 'expires'), el('th', {}, 'state'), el('th', {}, '')));
  for (const g of grants) {
    const row = el('tr', { 'data-handle': g.handle },
      el('td', {}, g.class), el('td', {}, scopeText(g.class, g.scope)), el('td', {}, g.lifecycle),
      el('td', {}, g.expires_ms ? new Date(g.expires_ms).toLocaleTimeString() : 'with the session'),
      el('td', { class: g.live ? 'state-live' : 'state-dead' }, g.live ? 'live' : 'revoked or ended'));
    const cell = el('td', {});
    if (g.live)
      cell.append(el('button', { class: 'revoke', 'data-action': 'revoke', onclick: async () => {
        const a = await call({ op: 'revoke', handle: g.handle });
        if (!a.ok) alert(a.error || 'the manager refused the revoke');
        refresh();
      } }, 'Revoke'));
    row.append(cell);
    t.append(row);
  }
  box.append(t);
  return box;
}

const reasons = {};
const patterns = {};
let drawnCards = '';

function render() {
  const cards = (state.cards || []).slice().sort((a, b) => b.raised_ms - a.raised_ms);
  // The cards are drawn again only when they changed, so that a person's
  // focus and half-typed reason stay where they are.
  const key = JSON.stringify(cards);
  if (key !== drawnCards) {
    drawnCards = key;
    const active = document.activeElement;
    const box = active && active.closest ? active.closest('[data-card]') : null;
    const focused = box ? box.dataset.card : null;
    const field = active && active.dataset ? active.dataset.field : null;
    $('cards').replaceChildren(...cards.map(renderCard));
    const f = focused ? document.querySelector(`[data-card="${CSS.escape(focused)}"]`) : null;
    if (f) (field ? f.querySelector(`[data-field="${field}"]`) || f : f).focus();
    for (const m of [reasons, patterns])
      for (const id of Object.keys(m)) if (!cards.some((c) => c.id === id)) delete m[id];
  }
  $('n-cards').textContent = cards.length;
  $('no-cards').hidden = cards.length > 0;
  const sessions = state.sessions || [];
  // A focused session keeps the focus when the list is drawn again.
  const act = document.activeElement;
  const had = act && act.dataset && act.dataset.session ? act.dataset.session : null;
  $('session-list').replaceChildren(...sessions.map(renderSession));
  const again = had ? document.querySelector(`[data-session="${CSS.escape(had)}"]`) : null;
  if (again) again.focus();
  $('n-sessions').textContent = sessions.length;
  $('no-sessions').hidden = sessions.length > 0;
  const sel = $('unlock-session');
  const keep = sel.value;
  sel.replaceChildren(...sessions.map((s) => el('option', { value: s.session }, s.session)));
  if (sessions.some((s) => s.session === keep)) sel.value = keep;
}

let refreshing = null, again = false, cardEpoch = 0;
async function refresh() {
  if (refreshing) { again = true; return refreshing; }
  refreshing = (async () => {
    do {
      again = false;
      const e0 = cardEpoch;
      const r = await fetch('/api/state', { credentials: 'same-origin' });
      const a = await r.json().catch(() => ({}));
      if (r.status === 401) { showLogin(a.error || 'logged out'); break; }
      // A card event came while this was asked: the answer may be older
      // than the card drawn from it, so the next round decides.
      if (e0 !== cardEpoch) { again = true; continue; }
      if (a.ok) {
        state = { sessions: a.sessions || [], grants: a.grants || [], cards: a.cards || [] };
        render();
      }
    } while (again);
  })();
  try { await refreshing; } finally { refreshing = null; }
}

// ---- the host ----

async function refreshHost() {
  const r = await fetch('/api/host', { credentials: 'same-origin' });
  const a = await r.json().catch(() => ({}));
  if (!a.ok) { $('host-sandbox').replaceChildren(el('tr', {}, el('td', { class: 'missing' }, a.error || r.status))); return; }
  $('host-sandbox').replaceChildren(...a.sandbox.map((c) => el('tr', { 'data-class': c.class },
    el('td', {}, c.class), el('td', { class: `level-${c.level}` }, c.level), el('td', {}, c.mechanism || '-'),
    el('td', { class: 'missing' }, c.missing || ''))));
  $('host-live').replaceChildren(...a.live.map((c) => el('tr', { 'data-class': c.class },
    el('td', {}, c.class), el('td', { class: c.mechanism ? '' : 'missing' }, c.mechanism || c.missing))));
  unlockClasses(a.live);
}

// The classes the Unlock form can ask for: those the form has fields for,
// and of them only the ones the Host view says this manager can grant to a
// running sandbox (the same answer a grant gets), so the form never offers
// what the manager would refuse for want of a mechanism.
const FORM_CLASSES = ['net.egress', 'fs.scope'];
function unlockClasses(live) {
  const sel = $('unlock-class');
  const keep = sel.value;
  const can = FORM_CLASSES.filter((k) => live.some((c) => c.class === k && c.mechanism));
  sel.replaceChildren(...can.map((k) => el('option', { value: k }, k)));
  if (can.includes(keep)) sel.value = keep;
  $('unlock-go').disabled = can.length === 0;
  unlockFields();
}

function unlockFields() {
  const cls = $('unlock-class').value;
  for (const [id, k] of [['unlock-egress', 'net.egress'], ['unlock-fs', 'fs.scope']]) {
    $(id).hidden = cls !== k;
    $(id).disabled = cls !== k;
  }
}

// ---- the timeline ----

let timeline = [];
let chainAt = 0;
const MAX_EVENTS = 1000;
// The whole chain is verified again at most once a minute as events come
// (and whenever the person asks): a verification reads every event on the
// panel's one thread, and a click waits behind it.
const VERIFY_EVERY_MS = 60000;

function ev(e, k) { return e[k] === undefined ? '' : String(e[k]); }

function renderTimeline() {
  const fs = $('f-session').value.trim(), fc = $('f-class').value.trim(), fd = $('f-decision').value.trim();
  const rows = timeline.slice().reverse().filter(({ event: e }) =>
    (!fs || ev(e, 'gen_ai.conversation.id').includes(fs)) && (!fc || ev(e, 'shinken.class').includes(fc)) &&
    (!fd || ev(e, 'shinken.decision').includes(fd) || ev(e, 'shinken.outcome').includes(fd)));
  $('event-rows').replaceChildren(...rows.map(({ seq, event: e }) => el('tr', { 'data-seq': seq,
    onclick: () => showEvent(seq, e) },
    el('td', {}, seq), el('td', {}, ev(e, 'time').replace('T', ' ').replace(/\.\d+Z$/, 'Z')),
    el('td', {}, ev(e, 'event.name')), el('td', {}, ev(e, 'gen_ai.conversation.id')),
    el('td', {}, ev(e, 'shinken.class')), el('td', {}, ev(e, 'shinken.decision') || ev(e, 'shinken.outcome')),
    el('td', {}, ev(e, 'shinken.human.surface')))));
  $('n-events').textContent = timeline.length;
}

async function showEvent(seq, e) {
  const d = $('event-detail');
  d.hidden = false;
  d.textContent = `event ${seq}\n` + JSON.stringify(e, null, 2);
  const r = await fetch(`/api/proof?seq=${seq}`, { credentials: 'same-origin' });
  const a = await r.json().catch(() => ({}));
  d.textContent += a.ok
    ? `\n\ninclusion proof against the checkpoint of ${a.tree_size} events:\nleaf ${a.leaf_hash}\n` +
      a.path.map((h, i) => `  ${i}: ${h}`).join('\n') + `\n\n${a.checkpoint}`
    : `\n\nno inclusion proof yet: ${a.error || r.status}`;
}

async function refreshTimeline() {
  const r = await fetch('/api/timeline', { credentials: 'same-origin' });
  const a = await r.json().catch(() => ({}));
  if (!a.ok) { $('chain').textContent = a.error || 'no timeline'; return; }
  // Events streamed while this was asked are kept: the answer may be older.
  const got = a.events || [];
  const last = got.length ? got[got.length - 1].seq : -1;
  timeline = got.concat(timeline.filter((e) => e.seq > last)).slice(-MAX_EVENTS);
  renderTimeline();
  if (Date.now() - chainAt > VERIFY_EVERY_MS) verify();
}

async function verify() {
  chainAt = Date.now();
  const r = await fetch('/api/verify', { credentials: 'same-origin' });
  const a = await r.json().catch(() => ({}));
  const c = $('chain');
  if (!a.ok) { c.className = 'chain bad'; c.textContent = `Not verified: ${a.error || r.status}`; return; }
  c.className = 'chain ' + (a.tampered ? 'bad' : 'good');
  const when = new Date(a.verified_ms).toLocaleTimeString();
  c.textContent = a.tampered
    ? `TAMPERED: ${a.problem} (${a.problems} problem${a.problems === 1 ? '' : 's'}; checked at ${when})`
    : `Verified at ${when}: ${a.events} events, ${a.checkpoints} signed checkpoints, the latest covering ` +
      `${a.checked_size} events.`;
}

function listen() {
  events = new EventSource('/api/events');
  for (const t of ['hello', 'state']) events.addEventListener(t, () => refresh());
  // A card event carries the card: it is drawn (or taken away) at once.
  // The state is not fetched for it: a changed card changes the state, so
  // the "state" event that follows within a quarter of a second fetches
  // it, and a click on the card just drawn does not wait behind a fetch of
  // the whole state on the panel's one thread. A line that cannot be read
  // is fetched for at once.
  events.addEventListener('card', (m) => {
    cardEpoch++;
    let o = null;
    try { o = JSON.parse(m.data); } catch (e) { /* refresh() below redraws from the state */ }
    if (o && o.event === 'resolved') {
      state.cards = state.cards.filter((c) => c.id !== (o.card && o.card.id ? o.card.id : o.card));
      render();
    } else if (o && o.card && typeof o.card === 'object' && o.card.id) {
      state.cards = state.cards.filter((c) => c.id !== o.card.id).concat([o.card]);
      render();
    } else {
      refresh();
    }
  });
  // The timeline is streamed: each "audit" message carries the events
  // recorded since the last, which are added to those shown. A page that
  // (re)connects asks for the latest ones once ("hello"), so that nothing
  // recorded while it was away is missing.
  events.addEventListener('hello', () => refreshTimeline());
  events.addEventListener('audit', (m) => {
    let a = null;
    try { a = JSON.parse(m.data); } catch (e) { return; }
    const last = timeline.length ? timeline[timeline.length - 1].seq : -1;
    const add = (a.events || []).filter((e) => e.seq > last);
    if (!add.length) return;
    timeline = timeline.concat(add).slice(-MAX_EVENTS);
    renderTimeline();
    if (Date.now() - chainAt > VERIFY_EVERY_MS) verify();
  });
  events.onopen = () => setStatus('live', 'live');
  events.onerror = () => setStatus('reconnecting…', 'down');
}

async function unlock(ev) {
  ev.preventDefault();
  const out = $('unlock-result');
  const cls = $('unlock-class').value;
  let scope;
  if (cls === 'net.egress') {
    scope = { domains: [$('unlock-host').value.trim()], ports: [Number($('unlock-port').value)] };
  } else if (cls === 'fs.scope') {
    // The path goes as typed: the manager resolves it (no symlinks) and
    // refuses what it cannot mount; the page decides nothing.
    scope = { [$('unlock-access').value === 'write' ? 'write' : 'read']: [$('unlock-path').value.trim()] };
  } else {
    out.className = 'result bad';
    out.textContent = 'This manager can grant no class from this form.';
    return;
  }
  const a = await call({ op: 'grant', session: $('unlock-session').value, class: cls, scope });
  showGrant(out, a);
  refresh();
}

// A grant's answer; one the policy answered "ask" waits for a human, and
// the person at the panel is one: approving it here is recorded as theirs.
function showGrant(out, a) {
  out.className = 'result ' + (a.ok ? 'good' : a.decision === 'ask' ? '' : 'bad');
  if (a.ok) {
    out.textContent = `Granted: handle ${a.handle}` + (a.enforced_by ? ` (enforced by ${a.enforced_by})` : '');
    return;
  }
  if (a.decision !== 'ask') { out.textContent = a.error || 'refused'; return; }
  const answer = async (resolution) => {
    const r = await call({ op: 'resolve', pending: a.pending, resolution });
    if (resolution === 'approve') showGrant(out, r);
    else { out.className = 'result bad'; out.textContent = r.ok ? 'Denied.' : r.error || 'refused'; }
    refresh();
  };
  out.replaceChildren(`The policy asks a human for this (${a.reason || a.policy || 'tier Ask'}). `,
    el('button', { class: 'approve', 'data-action': 'approve-pending', onclick: () => answer('approve') }, 'Approve'),
    ' ',
    el('button', { class: 'deny', 'data-action': 'deny-pending', onclick: () => answer('deny') }, 'Deny'));
}

setInterval(() => {
  for (const t of document.querySelectorAll('.countdown[data-expires]'))
    t.textContent = `times out in ${left(Number(t.dataset.expires))}`;
}, 1000);

window.addEventListener('DOMContentLoaded', async () => {
  if (!(await login())) return;
  for (const id of ['requests', 'sessions', 'unlock', 'host', 'timeline']) $(id).hidden = false;
  $('unlock-form').addEventListener('submit', unlock);
  $('unlock-class').addEventListener('change', unlockFields);
  $('verify-now').addEventListener('click', verify);
  for (const id of ['f-session', 'f-class', 'f-decision']) $(id).addEventListener('input', renderTimeline);
  $('filter').addEventListener('submit', (e) => e.preventDefault());
  await refresh();
  listen();
  refreshHost();
});
