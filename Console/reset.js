// Reset and snapshots: POST /emulator/v1/projects/{p}:reset, :snapshot and :restore {name}, GET …/snapshots,
// DELETE …/snapshots/{name}. They cover the project with all its tenants, whatever tenant the console shows.

import { api, state } from './api.js';
import { h, $, showError, showOk, fmtTime } from './dom.js';

let root;
let visible = false;

const projectPath = () => `/emulator/v1/projects/${encodeURIComponent(state.project)}`;
const summary = (r) => `${r.users} user${r.users === 1 ? '' : 's'}` + (r.tenants.length ? `, tenants ${r.tenants.join(', ')}` : '');

export function init() {
  root = $('#view-reset');
  $('#reset-project-button').addEventListener('click', () => {
    if (!window.confirm(`Reset project ${state.project} and its tenants to the starting state?`)) return;
    act(async () => {
      const { json } = await api('POST', projectPath() + ':reset', {});
      return `Project reset: ${summary(json)}.`;
    });
  });
  $('#snapshot-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const name = $('#snapshot-name').value.trim();
    act(async () => {
      const { json } = await api('POST', projectPath() + ':snapshot', { name });
      $('#snapshot-name').value = '';
      return `Snapshot ${json.name} saved: ${json.users} users.`;
    });
  });
}

export function show() { visible = true; load(); }
export function hide() { visible = false; }
export function scopeChanged() { if (visible) load(); }

/// Runs an action, shows its outcome, then lists the snapshots again.
async function act(run) {
  showOk(root);
  try {
    showOk(root, await run());
    showError(root);
  } catch (e) { showError(root, e); }
  await load();
}

async function load() {
  $('#reset-project').textContent = state.project;
  try {
    const { json } = await api('GET', projectPath() + '/snapshots');
    const list = json.snapshots || [];
    $('#snapshots-table tbody').replaceChildren(...list.map((s) => h('tr', { 'data-name': s.name },
      h('td', { class: 'mono' }, s.name), h('td', {}, fmtTime(Date.parse(s.createdAt))), h('td', {}, String(s.users)),
      h('td', {}, s.tenants.length ? s.tenants.join(', ') : '—'),
      h('td', {},
        h('button', { type: 'button', 'data-restore': s.name, onclick: () => act(async () => {
          const { json: r } = await api('POST', projectPath() + ':restore', { name: s.name });
          return `Snapshot ${s.name} restored: ${summary(r)}.`;
        }) }, 'Restore'),
        ' ',
        h('button', { type: 'button', class: 'danger', 'data-delete': s.name, onclick: () => act(async () => {
          await api('DELETE', `${projectPath()}/snapshots/${encodeURIComponent(s.name)}`);
          return `Snapshot ${s.name} deleted.`;
        }) }, 'Delete')))));
    $('#snapshots-empty').hidden = list.length > 0;
    $('#snapshots-table').parentElement.hidden = list.length === 0;
  } catch (e) { showError(root, e); }
}
