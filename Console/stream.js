// The live event stream (GET …/events, Server-Sent Events). One stream per tab for the selected project or tenant;
// views subscribe to it. Without an admin token the browser's EventSource does the work (and reconnects with
// Last-Event-ID); with one, a fetch() reader parses the same stream, because EventSource cannot send headers.

import { state } from './api.js';

export const EVENT_TYPES = [
  'code.sent', 'code.verified', 'code.rejected', 'session.expired',
  'user.created', 'user.updated', 'user.linked', 'user.disabled', 'user.enabled', 'user.deleted',
  'tokens.issued', 'tokens.refreshed', 'tokens.revoked',
  'limit.hit', 'appVerification.failed', 'recaptcha.assessed', 'sms.delivery', 'config.changed', 'keys.rotated', 'clock.changed',
  'mfa.enrolled', 'mfa.withdrawn', 'oob.sent', 'idpToken.revoked', 'blockingFunction.called', 'sessionCookie.created', 'appCheck.checked', 'project.reset', 'dropped',
];

const listeners = new Set();
const stateListeners = new Set();
let close = null;
export let streamState = 'connecting';

export function onEvent(fn) { listeners.add(fn); }
export function onStreamState(fn) { stateListeners.add(fn); fn(streamState); }

function emit(data) {
  let event;
  try { event = JSON.parse(data); } catch (_) { return; }
  if (!event || typeof event !== 'object') return;
  for (const fn of listeners) {
    try { fn(event); } catch (e) { setTimeout(() => { throw e; }); }
  }
}

function setState(s) {
  if (s === streamState) return;
  streamState = s;
  for (const fn of stateListeners) fn(s);
}

/// (Re)opens the stream for `path` (…/events).
export function openStream(path) {
  if (close) close();
  setState('connecting');
  close = state.token ? fetchStream(path) : eventSource(path);
}

function eventSource(path) {
  const es = new EventSource(path);
  for (const t of EVENT_TYPES) es.addEventListener(t, (e) => emit(e.data));
  es.onmessage = (e) => emit(e.data);
  es.onopen = () => setState('live');
  es.onerror = () => setState(es.readyState === EventSource.CLOSED ? 'unavailable' : 'reconnecting');
  return () => es.close();
}

function fetchStream(path) {
  const ctrl = new AbortController();
  let stopped = false;
  let lastId = '';
  (async () => {
    let delay = 1000;
    while (!stopped) {
      try {
        const headers = { Accept: 'text/event-stream', Authorization: 'Bearer ' + state.token };
        if (lastId) headers['Last-Event-ID'] = lastId;
        const res = await fetch(path, { headers, signal: ctrl.signal, cache: 'no-store', credentials: 'omit' });
        if (!res.ok || !res.body) {
          setState('unavailable');
          if (res.status === 401) state.onAuthNeeded();
          return;
        }
        setState('live');
        delay = 1000;
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        let buf = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += value.replace(/\r\n?/g, '\n');
          let cut;
          while ((cut = buf.indexOf('\n\n')) >= 0) {
            const block = buf.slice(0, cut);
            buf = buf.slice(cut + 2);
            const data = [];
            for (const line of block.split('\n')) {
              if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
              else if (line.startsWith('id:')) lastId = line.slice(3).trim();
            }
            if (data.length) emit(data.join('\n'));
          }
          if (buf.length > 1 << 20) buf = '';
        }
      } catch (_) {
        if (stopped) return;
      }
      if (stopped) return;
      setState('reconnecting');
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 15000);
    }
  })();
  return () => { stopped = true; ctrl.abort(); };
}
