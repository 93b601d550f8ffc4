// DOM helpers. Server text (names, claims, numbers, event fields) only ever becomes text nodes or textContent:
// nothing here parses HTML.

export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k === 'text') el.textContent = String(v);
    else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export const $ = (selector, root = document) => root.querySelector(selector);
export const $$ = (selector, root = document) => Array.from(root.querySelectorAll(selector));

/// The view's own error line (a direct child `[data-error]` of `root`); no argument clears it.
export function showError(root, error) {
  const p = root.querySelector(':scope > [data-error]');
  if (p) p.textContent = error ? (error.message || String(error)) : '';
}

export function showOk(root, text) {
  const p = root.querySelector(':scope > [data-ok]');
  if (p) p.textContent = text || '';
}

let toastTimer = 0;
export function toast(text) {
  const t = document.getElementById('toast');
  t.textContent = text;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { t.textContent = ''; }, 2500);
}

/// Epoch milliseconds → `2026-12-01 06:00:00 UTC`.
export function fmtTime(ms) {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return '—';
  const d = new Date(ms);
  if (Number.isNaN(d.getTime())) return '—';
  return d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC');
}

/// Seconds → `2 min 5 s`, `1 h 3 min`.
export function fmtDuration(seconds) {
  const s = Math.round(Math.abs(seconds));
  const sign = seconds < 0 ? '−' : '';
  if (s < 60) return `${sign}${s} s`;
  if (s < 3600) return `${sign}${Math.floor(s / 60)} min ${s % 60} s`;
  if (s < 86400) return `${sign}${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  return `${sign}${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
}

/// Copies text: the Clipboard API where the page is a secure context (localhost), else a selected hidden field.
export async function copyText(text) {
  try {
    if (navigator.clipboard && window.isSecureContext) {
      await navigator.clipboard.writeText(text);
      return true;
    }
  } catch (_) { /* fall through to the selection copy */ }
  const field = h('textarea', { class: 'sr-only', readonly: true, 'aria-hidden': 'true' });
  field.value = text;
  document.body.append(field);
  field.select();
  let ok = false;
  try { ok = document.execCommand('copy'); } catch (_) { ok = false; }
  field.remove();
  return ok;
}
