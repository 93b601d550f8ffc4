// The emulator's own API, same origin only. With --admin-token every call carries that token; without one, admin
// calls carry `Bearer owner` (what the Admin SDKs send to an emulator).

const TOKEN_KEY = 'phoneAuthEmulator.adminToken';

export const state = {
  project: '',
  tenant: '',
  token: sessionStorage.getItem(TOKEN_KEY) || '',
  tokenRequired: false,
  tokenSigning: 'rs256',
  onAuthNeeded: () => {},
};

export function setToken(token) {
  state.token = token;
  if (token) sessionStorage.setItem(TOKEN_KEY, token); else sessionStorage.removeItem(TOKEN_KEY);
}

export class ApiError extends Error {
  constructor(status, message, body) {
    super(message);
    this.status = status;
    this.body = body;
  }
}

export async function api(method, path, body) {
  const headers = { Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (state.token) headers.Authorization = 'Bearer ' + state.token;
  else if (path.startsWith('/identitytoolkit.googleapis.com/')) headers.Authorization = 'Bearer owner';
  const res = await fetch(path, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body),
    cache: 'no-store', credentials: 'omit', redirect: 'error',
  });
  const text = await res.text();
  let json = null;
  if (text) { try { json = JSON.parse(text); } catch (_) { json = null; } }
  if (!res.ok) {
    const message = (json && json.error && typeof json.error.message === 'string') ? json.error.message : `HTTP ${res.status}`;
    if (res.status === 401) state.onAuthNeeded();
    throw new ApiError(res.status, message, json);
  }
  return { json, headers: res.headers };
}

const enc = encodeURIComponent;

/// `/emulator/v1/projects/{p}[/tenants/{t}]`
export function emulatorScope() {
  return `/emulator/v1/projects/${enc(state.project)}` + (state.tenant ? `/tenants/${enc(state.tenant)}` : '');
}

/// `/identitytoolkit.googleapis.com/v1/projects/{p}[/tenants/{t}]` (admin API)
export function adminScope() {
  return `/identitytoolkit.googleapis.com/v1/projects/${enc(state.project)}` + (state.tenant ? `/tenants/${enc(state.tenant)}` : '');
}

export const validId = (s) => /^[A-Za-z0-9_-]{1,128}$/.test(s);

/// The emulator clock, as an offset from this browser's clock (kept current by `loadClock` and clock events).
export const clock = { offsetMillis: 0, serverOffsetSeconds: 0 };
export const emuNow = () => Date.now() + clock.offsetMillis;

export async function loadClock() {
  const { json } = await api('GET', '/emulator/v1/clock');
  clock.offsetMillis = json.nowMillis - Date.now();
  clock.serverOffsetSeconds = json.offsetSeconds;
  return json;
}
