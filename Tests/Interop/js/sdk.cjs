// What the SDK drivers share: the real Firebase JS SDK (its browser CJS build: the Node build stubs out phone sign-in)
// from FIREBASE_SDK_DIR, the emulator's address and project from EMULATOR_URL and PROJECT_ID, and a recorder of the
// SDK's exchanges.
const path = require('path');
const sdk = process.env.FIREBASE_SDK_DIR;
if (!sdk) { console.error('set FIREBASE_SDK_DIR'); process.exit(2); }
const req = (m) => require(path.join(sdk, 'node_modules', m));

// Records every exchange the SDK makes (method, path, request body, status, response body) without changing it, in the
// returned `wire`; `realFetch` is the fetch that is not recorded. WIRE_LOG=1 also prints each to stderr.
function recordExchanges() {
  const wire = [];
  const realFetch = globalThis.fetch;
  globalThis.fetch = async (input, init = {}) => {
    const u = new URL(typeof input === 'string' ? input : input.url);
    const res = await realFetch(input, init);
    const text = await res.clone().text();
    const entry = { method: init.method || 'GET', path: u.pathname, body: init.body || null, status: res.status, response: text };
    wire.push(entry);
    if (process.env.WIRE_LOG) console.error(JSON.stringify(entry));
    return res;
  };
  return { wire, realFetch };
}

// Expectations collected as failures (a driver prints them and exits 1): `expect(name, ok, detail)`, and
// `expectError(name, code, fn)`, which runs fn, requires the Firebase error `code` and answers it (null if fn resolved).
function expectations() {
  const failures = [];
  const expect = (name, ok, detail) => { if (!ok) failures.push({ name, detail }); };
  const expectError = async (name, code, fn) => {
    try { await fn(); failures.push({ name, detail: `resolved; expected ${code}` }); return null; }
    catch (e) { if (e.code !== code) failures.push({ name, detail: `got ${e.code}: ${e.message}; expected ${code}` }); return e; }
  };
  return { failures, expect, expectError };
}

module.exports = {
  recordExchanges,
  expectations,
  initializeApp: req('@firebase/app').initializeApp,
  auth: req('@firebase/auth/dist/browser-cjs/index.js'),
  url: process.env.EMULATOR_URL || 'http://127.0.0.1:9099',
  project: process.env.PROJECT_ID || 'demo-phone',
};
