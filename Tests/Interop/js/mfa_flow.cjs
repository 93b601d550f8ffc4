// Drives the real Firebase JS SDK's SMS multi-factor flow against a running emulator (issue 13, "How to check it"):
// createUserWithEmailAndPassword → sendEmailVerification → applyActionCode with the oob inbox's code → reload →
// multiFactor(user).getSession → PhoneAuthProvider.verifyPhoneNumber({phoneNumber, session}) → PhoneMultiFactorGenerator
// .assertion → enroll → signOut → signInWithEmailAndPassword → auth/multi-factor-auth-required → getMultiFactorResolver →
// verifyPhoneNumber({multiFactorHint, session}) → a wrong code gives auth/invalid-verification-code → the right one
// signs in → the token has firebase.sign_in_second_factor "phone" → getIdToken(true) keeps it → unenroll.
// Negative cases: auth/unverified-email (enroll before verifying), auth/second-factor-already-in-use (the same number
// twice), auth/unsupported-first-factor (enroll a user signed in with signInWithPhoneNumber).
// Usage: FIREBASE_SDK_DIR=<dir with node_modules/@firebase/{app,auth,...}> EMULATOR_URL=http://127.0.0.1:9099 \
//        node mfa_flow.cjs PHONE [CODE]
// With CODE (a fictional number's preset code) every code is CODE; without it each code is read from the emulator's
// verification-code inbox (GET /emulator/v1/projects/{p}/verificationCodes?phoneNumber=…), matched by sessionInfo.
// Prints one JSON summary line and exits 0 when every expectation holds; otherwise prints the failures (and the
// exchanges so far) to stderr and exits 1. WIRE_LOG=1 prints every request/response to stderr.
const { initializeApp, auth, url, project, recordExchanges, expectations } = require('./sdk.cjs');
const phone = process.argv[2] || '+16505554567';
const presetCode = process.argv[3] || null;
const tag = Date.now().toString(36) + Math.floor(Math.random() * 1e6).toString(36);

const { wire, realFetch } = recordExchanges();

const { failures, expect, expectError } = expectations();

const verifier = { type: 'recaptcha', verify: async () => 'fake-recaptcha-token', _reset() {} };

async function inbox(query) {
  const r = await realFetch(`${url}/emulator/v1/projects/${project}/${query}`);
  if (r.status !== 200) throw new Error(`inbox ${query}: HTTP ${r.status} ${await r.text()}`);
  return r.json();
}

// The code for a verification id: the preset code of a fictional number, or the inbox entry with that sessionInfo.
async function codeFor(verificationId, kind) {
  if (presetCode) return presetCode;
  const { verificationCodes } = await inbox(`verificationCodes?phoneNumber=${encodeURIComponent(phone)}`);
  const entry = (verificationCodes || []).find((c) => c.sessionInfo === verificationId);
  if (!entry) throw new Error(`no inbox code for session ${verificationId}: ${JSON.stringify(verificationCodes)}`);
  expect(`inbox kind ${kind}`, entry.kind === kind, entry.kind);
  return entry.code;
}

function wrongCode(code) { return code.split('').map((d) => String((Number(d) + 1) % 10)).join(''); }

async function verifiedPasswordUser(a, email) {
  const created = await auth.createUserWithEmailAndPassword(a, email, 'secret-mfa');
  await auth.sendEmailVerification(created.user);
  const { oobCodes } = await inbox(`oobCodes?email=${encodeURIComponent(email)}`);
  const oob = oobCodes.filter((c) => c.requestType === 'VERIFY_EMAIL' || !c.requestType).pop();
  await auth.applyActionCode(a, oob.oobCode);
  await created.user.reload();
  expect('emailVerified after applyActionCode + reload', created.user.emailVerified === true, created.user.emailVerified);
  return created.user;
}

async function startEnrollment(a, user, number) {
  const session = await auth.multiFactor(user).getSession();
  return new auth.PhoneAuthProvider(a).verifyPhoneNumber({ phoneNumber: number, session }, verifier);
}

(async () => {
  const app = initializeApp({ apiKey: 'fake-api-key', projectId: project }, 'mfa-' + tag);
  const a = auth.initializeAuth(app, { persistence: auth.inMemoryPersistence });
  auth.connectAuthEmulator(a, url, { disableWarnings: true });
  a.settings.appVerificationDisabledForTesting = true;
  const out = { phone, fictional: Boolean(presetCode) };

  // 1. Enrolling before the email is verified.
  const unverified = await auth.createUserWithEmailAndPassword(a, `unverified-${tag}@example.com`, 'secret-mfa');
  out.unverifiedEmail = (await expectError('enroll before verifying', 'auth/unverified-email',
    () => startEnrollment(a, unverified.user, phone)))?.code;
  await auth.signOut(a);

  // 2. Enrollment of a verified email/password user.
  const email = `mfa-${tag}@example.com`;
  const user = await verifiedPasswordUser(a, email);
  const enrollId = await startEnrollment(a, user, phone);
  const enrollCode = await codeFor(enrollId, 'mfaEnrollment');
  await auth.multiFactor(user).enroll(auth.PhoneMultiFactorGenerator.assertion(
    auth.PhoneAuthProvider.credential(enrollId, enrollCode)), 'work phone');
  const enrolled = auth.multiFactor(user).enrolledFactors;
  expect('one enrolled factor', enrolled.length === 1, enrolled);
  expect('enrolled factor is phone', enrolled[0]?.factorId === 'phone', enrolled[0]?.factorId);
  expect('enrolled phone number', enrolled[0]?.phoneNumber === phone, enrolled[0]?.phoneNumber);
  expect('enrolled display name', enrolled[0]?.displayName === 'work phone', enrolled[0]?.displayName);
  const enrollTok = await user.getIdTokenResult();
  expect('token after enroll has the second factor', enrollTok.claims.firebase?.sign_in_second_factor === 'phone', enrollTok.claims.firebase);
  out.enrolled = enrolled.map((f) => ({ factorId: f.factorId, phoneNumber: f.phoneNumber, displayName: f.displayName, uid: f.uid }));

  // 3. The same number twice.
  out.alreadyInUse = (await expectError('enroll the same number twice', 'auth/second-factor-already-in-use',
    () => startEnrollment(a, user, phone)))?.code;
  await auth.signOut(a);

  // 4. Password sign-in now needs the second factor.
  const mfaErr = await expectError('password sign-in of an enrolled user', 'auth/multi-factor-auth-required',
    () => auth.signInWithEmailAndPassword(a, email, 'secret-mfa'));
  out.mfaRequired = mfaErr?.code;
  expect('no current user while MFA is pending', a.currentUser === null, a.currentUser?.uid);
  const resolver = auth.getMultiFactorResolver(a, mfaErr);
  const hint = resolver.hints[0];
  expect('one hint', resolver.hints.length === 1, resolver.hints);
  expect('hint is the enrolled factor', hint?.uid === enrolled[0]?.uid, { hint: hint?.uid, enrolled: enrolled[0]?.uid });
  expect('hint phone number is masked', typeof hint?.phoneNumber === 'string' && hint.phoneNumber !== phone
    && hint.phoneNumber.endsWith(phone.slice(-4)), hint?.phoneNumber);
  out.hint = { factorId: hint?.factorId, phoneNumber: hint?.phoneNumber, displayName: hint?.displayName };
  const signInId = await new auth.PhoneAuthProvider(a).verifyPhoneNumber({ multiFactorHint: hint, session: resolver.session }, verifier);
  const signInCode = await codeFor(signInId, 'mfaSignIn');
  out.wrongCode = (await expectError('wrong second-factor code', 'auth/invalid-verification-code',
    () => resolver.resolveSignIn(auth.PhoneMultiFactorGenerator.assertion(
      auth.PhoneAuthProvider.credential(signInId, wrongCode(signInCode))))))?.code;
  const cred = await resolver.resolveSignIn(auth.PhoneMultiFactorGenerator.assertion(
    auth.PhoneAuthProvider.credential(signInId, signInCode)));
  expect('signed in as the enrolled user', cred.user.uid === user.uid, { got: cred.user.uid, want: user.uid });
  const tok = await cred.user.getIdTokenResult();
  expect('token claims sign_in_second_factor', tok.claims.firebase?.sign_in_second_factor === 'phone', tok.claims.firebase);
  expect('token claims second_factor_identifier', tok.claims.firebase?.second_factor_identifier === hint?.uid, tok.claims.firebase);
  expect('token sign_in_provider password', tok.signInProvider === 'password', tok.signInProvider);
  expect('IdTokenResult.signInSecondFactor', tok.signInSecondFactor === 'phone', tok.signInSecondFactor);
  out.signInProvider = tok.signInProvider;
  out.signInSecondFactor = tok.claims.firebase?.sign_in_second_factor;
  // A forced refresh goes to securetoken (the token itself may be byte-identical when minted in the same second).
  const before = wire.length;
  const refreshed = await cred.user.getIdToken(true);
  const refreshedTok = await cred.user.getIdTokenResult();
  expect('getIdToken(true) refreshed through securetoken', wire.slice(before).some((w) => w.path.endsWith('/v1/token') && w.status === 200),
    wire.slice(before).map((w) => w.path));
  expect('getIdTokenResult is the refreshed token', refreshedTok.token === refreshed);
  expect('refresh keeps sign_in_second_factor', refreshedTok.claims.firebase?.sign_in_second_factor === 'phone', refreshedTok.claims.firebase);
  expect('refresh keeps second_factor_identifier', refreshedTok.claims.firebase?.second_factor_identifier === hint?.uid, refreshedTok.claims.firebase);
  out.refreshedSecondFactor = refreshedTok.claims.firebase?.sign_in_second_factor;
  out.refreshedDiffers = refreshed !== tok.token;

  // 5. Unenroll: no factors left, and the password alone signs in again.
  await auth.multiFactor(cred.user).unenroll(hint);
  expect('no factors after unenroll', auth.multiFactor(cred.user).enrolledFactors.length === 0, auth.multiFactor(cred.user).enrolledFactors);
  await auth.signOut(a);
  const plain = await auth.signInWithEmailAndPassword(a, email, 'secret-mfa');
  const plainTok = await plain.user.getIdTokenResult();
  expect('password alone after unenroll', plain.user.uid === user.uid && plainTok.signInSecondFactor === null, plainTok.claims.firebase);
  out.afterUnenroll = { factors: auth.multiFactor(plain.user).enrolledFactors.length, signInSecondFactor: plainTok.signInSecondFactor };
  await auth.signOut(a);

  // 6. A phone first factor cannot enroll a second factor.
  const confirmation = await auth.signInWithPhoneNumber(a, phone, verifier);
  const phoneCred = await confirmation.confirm(await codeFor(confirmation.verificationId, 'signIn'));
  out.unsupportedFirstFactor = (await expectError('enroll a phone-first-factor user', 'auth/unsupported-first-factor',
    () => startEnrollment(a, phoneCred.user, phone)))?.code;
  await auth.signOut(a);

  out.requests = wire.map((w) => `${w.method} ${w.path.replace(/^\/[^/]+\.googleapis\.com/, '')} ${w.status}`);
  if (failures.length) {
    console.error(JSON.stringify({ failures, summary: out }));
    process.exit(1);
  }
  console.log(JSON.stringify(out));
  process.exit(0);
})().catch((e) => {
  const last = wire.slice(-3);
  console.error(JSON.stringify({ code: e.code, message: e.message, failures, lastExchanges: last }));
  process.exit(1);
});
