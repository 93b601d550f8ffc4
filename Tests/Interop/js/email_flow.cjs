// Drives the real Firebase JS SDK's email + password flow against a running emulator (issue 13):
// createUserWithEmailAndPassword → sendEmailVerification → applyActionCode with the inbox's code →
// signInWithEmailAndPassword, plus fetchSignInMethodsForEmail and a wrong password.
// Usage: FIREBASE_SDK_DIR=<dir with node_modules/@firebase/{app,auth,...}> EMULATOR_URL=http://127.0.0.1:9099 node email_flow.cjs EMAIL
// Exits 0 and prints a JSON summary on success; exits 1 with the SDK error code otherwise.
const { initializeApp, auth } = require('./sdk.cjs');

const url = process.env.EMULATOR_URL || 'http://127.0.0.1:9099';
const project = process.env.PROJECT_ID || 'demo-phone';
const email = process.argv[2] || 'js-' + Date.now() + '@example.com';

(async () => {
  const app = initializeApp({ apiKey: 'fake-api-key', projectId: project }, 'interop-' + Date.now());
  const a = auth.initializeAuth(app, { persistence: auth.inMemoryPersistence });
  auth.connectAuthEmulator(a, url, { disableWarnings: true });
  const created = await auth.createUserWithEmailAndPassword(a, email, 'secret-js');
  await auth.sendEmailVerification(created.user);
  const inbox = await (await fetch(`${url}/emulator/v1/projects/${project}/oobCodes?email=${encodeURIComponent(email)}`)).json();
  const code = inbox.oobCodes[inbox.oobCodes.length - 1].oobCode;
  const checked = await auth.checkActionCode(a, code);
  await auth.applyActionCode(a, code);
  await auth.signOut(a);
  const methods = await auth.fetchSignInMethodsForEmail(a, email);
  let wrong = null;
  try { await auth.signInWithEmailAndPassword(a, email, 'not-the-password'); } catch (e) { wrong = e.code; }
  const cred = await auth.signInWithEmailAndPassword(a, email, 'secret-js');
  const result = await cred.user.getIdTokenResult();
  const out = {
    uid: cred.user.uid, sameUser: cred.user.uid === created.user.uid, email: cred.user.email,
    emailVerified: cred.user.emailVerified, isAnonymous: cred.user.isAnonymous,
    providerData: cred.user.providerData.map((p) => p.providerId), checkedOperation: checked.operation,
    methods, wrong, signInProvider: result.signInProvider, claims: result.claims,
  };
  await auth.signOut(a);
  console.log(JSON.stringify(out));
  process.exit(0);
})().catch((e) => { console.error(JSON.stringify({ code: e.code, message: e.message })); process.exit(1); });
