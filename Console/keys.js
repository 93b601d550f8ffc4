// Keys: the published signing keys (JWKS), rotation; minting attestations (reCAPTCHA v2 and Enterprise, Play Integrity, App Check, PNV).

import { api, state, emulatorScope } from './api.js';
import { h, $, showError } from './dom.js';
import { onEvent } from './stream.js';

const JWKS = '/www.googleapis.com/service_accounts/v1/jwk/securetoken@system.gserviceaccount.com';
let root;
let visible = false;

export function init() {
  root = $('#view-keys');
  $('#keys-rotate').addEventListener('click', rotate);
  $('#attest-form').addEventListener('submit', (e) => { e.preventDefault(); mint(); });
  onEvent((e) => { if (visible && (e.type === 'keys.rotated' || e.type === 'appCheck.checked')) load(); });
}

export function show() { visible = true; load(); }
export function hide() { visible = false; }
export function scopeChanged() { if (visible) load(); }

async function load() {
  const unsigned = state.tokenSigning === 'none';
  $('#keys-mode').textContent = unsigned
    ? 'Token signing is "none": tokens are unsigned and there is no key to rotate.'
    : 'ID tokens are signed with RS256 by the newest key; the previous keys stay published so older tokens still verify.';
  $('#keys-rotate').disabled = unsigned;
  try {
    const { json } = await api('GET', JWKS);
    const keys = json.keys || [];
    $('#keys-list').replaceChildren(...(keys.length
      ? keys.map((k, i) => h('li', {}, `${k.kid}`, i === 0 ? h('span', { class: 'hint' }, ' (newest)') : null))
      : [h('li', { class: 'hint' }, 'No keys published.')]));
    const { json: ac } = await api('GET', emulatorScope() + '/appCheck');
    const m = ac.metrics || {};
    $('#appcheck-status').textContent = `App Check enforcement: ${ac.enforcement}; client calls verified ${m.verified}, ` +
      `missing ${m.missing}, invalid ${m.invalid}, refused ${m.refused}.`;
    showError(root);
  } catch (e) { showError(root, e); }
}

async function mint() {
  const type = $('#attest-type').value;
  const body = { type };
  const appId = $('#attest-app').value.trim();
  const phone = $('#attest-phone').value.trim();
  if (type === 'APP_CHECK' && appId) body.appId = appId;
  if (type === 'PNV') body.phoneNumber = phone;
  if (type === 'RECAPTCHA_ENTERPRISE') {
    const score = $('#attest-score').value.trim();
    const action = $('#attest-action').value.trim();
    if (score) {
      const n = Number(score);
      if (!Number.isFinite(n) || n < 0 || n > 1) {
        showError(root, new Error('A score is a number from 0.0 to 1.0.'));
        $('#attest-score').focus();
        return;
      }
      body.score = n;
    }
    if (action) body.action = action;
  }
  try {
    const { json } = await api('POST', emulatorScope() + '/appCredentials', body);
    $('#attest-token').value = json.token;
    $('#attest-result').textContent = `${json.type}${json.appId ? ' for ' + json.appId : ''}` +
      `${json.phoneNumber ? ' for ' + json.phoneNumber : ''}` +
      `${json.score !== undefined ? ', score ' + json.score : ''}${json.action ? ', action ' + json.action : ''}, expires ${json.expiresAt}.`;
    showError(root);
  } catch (e) { showError(root, e); }
}

async function rotate() {
  try {
    const { json } = await api('POST', '/emulator/v1/keys:rotate', {});
    const retired = (json.retiredKids || []).length ? ` Retired: ${json.retiredKids.join(', ')}.` : '';
    $('#keys-result').textContent = `New key ${json.kid}.${retired}`;
    await load();
  } catch (e) { showError(root, e); }
}
