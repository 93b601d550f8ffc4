// The Node helpers against the real binary (node --test clients/node). PHONE_AUTH_EMULATOR_BIN, else this checkout's
// release build.
import assert from 'node:assert/strict';
import { createPublicKey, verify } from 'node:crypto';
import { dirname, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { EmulatorError, events, mint, mintToken, reset, restore, snapshot, startEmulator, waitForCode } from '../index.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
process.env.PHONE_AUTH_EMULATOR_BIN ||= join(ROOT, '.build', 'release', 'phone-auth-emulator');
const JWKS = '/www.googleapis.com/service_accounts/v1/jwk/securetoken@system.gserviceaccount.com';

const part = (token, i) => JSON.parse(Buffer.from(token.split('.')[i], 'base64url').toString());

/** Verifies an RS256 ID token against the emulator's published keys (what a backend's JWT library does). */
async function verifyIdToken(emu, token) {
  const header = part(token, 0);
  const { keys } = await (await fetch(emu.url + JWKS)).json();
  const jwk = keys.find((k) => k.kid === header.kid);
  assert.ok(jwk, `a published key with kid ${header.kid}`);
  const [h, p, s] = token.split('.');
  assert.ok(verify('RSA-SHA256', Buffer.from(`${h}.${p}`), createPublicKey({ key: jwk, format: 'jwk' }), Buffer.from(s, 'base64url')), 'signature');
  const claims = part(token, 1);
  assert.equal(claims.aud, emu.project);
  assert.equal(claims.iss, `https://securetoken.google.com/${emu.project}`);
  return claims;
}

describe('one emulator', () => {
  let emu;
  const before_ = { ...process.env };
  before(async () => { emu = await startEmulator(); });
  after(async () => {
    assert.equal(await emu.stop(), 0, 'a clean stop');
    for (const k of ['FIREBASE_AUTH_EMULATOR_HOST', 'PHONE_AUTH_EMULATOR_URL', 'GCLOUD_PROJECT', 'PHONE_AUTH_EMULATOR_PROJECT']) {
      assert.equal(process.env[k], before_[k], `${k} restored`);
    }
    await assert.rejects(fetch(emu.url + '/'), 'the server is gone');
  });

  test('exports where it listens', () => {
    assert.match(emu.url, /^http:\/\/127\.0\.0\.1:\d+$/);
    assert.equal(process.env.FIREBASE_AUTH_EMULATOR_HOST, emu.host);
    assert.equal(process.env.PHONE_AUTH_EMULATOR_URL, emu.url);
    assert.equal(process.env.GCLOUD_PROJECT, 'demo-phone');
  });

  test('mintToken: a signed-in user\'s RS256 token with its claims', async () => {
    const token = await mintToken('alice', { claims: { role: 'admin' }, email: 'alice@example.com', expiresIn: 120 });
    const claims = await verifyIdToken(emu, token);
    assert.equal(claims.sub, 'alice');
    assert.equal(claims.role, 'admin');
    assert.equal(claims.email, 'alice@example.com');
    assert.equal(claims.exp - claims.iat, 120);
    const full = await mint('bob', { phoneNumber: '+15551230001', signInProvider: 'phone', secondFactor: undefined });
    assert.equal(full.isNewUser, true);
    assert.equal(part(full.idToken, 1).firebase.sign_in_provider, 'phone');
    const tenantToken = await mintToken('tu', { tenant: 'team-a' });
    assert.equal(part(tenantToken, 1).firebase.tenant, 'team-a');
  });

  test('a refusal is an EmulatorError with Google\'s message', async () => {
    await assert.rejects(mintToken('x', { claims: { sub: 'no' } }), (e) => e instanceof EmulatorError && e.status === 400 && e.code === 'FORBIDDEN_CLAIM : sub');
  });

  test('waitForCode: the code a send produces', async () => {
    const phone = '+15551239999';
    setTimeout(() => {
      fetch(emu.url + '/identitytoolkit.googleapis.com/v1/accounts:sendVerificationCode?key=k', {
        method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ phoneNumber: phone }),
      });
    }, 200);
    const code = await waitForCode(phone, { timeoutSeconds: 20 });
    assert.match(code, /^\d{6}$/);
  });

  test('reset, snapshot, restore and events', async () => {
    await reset();
    await mintToken('kept');
    assert.equal((await snapshot('one')).users, 1);
    assert.deepEqual(await reset(), { projectId: 'demo-phone', users: 0, tenants: [] });
    assert.equal((await restore('one')).users, 1);
    const seen = await events({ types: ['user.created', 'project.reset'] });
    assert.deepEqual(seen.slice(-3).map((e) => e.type), ['user.created', 'project.reset', 'project.reset']);
    assert.equal(seen.at(-1).snapshot, 'one');
    await assert.rejects(restore('missing'), (e) => e.status === 404);
    const all = await reset({ all: true });
    assert.deepEqual(all.projects.map((p) => p.projectId), ['demo-phone']);
  });
});

test('two emulators at once, each on its own port, helpers addressed with { url }', async () => {
  const a = await startEmulator({ exportEnv: false });
  const b = await startEmulator({ exportEnv: false, project: 'other-project' });
  try {
    assert.notEqual(a.url, b.url);
    await mintToken('only-in-a', { url: a.url, project: a.project });
    assert.equal((await reset({ url: b.url, project: b.project })).users, 0);
    assert.equal((await reset({ url: a.url, project: a.project })).users, 0);
    assert.equal(b.project, 'other-project');
  } finally {
    await Promise.all([a.stop(), b.stop()]);
  }
});

test('a server with --admin-token: the helpers send it', async () => {
  const emu = await startEmulator({ args: ['--admin-token=s3cret-token'] });
  try {
    assert.equal(emu.adminToken, 's3cret-token');
    assert.equal(process.env.PHONE_AUTH_EMULATOR_ADMIN_TOKEN, 's3cret-token');
    assert.ok(await mintToken('guarded'));
    await assert.rejects(mintToken('guarded', { adminToken: 'wrong-token' }), (e) => e.status === 401);
  } finally {
    await emu.stop();
  }
  assert.equal(process.env.PHONE_AUTH_EMULATOR_ADMIN_TOKEN, undefined);
});

test('a server that cannot start says why', async () => {
  await assert.rejects(startEmulator({ args: ['--no-such-flag'] }), (e) => e instanceof EmulatorError && /did not start \(exit status 2\).*no-such-flag/s.test(e.message));
  await assert.rejects(startEmulator({ binary: '/nonexistent/phone-auth-emulator' }), /not found or not executable/);
  assert.equal(process.env.FIREBASE_AUTH_EMULATOR_HOST, undefined, 'nothing exported by a failed start');
});

test('helpers without an emulator say so', async () => {
  const names = ['PHONE_AUTH_EMULATOR_URL', 'FIREBASE_AUTH_EMULATOR_HOST'];
  const saved = names.map((k) => process.env[k]);
  for (const k of names) delete process.env[k];
  try {
    await assert.rejects(reset(), /no emulator/);
  } finally {
    names.forEach((k, i) => { if (saved[i] !== undefined) process.env[k] = saved[i]; });
  }
});
