// What the JS SDK drivers share: the SDK from FIREBASE_SDK_DIR (the browser CommonJS build of auth), a recording of every exchange the SDK makes (method, path, request body, status,
// response body; WIRE_LOG=1 prints each to stderr) without changing it, and expectations collected as failures.
const path = require('path');

function loadSdk() {
  const sdk = process.env.FIREBASE_SDK_DIR;
  if (!sdk) { console.error('set FIREBASE_SDK_DIR'); process.exit(2); }
  const req = (m) => require(path.join(sdk, 'node_modules', m));
  return { initializeApp: req('@firebase/app').initializeApp, auth: req('@firebase/auth/dist/browser-cjs/index.js'),
    url: process.env.EMULATOR_URL || 'http://127.0.0.1:9099', project: process.env.PROJECT_ID || 'demo-phone' };
}

function recordWire() {
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

function expectations() {
  const failures = [];
  const expect = (name, ok, detail) => { if (!ok) failures.push({ name, detail }); };
  // Runs fn, which must fail with the Firebase error `code`; answers the error (null when it resolved).
  const expectError = async (name, code, fn) => {
    try { await fn(); failures.push({ name, detail: `resolved; expected ${code}` }); return null; }
    catch (e) { if (e.code !== code) failures.push({ name, detail: `got ${e.code}: ${e.message}; expected ${code}` }); return e; }
  };
  return { failures, expect, expectError };
}

module.exports = { loadSdk, recordWire, expectations };
