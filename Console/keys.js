// Keys: the published signing keys (JWKS), rotation.

import { api, state } from './api.js';
import { h, $, showError } from './dom.js';
import { onEvent } from './stream.js';

const JWKS = '/www.googleapis.com/service_accounts/v1/jwk/securetoken@system.gserviceaccount.com';
let root;
let visible = false;

export function init() {
  root = $('#view-keys');
  $('#keys-rotate').addEventListener('click', rotate);
  onEvent((e) => { if (visible && e.type === 'keys.rotated') load(); });
}

export function show() { visible = true; load(); }
export function hide() { visible = false; }
export function scopeChanged() {}

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
