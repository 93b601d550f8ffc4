// Drives the real Firebase JS SDK's federated sign-in against a running emulator (issue 25): signInWithCredential for
// Google (JSON claims and an unsigned JWT as the ID token), Apple with a raw nonce (and a wrong one), GitHub with JSON
// claims as the access token (and an opaque one), an `oidc.` provider; a phone user links Google and a Google user links
// a (fictional) phone number; reauthenticateWithCredential (and two user mismatches); unlink; getAdditionalUserInfo;
// fetchSignInMethodsForEmail; account-exists-with-different-credential, credential-already-in-use and
// email-already-in-use. The test enables fetchSignInMethodsForEmail (emailPrivacyConfig) before running it.
// Usage: FIREBASE_SDK_DIR=<dir with node_modules/@firebase/{app,auth,...}> EMULATOR_URL=http://127.0.0.1:9099 node idp_flow.cjs
// Prints one JSON summary line and exits 0; exits 1 with the SDK error (and the last exchanges) otherwise.
// LINK_PHONE=<number> links that number instead of the fictional +16505554567 (a server that keeps its accounts between
// runs); LINK_CODE_FROM_INBOX=1 reads its code from the inbox (an emulator without fictional numbers, or another number).
// WIRE_OUT=<file> writes every exchange (method, path, request body, status, response body) to that file as JSON.
const crypto = require('crypto');
const fs = require('fs');
const { initializeApp, auth, url, project, recordExchanges } = require('./sdk.cjs');

const tag = Date.now().toString(36) + Math.floor(Math.random() * 1e6).toString(36);
const FICTIONAL = '+16505554567';
const LINK_PHONE = process.env.LINK_PHONE || FICTIONAL;
const INBOX_PHONE = '+1555' + String(Math.floor(Math.random() * 1e7)).padStart(7, '0');

const { wire, realFetch } = recordExchanges();

const verifier = { type: 'recaptcha', verify: async () => 'fake-recaptcha-token', _reset() {} };
const b64url = (s) => Buffer.from(s).toString('base64url');
const unsignedJwt = (claims) => `${b64url(JSON.stringify({ alg: 'none', typ: 'JWT' }))}.${b64url(JSON.stringify(claims))}.`;
const sha256 = (s) => crypto.createHash('sha256').update(s).digest('hex');
const fake = (claims) => JSON.stringify({ iss: 'example.com', aud: 'example.com', exp: 1597974008, iat: 1597970408, ...claims });

async function codeFor(phone, verificationId) {
  const r = await realFetch(`${url}/emulator/v1/projects/${project}/verificationCodes`);
  const { verificationCodes } = await r.json();
  const entry = (verificationCodes || []).find((c) => c.sessionInfo === verificationId && c.phoneNumber === phone);
  if (!entry) throw new Error(`no inbox code for ${phone} ${verificationId}`);
  return entry.code;
}

async function errorCode(fn) {
  try { await fn(); return 'resolved'; } catch (e) { return e.code || String(e); }
}

async function summary(cred) {
  const result = await cred.user.getIdTokenResult();
  const info = auth.getAdditionalUserInfo(cred);
  return {
    uid: cred.user.uid,
    providerId: cred.providerId,
    isNewUser: info && info.isNewUser,
    profile: info && info.profile,
    username: info && info.username,
    signInProvider: result.signInProvider,
    identities: result.claims.firebase && result.claims.firebase.identities,
    email: cred.user.email,
    emailVerified: cred.user.emailVerified,
    phoneNumber: cred.user.phoneNumber,
    providerData: cred.user.providerData.map((p) => ({ providerId: p.providerId, uid: p.uid, email: p.email, displayName: p.displayName,
      photoURL: p.photoURL, phoneNumber: p.phoneNumber })),
  };
}

function lastPostBody(op) {
  const w = [...wire].reverse().find((x) => x.path.endsWith(op));
  return w && JSON.parse(w.body).postBody;
}

(async () => {
  const app = initializeApp({ apiKey: 'fake-api-key', projectId: project }, 'idp-' + tag);
  const a = auth.initializeAuth(app, { persistence: auth.inMemoryPersistence });
  auth.connectAuthEmulator(a, url, { disableWarnings: true });
  a.settings.appVerificationDisabledForTesting = true;
  const subs = { google: `g-${tag}`, jwt: `gj-${tag}`, apple: `ap-${tag}`, github: `gh-${tag}`, oidc: `oi-${tag}`, linked: `gl-${tag}`,
    other: `go-${tag}`, unknown: `gu-${tag}`, conflict: `gc-${tag}` };
  const emails = { google: `ada-${tag}@example.com`, jwt: `jwt-${tag}@example.com`, password: `pw-${tag}@example.com`,
    linked: `linked-${tag}@example.com` };
  const out = { subs, emails, phones: { inbox: INBOX_PHONE, linked: LINK_PHONE }, postBodies: {} };

  // 1. Google: JSON claims as the ID token; the same credential again is the same user.
  const googleIdToken = fake({ sub: subs.google, email: emails.google, email_verified: true, name: 'Ada JS' });
  out.googleIdToken = googleIdToken;
  const g = await auth.signInWithCredential(a, auth.GoogleAuthProvider.credential(googleIdToken));
  out.googleJson = await summary(g);
  const rebuilt = auth.GoogleAuthProvider.credentialFromResult(g);
  out.googleJson.credentialFromResult = { idToken: rebuilt && rebuilt.idToken, accessToken: rebuilt && rebuilt.accessToken };
  await auth.signOut(a);
  const g2 = await auth.signInWithCredential(a, auth.GoogleAuthProvider.credential(googleIdToken));
  out.googleJsonAgain = { sameUser: g2.user.uid === g.user.uid, isNewUser: auth.getAdditionalUserInfo(g2).isNewUser };
  await auth.signOut(a);

  // 2. Google: an unsigned JWT.
  const j = await auth.signInWithCredential(a, auth.GoogleAuthProvider.credential(
    unsignedJwt({ iss: 'accounts.google.com', sub: subs.jwt, email: emails.jwt, email_verified: true, iat: 1597882681, exp: 1597886281 })));
  out.googleJwt = await summary(j);
  await auth.signOut(a);

  // 3. Apple with a raw nonce (the ID token carries its SHA-256), then a wrong one.
  const rawNonce = `nonce-${tag}`;
  const appleToken = fake({ sub: subs.apple, nonce: sha256(rawNonce) });
  const ap = await auth.signInWithCredential(a, new auth.OAuthProvider('apple.com').credential({ idToken: appleToken, rawNonce }));
  out.apple = { ...(await summary(ap)), hashedNonce: sha256(rawNonce) };
  out.postBodies.apple = lastPostBody('accounts:signInWithIdp');
  await auth.signOut(a);
  out.appleWrongNonce = await errorCode(() => auth.signInWithCredential(a,
    new auth.OAuthProvider('apple.com').credential({ idToken: appleToken, rawNonce: 'not-the-nonce' })));

  // 4. GitHub: JSON claims as the access token; an opaque access token is not supported.
  const gh = await auth.signInWithCredential(a, auth.GithubAuthProvider.credential(JSON.stringify({ sub: subs.github, login: 'octo-js' })));
  out.github = await summary(gh);
  await auth.signOut(a);
  out.githubOpaque = await errorCode(() => auth.signInWithCredential(a, auth.GithubAuthProvider.credential('gho_opaque')));

  // 5. An OIDC provider.
  const oi = await auth.signInWithCredential(a, new auth.OAuthProvider('oidc.example').credential({ idToken: fake({ sub: subs.oidc }) }));
  out.oidc = await summary(oi);
  await auth.signOut(a);

  // 6. A phone user (inbox number) links Google.
  const confirmation = await auth.signInWithPhoneNumber(a, INBOX_PHONE, verifier);
  const ph = await confirmation.confirm(await codeFor(INBOX_PHONE, confirmation.verificationId));
  const lk = await auth.linkWithCredential(ph.user, auth.GoogleAuthProvider.credential(
    fake({ sub: subs.linked, email: emails.linked, email_verified: true })));
  out.phoneLinksGoogle = { ...(await summary(lk)), sameUser: lk.user.uid === ph.user.uid };
  await auth.signOut(a);

  // 7. The Google user of step 1 links the fictional number; reauthenticates; mismatches; unlinks Google.
  const gu = await auth.signInWithCredential(a, auth.GoogleAuthProvider.credential(googleIdToken));
  const linkConfirmation = await auth.linkWithPhoneNumber(gu.user, LINK_PHONE, verifier);
  // The fictional number's preset code (an emulator without fictional numbers: LINK_CODE_FROM_INBOX=1).
  const gp = await linkConfirmation.confirm(process.env.LINK_CODE_FROM_INBOX
    ? await codeFor(LINK_PHONE, linkConfirmation.verificationId) : '123456');
  out.googleLinksPhone = { ...(await summary(gp)), sameUser: gp.user.uid === gu.user.uid };
  const re = await auth.reauthenticateWithCredential(gu.user, auth.GoogleAuthProvider.credential(googleIdToken));
  out.reauth = { sameUser: re.user.uid === gu.user.uid, signInProvider: (await re.user.getIdTokenResult()).signInProvider };
  out.reauthOtherExisting = await errorCode(() => auth.reauthenticateWithCredential(gu.user,
    auth.GoogleAuthProvider.credential(fake({ sub: subs.jwt }))));
  out.reauthUnknown = await errorCode(() => auth.reauthenticateWithCredential(gu.user,
    auth.GoogleAuthProvider.credential(fake({ sub: subs.unknown }))));
  out.signedInAfterReauthUnknown = a.currentUser ? a.currentUser.uid === gu.user.uid : null;
  out.methods = await auth.fetchSignInMethodsForEmail(a, emails.google);
  const un = await auth.unlink(gu.user, 'google.com');
  out.unlinked = { providerData: un.providerData.map((p) => p.providerId), methodsAfter: await auth.fetchSignInMethodsForEmail(a, emails.google) };
  await auth.signOut(a);

  // 8. A password user's email from Google, unverified: account-exists-with-different-credential.
  await auth.createUserWithEmailAndPassword(a, emails.password, 'secret-idp');
  await auth.signOut(a);
  out.methodsPassword = await auth.fetchSignInMethodsForEmail(a, emails.password);
  try {
    await auth.signInWithCredential(a, auth.GoogleAuthProvider.credential(fake({ sub: `gp-${tag}`, email: emails.password })));
    out.accountExists = { code: 'resolved' };
  } catch (e) {
    const c = auth.OAuthProvider.credentialFromError(e);
    out.accountExists = { code: e.code, email: e.customData && e.customData.email, credentialProvider: c && c.providerId };
  }

  // 9. An identity of another user: credential-already-in-use (with the credential); another user's email:
  //    email-already-in-use.
  await auth.signInWithCredential(a, auth.GoogleAuthProvider.credential(fake({ sub: subs.conflict })));
  await auth.signOut(a);
  const anon = await auth.signInAnonymously(a);
  try {
    await auth.linkWithCredential(anon.user, auth.GoogleAuthProvider.credential(fake({ sub: subs.conflict })));
    out.credentialInUse = { code: 'resolved' };
  } catch (e) {
    const c = auth.GoogleAuthProvider.credentialFromError(e);
    out.credentialInUse = { code: e.code, credentialProvider: c && c.providerId };
  }
  out.emailInUse = await errorCode(() => auth.linkWithCredential(anon.user,
    auth.GoogleAuthProvider.credential(fake({ sub: `ge-${tag}`, email: emails.jwt }))));
  await auth.signOut(a);

  out.requests = wire.map((w) => `${w.method} ${w.path.replace(/^\/[^/]+\.googleapis\.com/, '')} ${w.status}`);
  if (process.env.WIRE_OUT) fs.writeFileSync(process.env.WIRE_OUT, JSON.stringify(wire, null, 1));
  console.log(JSON.stringify(out));
  process.exit(0);
})().catch((e) => {
  if (process.env.WIRE_OUT) fs.writeFileSync(process.env.WIRE_OUT, JSON.stringify(wire, null, 1));
  console.error(JSON.stringify({ code: e.code, message: e.message, stack: e.stack, lastExchanges: wire.slice(-3) }));
  process.exit(1);
});
