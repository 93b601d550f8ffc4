// Users: search (the start of a uid, email, email domain, phone number or name word) through the emulator's listing,
// paged; a user's details; custom claims; disable, delete, revoke sessions; second factors. Changes go through the
// admin API, as an Admin SDK would.

import { api, emulatorScope, adminScope, emuNow, loadClock } from './api.js';
import { h, $, showError, fmtTime, toast } from './dom.js';
import { onEvent } from './stream.js';
import * as idp from './idp.js';

const PAGE = 25;
const RESERVED = new Set(['acr', 'amr', 'at_hash', 'aud', 'auth_time', 'azp', 'cnf', 'c_hash', 'exp', 'firebase',
  'iat', 'iss', 'jti', 'nbf', 'nonce', 'sub']);

let root, detail;
let pages = [''];        // page tokens of the pages seen, for "first page"
let next = '';
let current = null;      // the user shown in detail
let deleteArmed = 0;
let visible = false;
let staleTimer = 0;

export function init() {
  root = $('#view-users');
  detail = $('#user-detail');
  $('#users-search').addEventListener('submit', (e) => { e.preventDefault(); pages = ['']; search(''); });
  $('#users-next').addEventListener('click', () => { if (next) { pages.push(next); search(next); } });
  $('#users-first').addEventListener('click', () => { pages = ['']; search(''); });
  $('#claims-form').addEventListener('submit', (e) => { e.preventDefault(); saveClaims(); });
  $('#claims').addEventListener('input', () => { validateClaims(); });
  $('#user-disable').addEventListener('click', () => act({ disableUser: !current.disabled }, current.disabled ? 'Enabled' : 'Disabled'));
  $('#user-revoke').addEventListener('click', revoke);
  $('#user-delete').addEventListener('click', remove);
  idp.init((uid) => open(uid));
  onEvent((e) => {
    if (!visible || !e.type || !e.type.startsWith('user.')) return;
    clearTimeout(staleTimer);
    staleTimer = setTimeout(() => search(pages[pages.length - 1], true), 300);
    if (current && e.uid === current.localId) open(current.localId, true);
  });
}

export function show() { visible = true; search(pages[pages.length - 1], true); }
export function hide() { visible = false; }
export function scopeChanged() { pages = ['']; current = null; detail.hidden = true; $('#users-table tbody').replaceChildren(); }

async function search(pageToken, quiet = false) {
  const params = new URLSearchParams({ pageSize: String(PAGE) });
  const q = $('#users-q').value.trim();
  if (q) params.set('q', q);
  if (pageToken) params.set('pageToken', pageToken);
  try {
    const { json, headers } = await api('GET', `${emulatorScope()}/users?${params}`);
    const timing = /dur=([0-9.]+)/.exec(headers.get('Server-Timing') || '');
    const users = json.users || [];
    $('#users-table tbody').replaceChildren(...users.map(row));
    next = json.nextPageToken || '';
    $('#users-next').disabled = !next;
    $('#users-first').disabled = pages.length <= 1;
    const page = pages.length;
    const about = json.matchedEstimated ? 'at most ' : '';
    $('#users-summary').textContent = `${about}${json.matched} of ${json.total} users match` + (json.matched > PAGE ? ` · page ${page}` : '')
      + (timing ? ` · search took ${timing[1]} ms on the server` : '');
    showError(root);
  } catch (e) { if (!quiet) showError(root, e); else showError(root, e); }
}

function row(u) {
  const state = u.disabled ? 'disabled' : 'enabled';
  const openButton = h('button', { type: 'button', class: 'secondary mono', 'aria-label': `Open user ${u.localId}` }, u.localId);
  openButton.addEventListener('click', () => open(u.localId));
  return h('tr', { 'data-uid': u.localId },
    h('td', {}, openButton), h('td', { class: 'mono' }, u.phoneNumber || ''), h('td', {}, u.email || ''),
    h('td', {}, u.displayName || ''), h('td', {}, providerIds(u)), h('td', {}, state));
}

/// `phone, google.com`: the providers of a user as the listing shows them.
function providerIds(u) {
  return [...new Set((u.providerUserInfo || []).map((p) => p.providerId))].join(', ');
}

/// One line per provider: its id, then the identity's raw id and email (what a sign-in matches on).
function providerItem(p) {
  const parts = [h('strong', {}, p.providerId || '?')];
  if (p.rawId && p.rawId !== p.email && p.rawId !== p.phoneNumber) parts.push(' ', h('span', { class: 'mono' }, p.rawId));
  if (p.phoneNumber) parts.push(' ', h('span', { class: 'mono' }, p.phoneNumber));
  if (p.email) parts.push(' ', p.email);
  if (p.displayName) parts.push(' ', h('span', { class: 'hint' }, `“${p.displayName}”`));
  return h('li', { 'data-provider': p.providerId || '' }, ...parts);
}

async function open(uid, quiet = false) {
  try {
    const { json } = await api('POST', `${adminScope()}/accounts:lookup`, { localId: [uid] });
    const u = (json.users || [])[0];
    if (!u) { detail.hidden = true; current = null; if (!quiet) toast('That user no longer exists'); return; }
    const fresh = !current || current.localId !== u.localId;
    current = u;
    render(u, fresh);
    detail.hidden = false;
    if (!quiet) $('#h-user').focus();
    showError(detail);
  } catch (e) { showError(root, e); }
}

function render(u, fresh) {
  $('#user-uid').textContent = u.localId;
  const ms = (v) => (v ? fmtTime(Number(v)) : '—');
  const fields = [
    ['Phone', u.phoneNumber || '—'], ['Email', u.email ? `${u.email}${u.emailVerified ? ' (verified)' : ''}` : '—'],
    ['Display name', u.displayName || '—'], ['State', u.disabled ? 'disabled' : 'enabled'],
    ['Providers', providerIds(u) || 'none (anonymous or custom)'],
    ['Created', ms(u.createdAt)], ['Last sign-in', ms(u.lastLoginAt)],
    ['Sessions valid since', u.validSince ? fmtTime(Number(u.validSince) * 1000) : '—'],
  ];
  if (u.tenantId) fields.push(['Tenant', u.tenantId]);
  $('#user-fields').replaceChildren(...fields.flatMap(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
  if (fresh) {
    let claims = '{}';
    try { claims = JSON.stringify(JSON.parse(u.customAttributes || '{}'), null, 2); } catch (_) { claims = u.customAttributes || '{}'; }
    $('#claims').value = claims;
    validateClaims();
  }
  const providers = u.providerUserInfo || [];
  $('#user-providers').replaceChildren(...(providers.length ? providers.map(providerItem)
    : [h('li', { class: 'hint' }, 'No providers (an anonymous or custom-token user).')]));
  $('#user-disable').textContent = u.disabled ? 'Enable' : 'Disable';
  disarmDelete();
  const mfa = u.mfaInfo || [];
  $('#user-mfa').replaceChildren(...(mfa.length ? mfa.map((m) => {
    const what = m.totpInfo && !m.phoneInfo ? 'TOTP' : (m.phoneInfo || '');
    const b = h('button', { type: 'button', class: 'secondary', 'aria-label': `Remove second factor ${m.phoneInfo || `TOTP ${m.mfaEnrollmentId}`}` }, 'Remove');
    b.addEventListener('click', () => withdraw(m.mfaEnrollmentId));
    return h('li', {}, h('span', { class: 'mono' }, what), ' ', m.displayName ? `“${m.displayName}” ` : '',
      h('span', { class: 'hint' }, `enrolled ${m.enrolledAt || ''} `), b);
  }) : [h('li', { class: 'hint' }, 'No second factors.')]));
}

/// The claims as the server will check them; the reason they are refused, or null.
function claimsProblem(text) {
  let v;
  try { v = JSON.parse(text.trim() || '{}'); } catch (e) { return `Not JSON: ${e.message}`; }
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return 'Claims must be a JSON object.';
  const compact = JSON.stringify(v);
  if (compact.length > 1000) return `Too large: ${compact.length} characters (at most 1,000).`;
  const reserved = Object.keys(v).filter((k) => RESERVED.has(k));
  if (reserved.length) return `Reserved claim name: ${reserved.join(', ')}.`;
  return null;
}

function validateClaims() {
  const problem = claimsProblem($('#claims').value);
  $('#claims-error').textContent = problem || '';
  $('#claims').setAttribute('aria-invalid', problem ? 'true' : 'false');
  return !problem;
}

async function saveClaims() {
  if (!current || !validateClaims()) { $('#claims').focus(); return; }
  const compact = JSON.stringify(JSON.parse($('#claims').value.trim() || '{}'));
  await act({ customAttributes: compact }, 'Claims saved');
}

async function act(fields, done) {
  if (!current) return;
  try {
    await api('POST', `${adminScope()}/accounts:update`, { localId: current.localId, ...fields });
    toast(done);
    await open(current.localId, true);
    search(pages[pages.length - 1], true);
  } catch (e) { showError(detail, e); }
}

async function revoke() {
  try {
    await loadClock();
    await act({ validSince: String(Math.floor(emuNow() / 1000)) }, 'Sessions revoked: refresh tokens and older ID tokens stop working');
  } catch (e) { showError(detail, e); }
}

function disarmDelete() {
  clearTimeout(deleteArmed);
  deleteArmed = 0;
  $('#user-delete').textContent = 'Delete';
}

async function remove() {
  if (!current) return;
  if (!deleteArmed) {
    $('#user-delete').textContent = 'Confirm delete';
    deleteArmed = setTimeout(disarmDelete, 5000);
    toast('Press “Confirm delete” to delete this user');
    return;
  }
  disarmDelete();
  try {
    await api('POST', `${adminScope()}/accounts:delete`, { localId: current.localId });
    toast(`Deleted ${current.localId}`);
    current = null;
    detail.hidden = true;
    search(pages[pages.length - 1], true);
    $('#users-q').focus();
  } catch (e) { showError(detail, e); }
}

async function withdraw(enrollmentId) {
  if (!current) return;
  const keep = (current.mfaInfo || []).filter((m) => m.mfaEnrollmentId !== enrollmentId).map((m) => {
    // A TOTP factor is kept by its id (the server keeps its secret; lookups never show it).
    const o = m.totpInfo && !m.phoneInfo ? { mfaEnrollmentId: m.mfaEnrollmentId, totpInfo: {} }
      : { mfaEnrollmentId: m.mfaEnrollmentId, phoneInfo: m.phoneInfo };
    if (m.displayName) o.displayName = m.displayName;
    if (m.enrolledAt) o.enrolledAt = m.enrolledAt;
    return o;
  });
  await act({ mfa: { enrollments: keep } }, 'Second factor removed');
}

export { claimsProblem };
