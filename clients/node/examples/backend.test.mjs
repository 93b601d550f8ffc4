// A sample suite in the shape Vitest and Jest suites take, run here by node:test (no npm registry on this project's
// machines): the global setups of ./vitest.global-setup.mjs and ./jest.global-setup.mjs start the emulator as those
// runners would, and the tests check a backend's token verification against minted test principals.
import assert from 'node:assert/strict';
import { createPublicKey, verify } from 'node:crypto';
import { dirname, join } from 'node:path';
import { after, before, beforeEach, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { mintToken, reset, waitForCode } from '../index.mjs';
import vitestSetup from './vitest.global-setup.mjs';
import jestSetup from './jest.global-setup.mjs';
import jestTeardown from './jest.global-teardown.mjs';
import { emulatorFixture, freshEmulatorFixture } from './playwright-emulator.mjs';

process.env.PHONE_AUTH_EMULATOR_BIN ||= join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '.build', 'release', 'phone-auth-emulator');

/** The backend under test: `Authorization: Bearer <ID token>` checked against the emulator's keys (as a service using
 * a JWT library with Google's keys would, pointed at the emulator); admin-only routes need the `role` claim. */
async function handle(headers, { adminOnly = false } = {}) {
  const token = (headers.authorization || '').replace(/^Bearer /, '');
  if (!token) return 401;
  const [h, p, s] = token.split('.');
  const { kid } = JSON.parse(Buffer.from(h, 'base64url'));
  const base = process.env.PHONE_AUTH_EMULATOR_URL;
  const { keys } = await (await fetch(base + '/www.googleapis.com/service_accounts/v1/jwk/securetoken@system.gserviceaccount.com')).json();
  const jwk = keys.find((k) => k.kid === kid);
  if (!jwk || !verify('RSA-SHA256', Buffer.from(`${h}.${p}`), createPublicKey({ key: jwk, format: 'jwk' }), Buffer.from(s, 'base64url'))) return 401;
  const claims = JSON.parse(Buffer.from(p, 'base64url'));
  if (claims.aud !== process.env.GCLOUD_PROJECT || claims.exp * 1000 <= Date.now()) return 401;
  return adminOnly && claims.role !== 'admin' ? 403 : 200;
}

describe('with the Vitest global setup', () => {
  let teardown;
  before(async () => { teardown = await vitestSetup(); });
  after(async () => { await teardown(); });
  beforeEach(() => reset());

  test('an admin may, a viewer may not', async () => {
    assert.equal(await handle({ authorization: 'Bearer ' + await mintToken('ada', { claims: { role: 'admin' } }) }, { adminOnly: true }), 200);
    assert.equal(await handle({ authorization: 'Bearer ' + await mintToken('bob', { claims: { role: 'viewer' } }) }, { adminOnly: true }), 403);
    assert.equal(await handle({}), 401);
  });

  test('a tampered token is refused', async () => {
    const token = await mintToken('eve', { claims: { role: 'viewer' } });
    const [h, , s] = token.split('.');
    const forged = Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(token.split('.')[1], 'base64url')), role: 'admin' })).toString('base64url');
    assert.equal(await handle({ authorization: `Bearer ${h}.${forged}.${s}` }, { adminOnly: true }), 401);
  });

  test('the setup\'s fictional number signs in', async () => {
    const base = process.env.PHONE_AUTH_EMULATOR_URL + '/identitytoolkit.googleapis.com/v1/accounts:';
    const post = async (op, body) => (await fetch(base + op + '?key=k', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) })).json();
    const { sessionInfo } = await post('sendVerificationCode', { phoneNumber: '+15555550100' });
    assert.equal(await waitForCode('+15555550100'), '654321');
    const signedIn = await post('signInWithPhoneNumber', { sessionInfo, code: '654321' });
    assert.equal(await handle({ authorization: 'Bearer ' + signedIn.idToken }), 200);
  });
});

test('the Jest global setup and teardown', async () => {
  await jestSetup();
  try {
    assert.equal(process.env.FIREBASE_AUTH_EMULATOR_HOST, globalThis.__PHONE_AUTH_EMULATOR__.host);
    assert.equal(await handle({ authorization: 'Bearer ' + await mintToken('jo') }), 200);
  } finally {
    await jestTeardown();
  }
  assert.equal(process.env.FIREBASE_AUTH_EMULATOR_HOST, undefined);
});

test('the Playwright worker fixture, driven as Playwright drives it', async () => {
  const [fixture, { scope }] = emulatorFixture;
  assert.equal(scope, 'worker');
  let seen;
  await fixture({}, async (emulator) => {
    seen = emulator;
    assert.equal(emulator.workerIndex, 3);
    assert.equal(process.env.FIREBASE_AUTH_EMULATOR_HOST, undefined, 'per worker: nothing process-wide');
    await mintToken('pw', { url: emulator.url, project: emulator.project });
    await freshEmulatorFixture({ emulator }, async (fresh) => {
      assert.equal((await reset({ url: fresh.url, project: fresh.project })).users, 0);
    });
  }, { workerIndex: 3 });
  await assert.rejects(fetch(seen.url + '/'), 'stopped after the worker');
});
