// Drives the real Firebase JS SDK's revokeAccessToken (POST /v2/accounts:revokeToken) against a running emulator: an
// Apple user signs in with a credential, revokes an Apple access token (the SDK sends its ID token, providerId
// apple.com and tokenType ACCESS_TOKEN), then a deleted user's ID token is refused with the SDK's own error, and a
// signed-out auth revokes nothing (the SDK sends no request).
// Usage: FIREBASE_SDK_DIR=… EMULATOR_URL=http://127.0.0.1:9099 node revoke_token.cjs [tag]
// Exits 0 and prints a JSON summary; exits 1 with the failures.
const { initializeApp, auth, url, project, recordExchanges, expectations } = require('./sdk.cjs');

const tag = process.argv[2] || String(Date.now());
const { wire } = recordExchanges();
const { failures, expect, expectError } = expectations();

(async () => {
  const app = initializeApp({ apiKey: 'fake-api-key', projectId: project }, 'revoke-' + tag);
  const a = auth.initializeAuth(app, { persistence: auth.inMemoryPersistence });
  auth.connectAuthEmulator(a, url, { disableWarnings: true });
  const out = {};
  const appleToken = JSON.stringify({ sub: `ap-${tag}`, email: `apple-${tag}@example.com` });
  const cred = await auth.signInWithCredential(a, new auth.OAuthProvider('apple.com').credential({ idToken: appleToken }));
  out.uid = cred.user.uid;
  await auth.revokeAccessToken(a, `apple-access-token-${tag}`);
  const sent = wire.filter((w) => w.path.endsWith('accounts:revokeToken'));
  expect('one revokeToken request', sent.length === 1, sent);
  out.path = sent[0] && sent[0].path;
  out.body = sent[0] && JSON.parse(sent[0].body);
  out.status = sent[0] && sent[0].status;
  out.response = sent[0] && JSON.parse(sent[0].response);
  expect('the body names apple.com and ACCESS_TOKEN', out.body && out.body.providerId === 'apple.com' && out.body.tokenType === 'ACCESS_TOKEN', out.body);
  // The user deleted meanwhile (by an admin): the ID token the SDK holds names nobody, and the SDK gets its own error.
  const del = await fetch(`${url}/identitytoolkit.googleapis.com/v1/projects/${project}/accounts:delete`, {
    method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: 'Bearer owner' },
    body: JSON.stringify({ localId: cred.user.uid }),
  });
  expect('admin delete', del.status === 200, await del.text());
  const e = await expectError('a deleted user', 'auth/user-token-expired', () => auth.revokeAccessToken(a, 'again'));
  out.deletedUser = e && e.code;
  await auth.signOut(a);
  const before = wire.length;
  await auth.revokeAccessToken(a, 'nobody');
  out.signedOutRequests = wire.slice(before).filter((w) => w.path.endsWith('accounts:revokeToken')).length;
  if (failures.length) { console.error(JSON.stringify(failures)); process.exit(1); }
  console.log(JSON.stringify(out));
  process.exit(0);
})().catch((e) => { console.error(JSON.stringify({ code: e.code, message: e.message })); process.exit(1); });
