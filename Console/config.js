// Config: test numbers, app verification, limits, SMS regions, scenario numbers, through
// GET/PATCH /emulator/v1/projects/{p}[/tenants/{t}]/config (PATCH merges; the two number maps are replaced whole).

import { api, emulatorScope } from './api.js';
import { h, $, showError, showOk } from './dom.js';
import { onEvent } from './stream.js';

let root;
let config = null;
let visible = false;

const num = (id) => Number($(id).value);

export function init() {
  root = $('#view-config');
  $('#testnum-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const phone = $('#testnum-phone').value.trim(), code = $('#testnum-code').value.trim();
    if (!phone || !code) return;
    const map = { ...testNumbers() };
    map[phone] = code;
    patch({ signIn: { phoneNumber: { testPhoneNumbers: map } } }, `Test number ${phone} saved`).then((ok) => {
      if (ok) { $('#testnum-phone').value = ''; $('#testnum-code').value = ''; }
    });
  });
  $('#config-phone').addEventListener('submit', (e) => {
    e.preventDefault();
    patch({
      phoneAuth: {
        appVerification: $('#cfg-appverification').value,
        codeLength: num('#cfg-codelength'), sessionTtlSeconds: num('#cfg-ttl'), maxCodeAttempts: num('#cfg-attempts'),
        sendRateLimits: {
          perPhoneNumber: { max: num('#cfg-pp-max'), perSeconds: num('#cfg-pp-per') },
          perIp: { max: num('#cfg-ip-max'), perSeconds: num('#cfg-ip-per') },
        },
        smsQuota: { max: num('#cfg-quota-max'), perSeconds: num('#cfg-quota-per') },
      },
    }, 'App verification and limits saved');
  });
  $('#config-regions').addEventListener('submit', (e) => {
    e.preventDefault();
    const regions = $('#cfg-regions').value.split(',').map((s) => s.trim().toUpperCase()).filter(Boolean);
    const mode = $('#cfg-region-mode').value;
    const body = mode === 'allowlistOnly' ? { allowlistOnly: { allowedRegions: regions } } : { allowByDefault: { disallowedRegions: regions } };
    patch({ smsRegionConfig: body }, 'SMS regions saved');
  });
  $('#scenario-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const phone = $('#scenario-phone').value.trim();
    const onSend = $('#scenario-send').value.trim(), onSignIn = $('#scenario-signin').value.trim();
    if (!phone || (!onSend && !onSignIn)) { showError(root, new Error('A scenario number needs an error for send or for sign-in.')); return; }
    const map = { ...scenarios() };
    map[phone] = {};
    if (onSend) map[phone].onSend = onSend;
    if (onSignIn) map[phone].onSignIn = onSignIn;
    patch({ phoneAuth: { scenarioNumbers: map } }, `Scenario number ${phone} saved`).then((ok) => {
      if (ok) for (const id of ['#scenario-phone', '#scenario-send', '#scenario-signin']) $(id).value = '';
    });
  });
  onEvent((e) => { if (visible && e.type === 'config.changed') load(); });
}

export function show() { visible = true; load(); }
export function hide() { visible = false; }
export function scopeChanged() { config = null; }

const testNumbers = () => (config && config.signIn && config.signIn.phoneNumber && config.signIn.phoneNumber.testPhoneNumbers) || {};
const scenarios = () => (config && config.phoneAuth && config.phoneAuth.scenarioNumbers) || {};

async function load() {
  try {
    const { json } = await api('GET', emulatorScope() + '/config');
    config = json;
    render();
    showError(root);
  } catch (e) { showError(root, e); }
}

async function patch(body, done) {
  try {
    const { json } = await api('PATCH', emulatorScope() + '/config', body);
    config = json;
    render();
    showError(root);
    showOk(root, done);
    return true;
  } catch (e) {
    showOk(root, '');
    showError(root, e);
    return false;
  }
}

function render() {
  const tn = testNumbers();
  $('#testnums-table tbody').replaceChildren(...Object.keys(tn).sort().map((phone) => {
    const input = h('input', { 'aria-label': `Code for ${phone}`, autocomplete: 'off', inputmode: 'numeric', size: 8 });
    input.value = tn[phone];
    const save = h('button', { type: 'button', class: 'secondary', 'aria-label': `Save code for ${phone}` }, 'Save');
    save.addEventListener('click', () => patch({ signIn: { phoneNumber: { testPhoneNumbers: { ...testNumbers(), [phone]: input.value.trim() } } } }, `Test number ${phone} saved`));
    const del = h('button', { type: 'button', class: 'secondary', 'aria-label': `Remove ${phone}` }, 'Remove');
    del.addEventListener('click', () => {
      const map = { ...testNumbers() };
      delete map[phone];
      patch({ signIn: { phoneNumber: { testPhoneNumbers: map } } }, `Test number ${phone} removed`);
    });
    return h('tr', { 'data-phone': phone }, h('td', { class: 'mono' }, phone), h('td', {}, input), h('td', {}, save, ' ', del));
  }));
  const pa = config.phoneAuth || {};
  const lim = pa.sendRateLimits || {};
  const set = (id, v) => { $(id).value = v === undefined || v === null ? '' : String(v); };
  set('#cfg-appverification', pa.appVerification || 'OFF');
  set('#cfg-codelength', pa.codeLength);
  set('#cfg-ttl', pa.sessionTtlSeconds);
  set('#cfg-attempts', pa.maxCodeAttempts);
  set('#cfg-pp-max', (lim.perPhoneNumber || {}).max);
  set('#cfg-pp-per', (lim.perPhoneNumber || {}).perSeconds);
  set('#cfg-ip-max', (lim.perIp || {}).max);
  set('#cfg-ip-per', (lim.perIp || {}).perSeconds);
  set('#cfg-quota-max', (pa.smsQuota || {}).max);
  set('#cfg-quota-per', (pa.smsQuota || {}).perSeconds);
  const region = config.smsRegionConfig || {};
  if (region.allowlistOnly) {
    set('#cfg-region-mode', 'allowlistOnly');
    set('#cfg-regions', (region.allowlistOnly.allowedRegions || []).join(', '));
  } else {
    set('#cfg-region-mode', 'allowByDefault');
    set('#cfg-regions', ((region.allowByDefault || {}).disallowedRegions || []).join(', '));
  }
  const sc = scenarios();
  $('#scenarios-table tbody').replaceChildren(...Object.keys(sc).sort().map((phone) => {
    const del = h('button', { type: 'button', class: 'secondary', 'aria-label': `Remove scenario ${phone}` }, 'Remove');
    del.addEventListener('click', () => {
      const map = { ...scenarios() };
      delete map[phone];
      patch({ phoneAuth: { scenarioNumbers: map } }, `Scenario number ${phone} removed`);
    });
    return h('tr', {}, h('td', { class: 'mono' }, phone), h('td', {}, sc[phone].onSend || '—'), h('td', {}, sc[phone].onSignIn || '—'), h('td', {}, del));
  }));
}
