// Clock: the emulator's time (every expiry, token iat/exp and window follows it), advance and reset.

import { api, loadClock, emuNow, clock } from './api.js';
import { $, $$, showError, fmtTime, fmtDuration, toast } from './dom.js';
import { onEvent } from './stream.js';

let root;
let timer = 0;

export function init() {
  root = $('#view-clock');
  $('#clock-form').addEventListener('submit', (e) => { e.preventDefault(); advance(Number($('#clock-seconds').value)); });
  for (const b of $$('[data-advance]', root)) b.addEventListener('click', () => advance(Number(b.dataset.advance)));
  $('#clock-reset').addEventListener('click', async () => {
    try {
      await api('POST', '/emulator/v1/clock:reset', {});
      await refresh();
      toast('Clock reset to the real time');
    } catch (e) { showError(root, e); }
  });
  onEvent((e) => { if (e.type === 'clock.changed' && timer) refresh(); });
}

export function show() {
  refresh();
  timer = setInterval(tick, 1000);
}

export function hide() { clearInterval(timer); timer = 0; }
export function scopeChanged() {}

async function refresh() {
  try {
    await loadClock();
    tick();
    showError(root);
  } catch (e) { showError(root, e); }
}

function tick() {
  $('#clock-now').textContent = fmtTime(emuNow());
  const off = clock.serverOffsetSeconds;
  $('#clock-offset').textContent = off ? `+${fmtDuration(off)} (${off} s)` : 'none (real time)';
}

async function advance(seconds) {
  if (!Number.isFinite(seconds) || seconds < 0) { showError(root, new Error('Seconds must be a number ≥ 0.')); return; }
  try {
    await api('POST', '/emulator/v1/clock:advance', { seconds });
    await refresh();
    toast(`Clock advanced by ${fmtDuration(seconds)}`);
  } catch (e) { showError(root, e); }
}
