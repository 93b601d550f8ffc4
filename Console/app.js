// The console's entry point: reads the server's readiness reply, asks for the admin token when the server has one,
// keeps the project/tenant scope, switches views by the URL fragment, and owns the one event stream.

import { api, state, setToken, emulatorScope, validId, loadClock } from './api.js';
import { $, $$, h, toast } from './dom.js';
import { openStream, onStreamState } from './stream.js';
import * as codes from './codes.js';
import * as users from './users.js';
import * as config from './config.js';
import * as clockView from './clock.js';
import * as keys from './keys.js';
import * as events from './events.js';
import * as reset from './reset.js';

const VIEWS = { codes, users, config, clock: clockView, keys, events, reset };
const SCOPE_KEY = 'phoneAuthEmulator.scope';
let active = null;
let started = false;

async function readiness() {
  const res = await fetch('/', { headers: { Accept: 'application/json' }, cache: 'no-store', credentials: 'omit' });
  const json = await res.json();
  return json.phoneAuthEmulator || {};
}

function askToken(message) {
  const dialog = $('#token-dialog');
  $('#token-error').textContent = message || '';
  if (!dialog.open) dialog.showModal();
  $('#token-input').focus();
}

async function tryToken(token) {
  setToken(token);
  try {
    await api('GET', '/emulator/v1/clock');
    $('#token-dialog').close();
    start();
  } catch (e) {
    setToken('');
    askToken(e.status === 401 ? 'That token is not accepted.' : e.message);
  }
}

function showView(name) {
  if (!VIEWS[name]) name = 'codes';
  if (active === name) return;
  if (active) { VIEWS[active].hide(); $(`#view-${active}`).hidden = true; }
  active = name;
  $(`#view-${name}`).hidden = false;
  for (const a of $$('[data-tab]')) {
    if (a.dataset.tab === name) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
  }
  document.title = `${$(`#view-${name} h2`).textContent} — Phone Auth Emulator`;
  VIEWS[name].show();
}

function setScope(project, tenant) {
  state.project = project;
  state.tenant = tenant;
  sessionStorage.setItem(SCOPE_KEY, JSON.stringify({ project, tenant }));
  $('#scope-project').value = project;
  $('#scope-tenant').value = tenant;
  for (const v of Object.values(VIEWS)) v.scopeChanged();
  // `since=0`: the retained history first (Codes shows earlier codes, Events the recent past), then live; a
  // reconnect resumes after the last event seen (Last-Event-ID).
  openStream(emulatorScope() + '/events?since=0');
  loadTenants();
}

async function loadTenants() {
  try {
    const { json } = await api('GET', `/identitytoolkit.googleapis.com/v2/projects/${encodeURIComponent(state.project)}/tenants?pageSize=100`);
    $('#scope-tenants').replaceChildren(...(json.tenants || []).map((t) => h('option', { value: t.tenantId }, t.displayName || t.tenantId)));
  } catch (_) { $('#scope-tenants').replaceChildren(); }
}

function start() {
  if (started) return;
  started = true;
  for (const v of Object.values(VIEWS)) v.init();
  onStreamState((s) => {
    $('#live').textContent = {
      connecting: 'Connecting to the event stream…', live: 'Live: updates arrive as they happen.',
      reconnecting: 'Event stream interrupted: reconnecting…',
      unavailable: 'No event stream on this server: polling every 2 s.',
    }[s] || s;
  });
  let saved = {};
  try { saved = JSON.parse(sessionStorage.getItem(SCOPE_KEY) || '{}'); } catch (_) { saved = {}; }
  const project = validId(saved.project || '') ? saved.project : state.defaultProject;
  const tenant = saved.tenant && validId(saved.tenant) ? saved.tenant : '';
  loadClock().catch(() => {}).finally(() => {
    setScope(project, tenant);
    showView(location.hash.slice(1));
  });
}

async function main() {
  const info = await readiness();
  state.defaultProject = info.projectId || 'demo-phone';
  state.tokenRequired = !!info.adminTokenRequired;
  state.tokenSigning = info.tokenSigning || 'rs256';
  state.onAuthNeeded = () => askToken('The admin token is needed (or no longer accepted).');
  window.addEventListener('hashchange', () => { if (started) showView(location.hash.slice(1)); });
  for (const a of $$('[data-tab]')) {
    a.addEventListener('click', () => setTimeout(() => $('#main').focus({ preventScroll: true }), 0));
  }
  $('#scope').addEventListener('submit', (e) => {
    e.preventDefault();
    const project = $('#scope-project').value.trim(), tenant = $('#scope-tenant').value.trim();
    if (!validId(project) || (tenant && !validId(tenant))) {
      toast('Project and tenant ids are letters, digits, - and _ (at most 128).');
      return;
    }
    setScope(project, tenant);
    const view = active;
    active = null;
    showView(view);
    toast(`Showing ${tenant ? `tenant ${tenant} of ` : ''}project ${project}`);
  });
  $('#token-form').addEventListener('submit', (e) => { e.preventDefault(); tryToken($('#token-input').value.trim()); });
  $('#token-dialog').addEventListener('cancel', (e) => e.preventDefault());
  if (state.tokenRequired && !state.token) askToken();
  else if (state.tokenRequired) tryToken(state.token);
  else start();
}

main().catch((e) => { $('#live').textContent = `The console could not start: ${e.message}`; });
