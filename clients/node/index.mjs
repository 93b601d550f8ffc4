// PhoneAuthEmulator from Node test runners: start the binary on a free port and drive its emulator API.
// Dependency-free (Node 18+: global fetch). Every helper takes `{ url, project, tenant, adminToken }` options and
// otherwise reads the environment a started emulator (or `phone-auth-emulator exec`) exports.
//
//   import { startEmulator, mintToken, waitForCode, reset } from './clients/node/index.mjs';
//   const emu = await startEmulator();                      // PHONE_AUTH_EMULATOR_BIN, PATH, ./.build/release/
//   const idToken = await mintToken('alice', { claims: { role: 'admin' } });
//   const code = await waitForCode('+15551234567');
//   await reset();
//   await emu.stop();

import { spawn } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';
import { createInterface } from 'node:readline';

export const DEFAULT_PROJECT = 'demo-phone';

/** A call the emulator refused (Google's `error.message`, HTTP status), or a start that failed. */
export class EmulatorError extends Error {
  constructor(message, status, body) {
    super(status === undefined ? message : `${message} [HTTP ${status}]`);
    this.name = 'EmulatorError';
    this.code = message;
    this.status = status;
    this.body = body;
  }
}

const executable = (p) => { try { accessSync(p, constants.X_OK); return true; } catch { return false; } };

/** The server binary: `explicit`, else $PHONE_AUTH_EMULATOR_BIN, else `phone-auth-emulator` on PATH, else
 * ./.build/release/phone-auth-emulator. */
export function findBinary(explicit) {
  for (const candidate of [explicit, process.env.PHONE_AUTH_EMULATOR_BIN]) {
    if (!candidate) continue;
    if (!executable(candidate)) throw new EmulatorError(`phone-auth-emulator not found or not executable: ${candidate}`);
    return candidate;
  }
  for (const dir of (process.env.PATH || '').split(delimiter)) {
    if (dir && executable(join(dir, 'phone-auth-emulator'))) return join(dir, 'phone-auth-emulator');
  }
  const built = join(process.cwd(), '.build', 'release', 'phone-auth-emulator');
  if (executable(built)) return built;
  throw new EmulatorError('phone-auth-emulator not found: set PHONE_AUTH_EMULATOR_BIN, put it on PATH, or build it (swift build -c release)');
}

/**
 * Starts the emulator on a free port and resolves once it listens. `args`: server flags (`--test-phone`, `--import`…).
 * With `exportEnv` (default true) it sets FIREBASE_AUTH_EMULATOR_HOST, PHONE_AUTH_EMULATOR_URL, GCLOUD_PROJECT and
 * PHONE_AUTH_EMULATOR_PROJECT in this process (restored by `stop()`), so the other helpers and the SDKs find it.
 * Resolves to `{ url, host, project, process, env, stop(), log() }`.
 */
export async function startEmulator({ binary, args = [], project, env = {}, exportEnv = true, timeoutMs = 30_000 } = {}) {
  const path = findBinary(binary);
  const argv = ['--port', '0', ...(project ? ['--project', project] : []), ...args];
  const childEnv = { ...process.env, ...env };
  delete childEnv.PHONE_AUTH_EMULATOR_PORT;
  const child = spawn(path, argv, { env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  const log = [];
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (chunk) => { log.push(chunk); });
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => { child.kill('SIGKILL'); reject(new EmulatorError(`phone-auth-emulator did not start within ${timeoutMs} ms`)); }, timeoutMs);
    const lines = createInterface({ input: child.stdout });
    lines.once('line', (line) => {
      const m = /^listening on (http:\/\/\S+)/.exec(line);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    });
    child.once('error', (e) => { clearTimeout(timer); reject(new EmulatorError(`phone-auth-emulator could not run: ${e.message}`)); });
    child.once('exit', (status) => {
      clearTimeout(timer);
      // stderr may still hold the reason: let it drain first.
      setImmediate(() => reject(new EmulatorError(`phone-auth-emulator did not start (exit status ${status}): ${log.join('').trim().slice(-2000)}`)));
    });
  });
  const ready = await (await fetch(url + '/')).json().catch(() => ({}));
  const emu = {
    url, host: url.replace(/^http:\/\//, ''), project: project || ready.phoneAuthEmulator?.projectId || DEFAULT_PROJECT, process: child,
    log: () => log.join(''),
  };
  emu.env = {
    FIREBASE_AUTH_EMULATOR_HOST: emu.host, PHONE_AUTH_EMULATOR_URL: emu.url, GCLOUD_PROJECT: emu.project, PHONE_AUTH_EMULATOR_PROJECT: emu.project,
  };
  // The server's --admin-token (a flag, or its environment), for the helpers: `adminToken` and the exported variable.
  emu.adminToken = flag(args, '--admin-token') || childEnv.PHONE_AUTH_EMULATOR_ADMIN_TOKEN;
  if (emu.adminToken) emu.env.PHONE_AUTH_EMULATOR_ADMIN_TOKEN = emu.adminToken;
  const saved = {};
  if (exportEnv) for (const [k, v] of Object.entries(emu.env)) { saved[k] = process.env[k]; process.env[k] = v; }
  let stopped = null;
  /** SIGTERM (SIGKILL after `timeoutMs`); resolves to the exit status. Restores the environment it changed. */
  emu.stop = ({ timeoutMs: stopTimeout = 15_000 } = {}) => {
    if (stopped) return stopped;
    for (const [k, v] of Object.entries(saved)) { if (v === undefined) delete process.env[k]; else process.env[k] = v; }
    stopped = new Promise((resolve) => {
      if (child.exitCode !== null) { resolve(child.exitCode); return; }
      const kill = setTimeout(() => child.kill('SIGKILL'), stopTimeout);
      child.once('exit', (status) => { clearTimeout(kill); resolve(status); });
      child.kill('SIGTERM');
    });
    return stopped;
  };
  return emu;
}

/** The value of `name VALUE` or `name=VALUE` in `args`. */
function flag(args, name) {
  for (let i = 0; i < args.length; i++) {
    if (args[i] === name && i + 1 < args.length) return args[i + 1];
    if (args[i].startsWith(name + '=')) return args[i].slice(name.length + 1);
  }
  return undefined;
}

/** Where the helpers talk to: `opts.url`, else PHONE_AUTH_EMULATOR_URL, else http:// + FIREBASE_AUTH_EMULATOR_HOST. */
function target(opts = {}) {
  const url = opts.url || process.env.PHONE_AUTH_EMULATOR_URL ||
    (process.env.FIREBASE_AUTH_EMULATOR_HOST ? 'http://' + process.env.FIREBASE_AUTH_EMULATOR_HOST : '');
  if (!url) throw new EmulatorError('no emulator: pass { url } or set PHONE_AUTH_EMULATOR_URL / FIREBASE_AUTH_EMULATOR_HOST (startEmulator does)');
  const project = opts.project || process.env.PHONE_AUTH_EMULATOR_PROJECT || process.env.GCLOUD_PROJECT || DEFAULT_PROJECT;
  const adminToken = opts.adminToken || process.env.PHONE_AUTH_EMULATOR_ADMIN_TOKEN;
  return { url: url.replace(/\/$/, ''), project, tenant: opts.tenant, adminToken };
}

const enc = encodeURIComponent;
const scope = (t, withTenant = true) => `/emulator/v1/projects/${enc(t.project)}` + (withTenant && t.tenant ? `/tenants/${enc(t.tenant)}` : '');

/** One call to the emulator: the JSON reply (the text with `raw`); a refusal throws `EmulatorError`. */
export async function request(method, path, { body, query, raw = false, ...opts } = {}) {
  const t = target(opts);
  const qs = query ? '?' + new URLSearchParams(query).toString() : '';
  const headers = { Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (t.adminToken) headers.Authorization = 'Bearer ' + t.adminToken;
  const res = await fetch(t.url + path + qs, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  if (!res.ok) {
    let parsed = null;
    try { parsed = JSON.parse(text); } catch { parsed = null; }
    throw new EmulatorError(parsed?.error?.message || text.slice(0, 200) || res.statusText, res.status, parsed);
  }
  if (raw) return text;
  return text ? JSON.parse(text) : {};
}

/** The newest pending code for `phone`, or the first one sent within `timeoutSeconds` (≤ 300). */
export async function waitForCode(phone, { timeoutSeconds = 30, ...opts } = {}) {
  const t = target(opts);
  const entry = await request('GET', scope(t) + '/verificationCodes:wait', { query: { phoneNumber: phone, timeoutSeconds: String(timeoutSeconds) }, ...opts });
  return entry.code;
}

const MINT_FIELDS = ['claims', 'phoneNumber', 'email', 'emailVerified', 'displayName', 'photoUrl', 'signInProvider', 'secondFactor', 'authTime', 'expiresIn'];

/** `POST …/idTokens`: signs in `uid` (created, or the given fields updated); resolves to the whole reply
 * `{ idToken, refreshToken, expiresIn, localId, isNewUser }`. */
export async function mint(uid, fields = {}) {
  const body = { uid };
  for (const k of MINT_FIELDS) if (fields[k] !== undefined) body[k] = fields[k];
  return request('POST', scope(target(fields)) + '/idTokens', { body, ...fields });
}

/** A signed-in user's ID token for `uid`: `{ claims, phoneNumber, email, signInProvider, secondFactor, expiresIn, tenant… }`. */
export async function mintToken(uid, fields = {}) {
  return (await mint(uid, fields)).idToken;
}

/** Back to the starting state: the project (with its tenants), or with `{ all: true }` every project and the clock. */
export async function reset({ all = false, ...opts } = {}) {
  if (all) return request('POST', '/emulator/v1:reset', { body: {}, ...opts });
  return request('POST', scope(target(opts), false) + ':reset', { body: {}, ...opts });
}

/** Saves the project's state (with its tenants) as `name`. */
export async function snapshot(name, opts = {}) {
  return request('POST', scope(target(opts), false) + ':snapshot', { body: { name }, ...opts });
}

/** Puts the snapshot `name` back. */
export async function restore(name, opts = {}) {
  return request('POST', scope(target(opts), false) + ':restore', { body: { name }, ...opts });
}

/** The retained events after id `since` (oldest first), optionally only `types` (`'code.sent'`, `'user.*'`…). */
export async function events({ types, since = 0, ...opts } = {}) {
  const query = new URLSearchParams({ format: 'jsonl', follow: 'false', since: String(since) });
  for (const type of [].concat(types || [])) query.append('type', type);
  const text = await request('GET', scope(target(opts)) + '/events?' + query.toString(), { raw: true, ...opts });
  return text.split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l));
}
