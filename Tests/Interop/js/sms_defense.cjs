// Drives the real Firebase JS SDK's phone sign-in under reCAPTCHA SMS defense (issue 28): what the SDK sends for each
// phoneEnforcementState and what the emulator answers.
// Usage: FIREBASE_SDK_DIR=<dir with node_modules/@firebase/{app,auth,...}> EMULATOR_URL=http://127.0.0.1:9099 \
//        MODE=mock|enterprise [SCORE=0.9] [LOCALE=fr] [CODE=123456] node sms_defense.cjs PHONE
// MODE=mock: `appVerificationDisabledForTesting` (the SDK's emulator mode: its mock reCAPTCHA Enterprise answers
// "token"). MODE=enterprise: a stand-in `grecaptcha.enterprise` whose execute(siteKey, {action}) mints an Enterprise
// test token with SCORE for that action from the emulator (POST …/appCredentials), as the real script would return one.
// The code comes from CODE (a fictional number) or the inbox. Prints one JSON line: {ok, error, sends, actions, siteKeys,
// configQueries, message, uid}; exits 0 either way (the test judges), 2 on a usage error.
const path = require('path');
const sdk = process.env.FIREBASE_SDK_DIR;
if (!sdk) { console.error('set FIREBASE_SDK_DIR'); process.exit(2); }
const mode = process.env.MODE || 'mock';
const url = process.env.EMULATOR_URL || 'http://127.0.0.1:9099';
const project = process.env.PROJECT_ID || 'demo-phone';
const phone = process.argv[2] || '+16505554567';

const sends = [];
const configQueries = [];
const realFetch = globalThis.fetch;
globalThis.fetch = async (input, init = {}) => {
  const u = new URL(typeof input === 'string' ? input : input.url);
  if (u.pathname.endsWith(':sendVerificationCode')) {
    sends.push({ body: JSON.parse(init.body || '{}'), locale: (init.headers || {})['X-Firebase-Locale'] || null });
  }
  if (u.pathname.endsWith('/v2/recaptchaConfig')) configQueries.push(u.search);
  return realFetch(input, init);
};

const actions = [];
const siteKeys = [];
if (mode === 'enterprise') {
  globalThis.window = globalThis;
  globalThis.grecaptcha = {
    enterprise: {
      ready(cb) { cb(); },
      async execute(siteKey, opts) {
        siteKeys.push(siteKey);
        actions.push(opts.action);
        const r = await realFetch(`${url}/emulator/v1/projects/${project}/appCredentials`, {
          method: 'POST', headers: { 'Content-Type': 'application/json' },
          body: JSON.stringify({ type: 'RECAPTCHA_ENTERPRISE', score: Number(process.env.SCORE || '0.9'), action: opts.action }),
        });
        return (await r.json()).token;
      },
    },
  };
}

const req = (m) => require(path.join(sdk, 'node_modules', m));
const { initializeApp } = req('@firebase/app');
const auth = req('@firebase/auth/dist/browser-cjs/index.js');

async function inboxCode(sessionInfo) {
  const r = await realFetch(`${url}/emulator/v1/projects/${project}/verificationCodes?phoneNumber=${encodeURIComponent(phone)}`);
  const { verificationCodes } = await r.json();
  return (verificationCodes || []).find((c) => c.sessionInfo === sessionInfo) || null;
}

(async () => {
  const app = initializeApp({ apiKey: 'fake-api-key', projectId: project }, 'defense-' + Date.now());
  const a = auth.initializeAuth(app, { persistence: auth.inMemoryPersistence });
  auth.connectAuthEmulator(a, url, { disableWarnings: true });
  // connectAuthEmulator turns the mock on; the enterprise mode turns it off again, so the SDK runs its real
  // reCAPTCHA Enterprise path (with the stand-in script above).
  a.settings.appVerificationDisabledForTesting = mode === 'mock';
  if (process.env.LOCALE) a.languageCode = process.env.LOCALE;
  const verifier = { type: 'recaptcha', verify: async () => 'fake-recaptcha-token', _reset() {} };
  const out = { ok: false, error: null, sends, actions, siteKeys, configQueries, message: null, uid: null };
  try {
    const confirmation = await auth.signInWithPhoneNumber(a, phone, verifier);
    let code = process.env.CODE;
    if (!code) {
      const entry = await inboxCode(confirmation.verificationId);
      if (!entry) throw Object.assign(new Error('no code in the inbox'), { code: 'test/no-code-in-inbox' });
      code = entry.code;
      out.message = entry.message;
    }
    const cred = await confirmation.confirm(code);
    out.uid = cred.user.uid;
    out.ok = true;
  } catch (e) {
    out.error = e.code || String(e);
  }
  console.log(JSON.stringify(out));
  process.exit(0);
})().catch((e) => { console.error(String(e && e.stack || e)); process.exit(3); });
