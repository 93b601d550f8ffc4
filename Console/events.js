// Events: a live tail of the project's (or tenant's) event stream, filtered by type (`code.*` matches a prefix).

import { $, $$, h, showError, fmtTime } from './dom.js';
import { onEvent, onStreamState } from './stream.js';

const MAX = 500;
let root, list;
let filters = [];
let paused = false;
let lastId = 0;

export function init() {
  root = $('#view-events');
  list = $('#events-list');
  $('#events-filter').addEventListener('submit', (e) => { e.preventDefault(); setFilter($('#events-types').value); });
  for (const b of $$('[data-types]', root)) {
    b.addEventListener('click', () => { $('#events-types').value = b.dataset.types; setFilter(b.dataset.types); });
  }
  $('#events-pause').addEventListener('click', () => {
    paused = !paused;
    $('#events-pause').setAttribute('aria-pressed', String(paused));
    $('#events-pause').textContent = paused ? 'Resume' : 'Pause';
  });
  $('#events-clear').addEventListener('click', () => { list.replaceChildren(); empty(); });
  onEvent(add);
  onStreamState((s) => {
    if (s === 'unavailable') showError(root, new Error('This server has no event stream (…/events answered an error).'));
    else showError(root);
  });
}

export function show() {}
export function hide() {}
export function scopeChanged() { list.replaceChildren(); lastId = 0; empty(); }

function setFilter(text) {
  filters = text.split(',').map((s) => s.trim()).filter(Boolean);
  for (const li of list.children) li.hidden = !wanted(li.dataset.type);
  empty();
}

function wanted(type) {
  if (!filters.length) return true;
  return filters.some((f) => (f.endsWith('*') ? type.startsWith(f.slice(0, -1)) : type === f));
}

function empty() { $('#events-empty').hidden = list.querySelector('li:not([hidden])') !== null; }

function add(e) {
  if (typeof e.id === 'number') {
    if (e.id <= lastId) return;  // a reconnect that replays what we already have
    lastId = e.id;
  }
  if (paused || typeof e.type !== 'string') return;
  const rest = {};
  for (const [k, v] of Object.entries(e)) if (!['id', 'type', 'time', 'project'].includes(k)) rest[k] = v;
  const li = h('li', { 'data-type': e.type, 'data-id': String(e.id) },
    h('time', { datetime: String(e.time || '') }, fmtTime(Date.parse(e.time))),
    h('span', { class: 'type' }, e.type),
    h('span', {}, JSON.stringify(rest)));
  li.hidden = !wanted(e.type);
  list.prepend(li);
  while (list.children.length > MAX) list.lastElementChild.remove();
  empty();
}
