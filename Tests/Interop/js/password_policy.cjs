// The real Firebase JS SDK against a configured password policy (issue 27 item 3): validatePassword for the project and
// for a tenant (the SDK fetches GET /v2/passwordPolicy and checks locally), createUserWithEmailAndPassword refused
// with auth/password-does-not-meet-requirements and accepted once compliant, and (forceUpgradeOnSignin) a sign-in with
// an old non-compliant password refused the same way.
// Usage: FIREBASE_SDK_DIR=… EMULATOR_URL=http://127.0.0.1:9099 node password_policy.cjs TENANT_ID OLD_EMAIL OLD_PASSWORD
// Prints a JSON summary and exits 0; exits 1 with the failures (or the SDK error) otherwise.
const { initializeApp, auth, expectations, recordExchanges } = require('./sdk.cjs');

const url = process.env.EMULATOR_URL || 'http://127.0.0.1:9099';
const project = process.env.PROJECT_ID || 'demo-phone';
const [tenantId, oldEmail, oldPassword] = process.argv.slice(2);

const pick = (s) => ({
  isValid: s.isValid, meetsMinPasswordLength: s.meetsMinPasswordLength, meetsMaxPasswordLength: s.meetsMaxPasswordLength,
  containsLowercaseLetter: s.containsLowercaseLetter, containsUppercaseLetter: s.containsUppercaseLetter,
  containsNumericCharacter: s.containsNumericCharacter, containsNonAlphanumericCharacter: s.containsNonAlphanumericCharacter,
});

(async () => {
  const { wire } = recordExchanges();
  const { failures, expect, expectError } = expectations();
  const app = initializeApp({ apiKey: 'fake-api-key', projectId: project }, 'pwpolicy-' + Date.now());
  const a = auth.initializeAuth(app, { persistence: auth.inMemoryPersistence });
  auth.connectAuthEmulator(a, url, { disableWarnings: true });

  const weak = await auth.validatePassword(a, 'weakpass');
  const strong = await auth.validatePassword(a, 'Str0ng!pass');
  const policy = weak.passwordPolicy;
  const refused = await expectError('weak sign-up', 'auth/password-does-not-meet-requirements',
    () => auth.createUserWithEmailAndPassword(a, 'weak-' + Date.now() + '@example.com', 'weakpass'));
  const created = await auth.createUserWithEmailAndPassword(a, 'strong-' + Date.now() + '@example.com', 'Str0ng!pass');
  await auth.signOut(a);
  const oldRefused = await expectError('old password sign-in (forceUpgradeOnSignin)', 'auth/password-does-not-meet-requirements',
    () => auth.signInWithEmailAndPassword(a, oldEmail, oldPassword));

  a.tenantId = tenantId;
  const tenantWeak = await auth.validatePassword(a, 'weakpass');
  const tenantCreated = await auth.createUserWithEmailAndPassword(a, 'tenant-' + Date.now() + '@example.com', 'weakpass');
  expect('tenant user in its tenant', tenantCreated.user.tenantId === tenantId, tenantCreated.user.tenantId);

  const policyFetches = wire.filter((w) => w.path.endsWith('/v2/passwordPolicy')).map((w) => w.status);
  const out = {
    weak: pick(weak), strong: pick(strong), tenantWeak: pick(tenantWeak),
    policy: { customStrengthOptions: policy.customStrengthOptions, enforcementState: policy.enforcementState,
              forceUpgradeOnSignin: policy.forceUpgradeOnSignin, allowedNonAlphanumericCharacters: policy.allowedNonAlphanumericCharacters },
    tenantPolicy: tenantWeak.passwordPolicy.customStrengthOptions,
    refusedMessage: refused && refused.message, oldRefusedMessage: oldRefused && oldRefused.message,
    createdUid: created.user.uid, policyFetches,
  };
  if (failures.length) { console.error(JSON.stringify({ failures, out })); process.exit(1); }
  console.log(JSON.stringify(out));
  process.exit(0);
})().catch((e) => { console.error(JSON.stringify({ code: e.code, message: e.message })); process.exit(1); });
