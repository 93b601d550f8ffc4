// Drives the real Firebase JS SDK's TOTP multi-factor flow against a running emulator (issue 27, "How to check it"):
// a verified email/password user → multiFactor(user).getSession → TotpMultiFactorGenerator.generateSecret → a code
// computed by an independent TOTP implementation (pyotp, run as TOTP_PYTHON -c …) at the emulator clock's time →
// assertionForEnrollment → enroll → signOut → signInWithEmailAndPassword → auth/multi-factor-auth-required →
// getMultiFactorResolver → a wrong code gives auth/invalid-verification-code → assertionForSignIn with a pyotp code
// signs in (sign_in_second_factor "totp") → again with the emulator's current-code helper → a phone factor beside it
// (the fictional number, code 123456) → the resolver offers both and each signs in.
// A step whose code verified once is spent (replays are refused), so the driver advances the emulator clock 30 s
// between uses of a factor.
// Usage: FIREBASE_SDK_DIR=… EMULATOR_URL=http://127.0.0.1:9099 TOTP_PYTHON=.venv/bin/python node totp_flow.cjs
// The project must have TOTP enabled (mfa.providerConfigs). Prints one JSON summary line and exits 0 when every
// expectation holds; otherwise prints the failures to stderr and exits 1. WIRE_LOG=1 prints every exchange.
const { execFileSync } = require('child_process');
const python = process.env.TOTP_PYTHON;
if (!python) { console.error('set TOTP_PYTHON (a python with pyotp)'); process.exit(2); }
const { initializeApp, auth, url, project, recordExchanges, expectations } = require('./sdk.cjs');
const phone = '+16505554567';
const tag = Date.now().toString(36) + Math.floor(Math.random() * 1e6).toString(36);

const { wire, realFetch } = recordExchanges();
const { failures, expect, expectError } = expectations();

async function emulator(method, p, body) {
  const r = await realFetch(`${url}/emulator/v1/${p}`, { method, headers: { 'content-type': 'application/json' }, body: body ? JSON.stringify(body) : undefined });
  if (r.status !== 200) throw new Error(`${method} ${p}: HTTP ${r.status} ${await r.text()}`);
  return r.json();
}

// pyotp's code for the secret at the emulator clock's time (the emulator's codes follow its clock, not the wall's).
async function pyotpCode(secretKey) {
  const { nowMillis } = await emulator('GET', 'clock');
  return execFileSync(python, ['-c', 'import pyotp, sys; print(pyotp.TOTP(sys.argv[1]).at(int(sys.argv[2])))',
    secretKey, String(Math.floor(nowMillis / 1000))], { encoding: 'utf8' }).trim();
}

const nextStep = () => emulator('POST', 'clock:advance', { seconds: 30 });
const verifier = { type: 'recaptcha', verify: async () => 'fake-recaptcha-token', _reset() {} };

async function mfaResolver(a, email) {
  const err = await expectError('password sign-in of an enrolled user', 'auth/multi-factor-auth-required',
    () => auth.signInWithEmailAndPassword(a, email, 'secret-totp'));
  return auth.getMultiFactorResolver(a, err);
}

(async () => {
  const app = initializeApp({ apiKey: 'fake-api-key', projectId: project }, 'totp-' + tag);
  const a = auth.initializeAuth(app, { persistence: auth.inMemoryPersistence });
  auth.connectAuthEmulator(a, url, { disableWarnings: true });
  a.settings.appVerificationDisabledForTesting = true;
  const out = {};

  // 1. A verified email/password user.
  const email = `totp-${tag}@example.com`;
  const created = await auth.createUserWithEmailAndPassword(a, email, 'secret-totp');
  await auth.sendEmailVerification(created.user);
  const { oobCodes } = await emulator('GET', `projects/${project}/oobCodes?email=${encodeURIComponent(email)}`);
  await auth.applyActionCode(a, oobCodes.pop().oobCode);
  await created.user.reload();
  const user = created.user;
  out.uid = user.uid;

  // 2. TOTP enrollment: the SDK's secret, pyotp's code.
  const secret = await auth.TotpMultiFactorGenerator.generateSecret(await auth.multiFactor(user).getSession());
  out.secret = { length: secret.secretKey.length, hashingAlgorithm: secret.hashingAlgorithm, codeLength: secret.codeLength,
    codeIntervalSeconds: secret.codeIntervalSeconds, deadline: secret.enrollmentCompletionDeadline };
  out.qr = secret.generateQrCodeUrl('ada', 'Emulator');
  await auth.multiFactor(user).enroll(auth.TotpMultiFactorGenerator.assertionForEnrollment(secret, await pyotpCode(secret.secretKey)), 'authenticator');
  const factors = auth.multiFactor(user).enrolledFactors;
  out.enrolled = factors.map((f) => ({ factorId: f.factorId, displayName: f.displayName, uid: f.uid }));
  out.enrollSecondFactor = (await user.getIdTokenResult()).claims.firebase?.sign_in_second_factor;
  await auth.signOut(a);

  // 3. Sign-in: the resolver's TOTP hint, a wrong code, then pyotp's code of the next step.
  await nextStep();
  let resolver = await mfaResolver(a, email);
  const hint = resolver.hints[0];
  out.hint = { factorId: hint.factorId, uid: hint.uid, displayName: hint.displayName };
  const good = await pyotpCode(secret.secretKey);
  const wrong = good.split('').map((d) => String((Number(d) + 5) % 10)).join('');
  out.wrongCode = (await expectError('a wrong TOTP code', 'auth/invalid-verification-code',
    () => resolver.resolveSignIn(auth.TotpMultiFactorGenerator.assertionForSignIn(hint.uid, wrong))))?.code;
  let cred = await resolver.resolveSignIn(auth.TotpMultiFactorGenerator.assertionForSignIn(hint.uid, good));
  let tok = await cred.user.getIdTokenResult();
  out.pyotpSignIn = { secondFactor: tok.claims.firebase?.sign_in_second_factor, identifier: tok.claims.firebase?.second_factor_identifier,
    provider: tok.signInProvider };
  out.refreshedSecondFactor = (await cred.user.getIdTokenResult(true)).claims.firebase?.sign_in_second_factor;
  await auth.signOut(a);

  // 4. The same code again (the step is spent), then the emulator's current-code helper after the next step.
  resolver = await mfaResolver(a, email);
  out.replay = (await expectError('the spent step again', 'auth/invalid-verification-code',
    () => resolver.resolveSignIn(auth.TotpMultiFactorGenerator.assertionForSignIn(hint.uid, good))))?.code;
  await nextStep();
  const helper = await emulator('GET', `projects/${project}/totpCode?localId=${user.uid}&mfaEnrollmentId=${hint.uid}`);
  expect('helper agrees with pyotp', helper.code === await pyotpCode(secret.secretKey), helper);
  cred = await resolver.resolveSignIn(auth.TotpMultiFactorGenerator.assertionForSignIn(hint.uid, helper.code));
  out.helperSignIn = (await cred.user.getIdTokenResult()).claims.firebase?.sign_in_second_factor;

  // 5. A phone factor beside it (signed in with the second factor, as enrolling another requires).
  const enrollId = await new auth.PhoneAuthProvider(a).verifyPhoneNumber({ phoneNumber: phone, session: await auth.multiFactor(cred.user).getSession() }, verifier);
  await auth.multiFactor(cred.user).enroll(auth.PhoneMultiFactorGenerator.assertion(auth.PhoneAuthProvider.credential(enrollId, '123456')), 'phone');
  out.both = auth.multiFactor(cred.user).enrolledFactors.map((f) => f.factorId);
  await auth.signOut(a);

  // 6. The resolver offers both; each signs in.
  resolver = await mfaResolver(a, email);
  out.hints = resolver.hints.map((h) => h.factorId);
  const phoneHint = resolver.hints.find((h) => h.factorId === 'phone');
  const smsId = await new auth.PhoneAuthProvider(a).verifyPhoneNumber({ multiFactorHint: phoneHint, session: resolver.session }, verifier);
  cred = await resolver.resolveSignIn(auth.PhoneMultiFactorGenerator.assertion(auth.PhoneAuthProvider.credential(smsId, '123456')));
  out.choosePhone = (await cred.user.getIdTokenResult()).claims.firebase?.sign_in_second_factor;
  await auth.signOut(a);
  await nextStep();
  resolver = await mfaResolver(a, email);
  const totpHint = resolver.hints.find((h) => h.factorId === 'totp');
  cred = await resolver.resolveSignIn(auth.TotpMultiFactorGenerator.assertionForSignIn(totpHint.uid, await pyotpCode(secret.secretKey)));
  out.chooseTotp = (await cred.user.getIdTokenResult()).claims.firebase?.sign_in_second_factor;
  out.totpEnrollmentId = totpHint.uid;
  await auth.signOut(a);

  out.requests = wire.map((e) => `${e.method} ${e.path} ${e.status}`);
  if (failures.length) {
    console.error(JSON.stringify({ failures, out, wire: wire.slice(-6) }, null, 1));
    process.exit(1);
  }
  console.log(JSON.stringify(out));
  process.exit(0);
})().catch((e) => {
  console.error('driver crashed:', e && (e.stack || e), JSON.stringify({ failures, wire: wire.slice(-6) }, null, 1));
  process.exit(1);
});
