// What the JS SDK drivers share: a recording of every exchange the SDK makes (method, path, request body, status,
// response body; WIRE_LOG=1 prints each to stderr) without changing it, and expectations collected as failures.
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

module.exports = { recordWire, expectations };
