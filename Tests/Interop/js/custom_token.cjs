// Drives the real Firebase JS SDK's signInWithCustomToken against a running emulator, then links a phone number to
// that user (linkWithPhoneNumber) and checks the custom claims survive a forced refresh.
// Usage: FIREBASE_SDK_DIR=<dir with node_modules/@firebase/{app,auth,...}> EMULATOR_URL=http://127.0.0.1:9099 \
//        node custom_token.cjs <custom token> [+16505554567] [123456] [tenantId]
// Exits 0 and prints a JSON summary on success; exits 1 with the SDK error code otherwise.
const { initializeApp, auth } = require('./sdk.cjs');

const url = process.env.EMULATOR_URL || 'http://127.0.0.1:9099';
const token = process.argv[2];
const phone = process.argv[3] || '+16505554567';
const code = process.argv[4] || '123456';
const tenant = process.argv[5] || '';

(async () => {
  const app = initializeApp({ apiKey: 'fake-api-key', projectId: process.env.PROJECT_ID || 'demo-phone' }, 'custom-' + Date.now());
  const a = auth.initializeAuth(app, { persistence: auth.inMemoryPersistence });
  auth.connectAuthEmulator(a, url, { disableWarnings: true });
  a.settings.appVerificationDisabledForTesting = true;
  if (tenant) a.tenantId = tenant;
  const out = {};
  // A token for another tenant (or garbage) is refused with the SDK's own error code.
  try {
    await auth.signInWithCustomToken(a, 'not-a-token');
    out.garbage = 'accepted';
  } catch (e) {
    out.garbage = e.code;
  }
  const cred = await auth.signInWithCustomToken(a, token);
  const result = await cred.user.getIdTokenResult();
  out.uid = cred.user.uid;
  out.isNewUser = auth.getAdditionalUserInfo(cred).isNewUser;
  out.signInProvider = result.signInProvider;
  out.claims = result.claims;
  out.tenantId = cred.user.tenantId;
  out.isAnonymous = cred.user.isAnonymous;
  // One second later on the emulator clock, so the refreshed token is a new one (same claims, new iat).
  await fetch(url + '/emulator/v1/clock:advance', { method: 'POST', body: '{"seconds":1}', headers: { 'Content-Type': 'application/json' } });
  const refreshed = await cred.user.getIdTokenResult(true);
  out.refreshedClaims = refreshed.claims;
  out.refreshedDiffers = refreshed.token !== result.token;
  if (!tenant) {
    const verifier = { type: 'recaptcha', verify: async () => 'fake-recaptcha-token', _reset() {} };
    const confirmation = await auth.linkWithPhoneNumber(cred.user, phone, verifier);
    const linked = await confirmation.confirm(code);
    out.linkedUid = linked.user.uid;
    out.linkedPhone = linked.user.phoneNumber;
    out.linkedProviders = linked.user.providerData.map((p) => p.providerId);
  }
  await auth.signOut(a);
  console.log(JSON.stringify(out));
  process.exit(0);
})().catch((e) => { console.error(JSON.stringify({ code: e.code, message: e.message })); process.exit(1); });
