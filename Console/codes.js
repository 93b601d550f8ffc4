// Codes: every code sent in the project, live from the event stream, with the pending ones from the code inbox.
// States: pending, used (verified), expired (by the emulator clock), rejected (too many wrong codes), cleared.

import { api, emulatorScope, emuNow, loadClock } from './api.js';
import { h, $, showError, fmtDuration, fmtTime, copyText, toast } from './dom.js';
import { onEvent, onStreamState } from './stream.js';

const MAX_ROWS = 300;
const KIND = { signIn: 'sign-in', mfaEnrollment: 'MFA enrollment', mfaSignIn: 'MFA sign-in' };

let root, tbody;
const rows = new Map(); // sessionInfo → record {…, tr, cells}
let visible = false;
let refreshTimer = 0;
let pollTimer = 0;
let tickTimer = 0;
let live = false;

export function init() {
  root = $('#view-codes');
  tbody = $('#codes-table tbody');
  $('#codes-hide-done').addEventListener('change', renderAll);
  $('#codes-clear').addEventListener('click', async () => {
    try {
      const { json } = await api('DELETE', emulatorScope() + '/verificationCodes');
      for (const r of rows.values()) if (r.state === 'pending') r.state = 'cleared';
      renderAll();
      toast(`${json.deleted} pending code(s) cleared`);
    } catch (e) { showError(root, e); }
  });
  onEvent(handle);
  onStreamState((s) => {
    live = s === 'live';
    if (s === 'live') refresh();
    setPolling(s === 'unavailable');
  });
}

export function show() {
  visible = true;
  refresh();
  tickTimer = setInterval(updateStates, 1000);
}

export function hide() {
  visible = false;
  clearInterval(tickTimer);
}

export function scopeChanged() {
  rows.clear();
  tbody.replaceChildren();
  renderAll();
}

function setPolling(on) {
  clearInterval(pollTimer);
  pollTimer = on ? setInterval(() => { if (visible) refresh(true); }, 2000) : 0;
}

function scheduleRefresh(withClock = false) {
  clearTimeout(refreshTimer);
  refreshClock = refreshClock || withClock;
  refreshTimer = setTimeout(() => { const c = refreshClock; refreshClock = false; refresh(c); }, 100);
}
let refreshClock = false;

let renderQueued = false;
function scheduleRender() {
  if (renderQueued) return;
  renderQueued = true;
  requestAnimationFrame(() => { renderQueued = false; renderAll(); });
}

/// Reloads the inbox (and, when polling, the clock): new pending codes appear, codes no longer pending are marked.
async function refresh(withClock = false) {
  const started = performance.now();
  try {
    if (withClock || !live) await loadClock();
    const { json } = await api('GET', emulatorScope() + '/verificationCodes?pageSize=1000');
    const seen = new Set();
    for (const c of json.verificationCodes || []) {
      seen.add(c.sessionInfo);
      upsert(c.sessionInfo, {
        phoneNumber: c.phoneNumber, code: c.code, kind: c.kind, fictional: c.fictional,
        createdAt: Date.parse(c.createdAt), expiresAt: c.expiresAt ? Date.parse(c.expiresAt) : null,
        attemptsLeft: c.attemptsLeft,
      });
    }
    // A code known before this listing was asked for, not verified and no longer pending: it expired (or was
    // cleared, or its session ended); codes replayed from the stream's history get their state here too.
    for (const r of rows.values()) {
      if (r.state === 'pending' && !seen.has(r.sessionInfo) && r.knownAt < started) {
        r.state = r.expiresAt !== null && r.expiresAt > emuNow() ? 'cleared' : 'expired';
      }
      r.inInbox = seen.has(r.sessionInfo);
    }
    showError(root);
    renderAll();
  } catch (e) { showError(root, e); }
}

function upsert(sessionInfo, fields) {
  let r = rows.get(sessionInfo);
  if (!r) {
    r = { sessionInfo, state: 'pending', code: null, attemptsLeft: null, expiresAt: null, createdAt: emuNow(), inInbox: false,
      knownAt: performance.now() };
    rows.set(sessionInfo, r);
  }
  for (const [k, v] of Object.entries(fields)) if (v !== undefined && v !== null) r[k] = v;
  if (fields.code !== undefined) r.inInbox = true;
  return r;
}

function handle(e) {
  switch (e.type) {
    case 'code.sent': {
      upsert(e.sessionInfo, { phoneNumber: e.phoneNumber, kind: e.kind, fictional: e.fictional, code: e.code, createdAt: Date.parse(e.time) });
      scheduleRender();
      scheduleRefresh();
      break;
    }
    case 'code.verified': {
      const r = rows.get(e.sessionInfo);
      if (r) { r.state = 'used'; scheduleRender(); }
      break;
    }
    case 'code.rejected': {
      const r = rows.get(e.sessionInfo);
      if (!r) break;
      if (typeof e.attemptsLeft === 'number') r.attemptsLeft = e.attemptsLeft;
      if (e.reason === 'SESSION_EXPIRED') r.state = 'expired';
      else if (e.reason !== 'INVALID_CODE') r.state = 'rejected';
      scheduleRender();
      break;
    }
    case 'session.expired': {
      const r = rows.get(e.sessionInfo);
      if (r) { r.state = 'expired'; scheduleRender(); }
      break;
    }
    case 'clock.changed': {
      scheduleRefresh(true);
      break;
    }
    default: break;
  }
}

/// The state shown: a pending code past its expiry (emulator clock) is expired.
function stateOf(r) {
  if (r.state === 'pending' && r.expiresAt !== null && r.expiresAt <= emuNow()) return 'expired';
  return r.state;
}

function renderAll() {
  // Newest first; the oldest finished rows go first when there are too many.
  const list = Array.from(rows.values()).sort((a, b) => b.createdAt - a.createdAt);
  while (list.length > MAX_ROWS) {
    const victim = list.pop();
    rows.delete(victim.sessionInfo);
  }
  const hideDone = $('#codes-hide-done').checked;
  const wanted = list.filter((r) => !hideDone || stateOf(r) === 'pending');
  for (const r of wanted) { if (!r.tr) build(r); fill(r); }
  tbody.replaceChildren(...wanted.map((r) => r.tr));
  $('#codes-empty').hidden = wanted.length > 0;
}

function build(r) {
  const copy = h('button', { type: 'button', class: 'secondary', 'aria-label': 'Copy code' }, 'Copy');
  copy.addEventListener('click', async () => {
    if (!r.code) return;
    const ok = await copyText(r.code);
    toast(ok ? `Copied ${r.code}` : 'Copy failed: select the code and copy it');
  });
  r.cells = {
    phone: h('td', { class: 'mono' }), codeText: h('span', { class: 'code-value' }), copy,
    state: h('span', { class: 'state' }), kind: h('td'), expires: h('td'), attempts: h('td'),
  };
  r.tr = h('tr', { 'data-session': r.sessionInfo },
    r.cells.phone, h('td', { class: 'code' }, r.cells.codeText, copy), h('td', {}, r.cells.state),
    r.cells.kind, r.cells.expires, r.cells.attempts);
}

function fill(r) {
  const c = r.cells;
  const state = stateOf(r);
  c.phone.textContent = r.phoneNumber || '';
  c.codeText.textContent = r.code || '…';
  c.copy.disabled = !r.code;
  c.copy.setAttribute('aria-label', r.code ? `Copy code ${r.code} for ${r.phoneNumber}` : 'Copy code');
  c.state.textContent = state;
  c.state.className = `state state-${state}`;
  r.tr.className = state === 'pending' ? '' : 'done';
  r.tr.dataset.state = state;
  c.kind.textContent = (KIND[r.kind] || r.kind || '') + (r.fictional ? ' (fictional)' : '');
  if (r.expiresAt === null) c.expires.textContent = 'never';
  else if (state === 'pending') c.expires.textContent = 'in ' + fmtDuration((r.expiresAt - emuNow()) / 1000);
  else c.expires.textContent = fmtTime(r.expiresAt);
  c.expires.title = r.expiresAt === null ? '' : fmtTime(r.expiresAt);
  c.attempts.textContent = r.attemptsLeft === null || r.attemptsLeft === undefined ? '—' : String(r.attemptsLeft);
}

function updateStates() {
  let changed = false;
  for (const r of rows.values()) {
    if (!r.tr) continue;
    const before = r.tr.dataset.state;
    fill(r);
    if (before !== r.tr.dataset.state) changed = true;
  }
  if (changed && $('#codes-hide-done').checked) renderAll();
}
