// Users → "Sign in a test provider user": what an app's signInWithCredential sends for a provider (an id_token of
// claims, as the emulator's test convention has it) through accounts:signInWithIdp; the result's uid and tokens.

import { api, state } from './api.js';
import { h, $, showError, toast, copyText } from './dom.js';

const PROVIDER = /^[a-z0-9._-]{1,128}$/;
let root;
let onOpen = () => {};
let lastToken = '';
let lastUid = '';

/// `openUser(uid)`: shows a user's details (the Users view's).
export function init(openUser) {
  root = $('#idp-signin');
  onOpen = openUser;
  $('#idp-form').addEventListener('submit', (e) => { e.preventDefault(); signIn(); });
  $('#idp-copy').addEventListener('click', async () => {
    toast(lastToken && await copyText(lastToken) ? 'ID token copied' : 'Nothing to copy');
  });
  $('#idp-open').addEventListener('click', () => { if (lastUid) onOpen(lastUid); });
}

function randomSub() {
  const bytes = crypto.getRandomValues(new Uint8Array(20));
  return Array.from(bytes, (b) => String(b % 10)).join('');
}

/// The claims of the test id_token (the official emulator's IdP test convention: a JSON object of claims).
export function claimsFor(sub, email, name) {
  const claims = { sub };
  if (email) { claims.email = email; claims.email_verified = true; }
  if (name) claims.name = name;
  return claims;
}

async function signIn() {
  const providerId = $('#idp-provider').value.trim();
  if (!PROVIDER.test(providerId) || ['phone', 'password', 'email'].includes(providerId)) {
    showError(root, new Error('A provider id is lower-case letters, digits, ".", "-" and "_" (google.com, apple.com, oidc.example, …).'));
    $('#idp-provider').focus();
    return;
  }
  const sub = $('#idp-sub').value.trim() || randomSub();
  const email = $('#idp-email').value.trim();
  const name = $('#idp-name').value.trim();
  const claims = claimsFor(sub, email, name);
  const body = {
    requestUri: 'http://localhost', returnSecureToken: true, returnIdpCredential: true,
    postBody: `id_token=${encodeURIComponent(JSON.stringify(claims))}&providerId=${encodeURIComponent(providerId)}`,
    targetProjectId: state.project,
  };
  if (state.tenant) body.tenantId = state.tenant;
  try {
    const { json } = await api('POST', '/identitytoolkit.googleapis.com/v1/accounts:signInWithIdp', body);
    show(providerId, sub, json);
    showError(root);
  } catch (e) { showError(root, e); }
}

function show(providerId, sub, r) {
  lastUid = r.localId || '';
  lastToken = r.idToken || '';
  const rows = [['User', lastUid], ['Provider', providerId], ['Subject', sub]];
  if (r.email) rows.push(['Email', r.email]);
  rows.push(['New user', r.isNewUser ? 'yes' : 'no']);
  if (r.idToken) rows.push(['ID token', r.idToken]);
  if (r.refreshToken) rows.push(['Refresh token', r.refreshToken]);
  $('#idp-fields').replaceChildren(...rows.flatMap(([k, v]) => [h('dt', {}, k), h('dd', { class: k.endsWith('token') ? 'mono' : null }, v)]));
  $('#idp-copy').hidden = !lastToken;
  $('#idp-result').hidden = false;
  toast(`Signed in ${lastUid} with ${providerId}`);
}
