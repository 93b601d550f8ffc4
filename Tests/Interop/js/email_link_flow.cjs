// Drives the real Firebase JS SDK's email-link sign-in against a running emulator (issue 25):
// sendSignInLinkToEmail → the link from the oob inbox → isSignInWithEmailLink → signInWithEmailLink (a new user, then an
// existing password user), EmailAuthProvider.credentialWithLink + linkWithCredential onto a phone user,
// reauthenticateWithCredential with an email-link credential (and another user's: auth/user-mismatch),
// fetchSignInMethodsForEmail, a tenant's auth (auth.tenantId), and the error codes the SDK maps
// (auth/invalid-action-code for a used or tampered code, auth/invalid-email for another email, auth/expired-action-code
// after the emulator clock passes 6 hours — where the emulator has a clock).
// Usage: FIREBASE_SDK_DIR=<dir with node_modules/@firebase/{app,auth,...}> EMULATOR_URL=http://127.0.0.1:9099 \
//        node email_link_flow.cjs [PREFIX]
//        node email_link_flow.cjs --consume EMAIL LINK     (signInWithEmailLink with a link made elsewhere, e.g. firebase-admin)
// Each step records what it saw (or the SDK error code) instead of stopping, so one run against the official emulator
// and one against ours can be compared. Prints a JSON summary and exits 0; exits 1 only when the flow itself broke.
const { initializeApp, auth: A } = require('./sdk.cjs');

const url = process.env.EMULATOR_URL || 'http://127.0.0.1:9099';
const project = process.env.PROJECT_ID || 'demo-phone';
const prefix = process.argv[2] || 'el' + Date.now();
const phone = process.env.PHONE || '+16505554567';
const CONTINUE = 'http://localhost:5000/finish?from=mail#top';
const settings = { url: CONTINUE, handleCodeInApp: true };
const owner = { Authorization: 'Bearer owner', 'Content-Type': 'application/json' };
const out = { steps: {} };

function newAuth(tenantId) {
  const app = initializeApp({ apiKey: 'fake-api-key', projectId: project }, 'el-' + Math.random());
  const a = A.initializeAuth(app, { persistence: A.inMemoryPersistence });
  A.connectAuthEmulator(a, url, { disableWarnings: true });
  a.settings.appVerificationDisabledForTesting = true;
  if (tenantId) a.tenantId = tenantId;
  return a;
}

async function json(method, p, body, headers) {
  const r = await fetch(url + p, { method, headers: headers || { 'Content-Type': 'application/json' }, body: body && JSON.stringify(body) });
  return { status: r.status, body: await r.json().catch(() => null) };
}

/** The newest inbox link for `email` (the project's or a tenant's inbox). */
async function linkFor(email, tenantId) {
  const where = tenantId ? `/tenants/${tenantId}` : '';
  const r = await json('GET', `/emulator/v1/projects/${project}${where}/oobCodes`);
  const mine = r.body.oobCodes.filter((c) => c.email === email.toLowerCase());
  return mine[mine.length - 1].oobLink;
}

/** Where the inbox link leads (`/emulator/action` answers 303 to the continue URL with the link's parameters). */
async function follow(link) {
  const r = await fetch(link, { redirect: 'manual' });
  return { status: r.status, location: r.headers.get('location') };
}

async function step(name, body) {
  try {
    out.steps[name] = await body();
  } catch (e) {
    out.steps[name] = { error: e.code || String(e), message: e.message };
  }
}

async function describe(cred) {
  const r = await cred.user.getIdTokenResult();
  const info = A.getAdditionalUserInfo(cred);
  return {
    uid: cred.user.uid, email: cred.user.email, emailVerified: cred.user.emailVerified, isAnonymous: cred.user.isAnonymous,
    tenantId: cred.user.tenantId, credProviderId: cred.providerId, operationType: cred.operationType,
    isNewUser: info && info.isNewUser, infoProviderId: info && info.providerId,
    providerData: cred.user.providerData.map((p) => p.providerId).sort(),
    signInProvider: r.signInProvider, tokenTenant: r.claims.firebase && r.claims.firebase.tenant || null,
    identities: r.claims.firebase && r.claims.firebase.identities, phoneNumber: cred.user.phoneNumber,
  };
}

async function phoneCode(session) {
  if (process.env.PHONE_CODE) return process.env.PHONE_CODE;
  const r = await json('GET', `/emulator/v1/projects/${project}/verificationCodes`);
  const mine = r.body.verificationCodes.filter((c) => c.phoneNumber === phone);
  return mine[mine.length - 1].code;
}

async function consume(email, link) {
  const a = newAuth();
  const cred = await A.signInWithEmailLink(a, email, link);
  return { isLink: A.isSignInWithEmailLink(a, link), ...(await describe(cred)) };
}

(async () => {
  if (process.argv[2] === '--consume') {
    console.log(JSON.stringify(await consume(process.argv[3], process.argv[4])));
    process.exit(0);
  }
  // fetchSignInMethodsForEmail needs email enumeration protection off (ours defaults to on, as production).
  await json('PATCH', `/emulator/v1/projects/${project}/config`, { emailPrivacyConfig: { enableImprovedEmailPrivacy: false } });
  const a = newAuth();
  const fresh = `${prefix}-new@example.com`;
  const pw = `${prefix}-pw@example.com`;
  const ph = `${prefix}-phone@example.com`;

  await step('newUser', async () => {
    await A.sendSignInLinkToEmail(a, fresh, settings);
    const link = await linkFor(fresh);
    const hop = await follow(link);
    const cred = await A.signInWithEmailLink(a, fresh, hop.location);
    return { link, hop, isLink: A.isSignInWithEmailLink(a, link), isLanding: A.isSignInWithEmailLink(a, hop.location),
             isOther: A.isSignInWithEmailLink(a, CONTINUE), ...(await describe(cred)) };
  });
  await step('reuse', async () => {
    await A.signInWithEmailLink(a, fresh, await linkFor(fresh).catch(() => out.steps.newUser.link));
    return { reused: true };
  });
  await step('reuseUsedLink', async () => {
    await A.signInWithEmailLink(a, fresh, out.steps.newUser.link);
    return { reused: true };
  });
  await step('existingPasswordUser', async () => {
    const made = await A.createUserWithEmailAndPassword(a, pw, 'secret-pw');
    await A.signOut(a);
    await A.sendSignInLinkToEmail(a, pw, settings);
    const cred = await A.signInWithEmailLink(a, pw, await linkFor(pw));
    return { sameUser: made.user.uid === cred.user.uid, methods: await A.fetchSignInMethodsForEmail(a, pw), ...(await describe(cred)) };
  });
  await step('linkOntoPhoneUser', async () => {
    await A.signOut(a);
    const verifier = { type: 'recaptcha', verify: async () => 'fake-recaptcha-token', _reset() {} };
    const confirmation = await A.signInWithPhoneNumber(a, phone, verifier);
    const phoneCred = await confirmation.confirm(await phoneCode());
    await A.sendSignInLinkToEmail(a, ph, settings);
    const cred = A.EmailAuthProvider.credentialWithLink(ph, await linkFor(ph));
    const linked = await A.linkWithCredential(phoneCred.user, cred);
    return { sameUser: linked.user.uid === phoneCred.user.uid, credSignInMethod: cred.signInMethod,
             methods: await A.fetchSignInMethodsForEmail(a, ph), ...(await describe(linked)) };
  });
  await step('reauthenticate', async () => {
    await A.signOut(a);
    await A.sendSignInLinkToEmail(a, fresh, settings);
    const signedIn = await A.signInWithEmailLink(a, fresh, await linkFor(fresh));
    await A.sendSignInLinkToEmail(a, fresh, settings);
    const again = await A.reauthenticateWithCredential(signedIn.user, A.EmailAuthProvider.credentialWithLink(fresh, await linkFor(fresh)));
    let mismatch = null;
    await A.sendSignInLinkToEmail(a, pw, settings);
    try {
      await A.reauthenticateWithCredential(signedIn.user, A.EmailAuthProvider.credentialWithLink(pw, await linkFor(pw)));
    } catch (e) { mismatch = e.code; }
    return { sameUser: again.user.uid === signedIn.user.uid, operationType: again.operationType, mismatch,
             stillSignedIn: a.currentUser && a.currentUser.uid === signedIn.user.uid };
  });
  await step('methods', async () => ({ fresh: await A.fetchSignInMethodsForEmail(a, fresh),
                                       unknown: await A.fetchSignInMethodsForEmail(a, `${prefix}-nobody@example.com`) }));
  await step('wrongEmail', async () => {
    const other = `${prefix}-other@example.com`;
    await A.sendSignInLinkToEmail(a, other, settings);
    const link = await linkFor(other);
    let wrong = null;
    try { await A.signInWithEmailLink(a, fresh, link); } catch (e) { wrong = e.code; }
    // The code survives a wrong email.
    const cred = await A.signInWithEmailLink(a, other, link);
    return { wrong, thenSignedIn: cred.user.email };
  });
  await step('tamperedCode', async () => {
    await A.sendSignInLinkToEmail(a, fresh, settings);
    const link = (await linkFor(fresh)).replace(/oobCode=[^&]+/, 'oobCode=not-a-real-code');
    await A.signInWithEmailLink(a, fresh, link);
    return { signedIn: true };
  });
  await step('badEmailToSend', async () => {
    await A.sendSignInLinkToEmail(a, 'not-an-email', settings);
    return { sent: true };
  });
  await step('expired', async () => {
    const late = `${prefix}-late@example.com`;
    await A.sendSignInLinkToEmail(a, late, settings);
    const link = await linkFor(late);
    const moved = await json('POST', '/emulator/v1/clock:advance', { seconds: 6 * 3600 + 1 });
    try {
      await A.signInWithEmailLink(a, late, link);
      return { clock: moved.status, signedIn: true };
    } catch (e) {
      return { clock: moved.status, error: e.code };
    } finally {
      if (moved.status === 200) await json('POST', '/emulator/v1/clock:reset', {});
    }
  });
  await step('tenant', async () => {
    const made = await json('POST', `/identitytoolkit.googleapis.com/v2/projects/${project}/tenants`,
                            { displayName: 'email-link', enableEmailLinkSignin: true, allowPasswordSignup: true }, owner);
    const tid = made.body.tenantId;
    const ta = newAuth(tid);
    const email = `${prefix}-tenant@example.com`;
    await A.sendSignInLinkToEmail(ta, email, settings);
    const link = await linkFor(email, tid);
    let mismatch = null;
    try { await A.signInWithEmailLink(a, email, link); } catch (e) { mismatch = e.code; }
    const cred = await A.signInWithEmailLink(ta, email, link);
    return { tid, linkHasTenant: link.includes(`tenantId=${tid}`), mismatch, ...(await describe(cred)),
             projectInbox: (await json('GET', `/emulator/v1/projects/${project}/oobCodes`)).body.oobCodes.filter((c) => c.email === email).length };
  });
  await step('tenantOff', async () => {
    const made = await json('POST', `/identitytoolkit.googleapis.com/v2/projects/${project}/tenants`,
                            { displayName: 'no-links', allowPasswordSignup: true, enableEmailLinkSignin: false }, owner);
    await A.sendSignInLinkToEmail(newAuth(made.body.tenantId), `${prefix}-off@example.com`, settings);
    return { sent: true };
  });
  await A.signOut(a);
  console.log(JSON.stringify(out));
  process.exit(0);
})().catch((e) => { console.error(JSON.stringify({ code: e.code, message: e.message, stack: e.stack })); process.exit(1); });
