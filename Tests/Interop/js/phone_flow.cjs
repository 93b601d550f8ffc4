// Drives the real Firebase JS SDK's phone sign-in against a running emulator, as js-sdk-wire.md describes.
// Usage: FIREBASE_SDK_DIR=<dir with node_modules/@firebase/{app,auth,...}> EMULATOR_URL=http://127.0.0.1:9099 \
//        node phone_flow.cjs [+16505554567] [123456]
// Exits 0 and prints a JSON summary on success; exits 1 with the SDK error code otherwise.
const { initializeApp, auth } = require('./sdk.cjs');

const url = process.env.EMULATOR_URL || 'http://127.0.0.1:9099';
const phone = process.argv[2] || '+16505554567';
const code = process.argv[3] || '123456';

(async () => {
  const app = initializeApp({ apiKey: 'fake-api-key', projectId: process.env.PROJECT_ID || 'demo-phone' }, 'interop-' + Date.now());
  const a = auth.initializeAuth(app, { persistence: auth.inMemoryPersistence });
  auth.connectAuthEmulator(a, url, { disableWarnings: true });
  a.settings.appVerificationDisabledForTesting = true;
  const verifier = { type: 'recaptcha', verify: async () => 'fake-recaptcha-token', _reset() {} };
  const confirmation = await auth.signInWithPhoneNumber(a, phone, verifier);
  const cred = await confirmation.confirm(code);
  const result = await cred.user.getIdTokenResult();
  const refreshed = await cred.user.getIdToken(true);
  const info = auth.getAdditionalUserInfo(cred);
  const out = {
    uid: cred.user.uid,
    phoneNumber: cred.user.phoneNumber,
    providerId: cred.providerId,
    providerData: cred.user.providerData.map((p) => ({ providerId: p.providerId, uid: p.uid, phoneNumber: p.phoneNumber })),
    isNewUser: info && info.isNewUser,
    signInProvider: result.signInProvider,
    claims: result.claims,
    refreshedDiffers: refreshed !== result.token,
    refreshedParts: refreshed.split('.').length,
    creationTime: cred.user.metadata.creationTime,
  };
  await auth.signOut(a);
  console.log(JSON.stringify(out));
  process.exit(0);
})().catch((e) => { console.error(JSON.stringify({ code: e.code, message: e.message })); process.exit(1); });
