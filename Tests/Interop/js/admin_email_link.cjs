// firebase-admin for Node (issue 25): generateSignInWithEmailLink against a running emulator, for the JS SDK to sign in
// with (email_link_flow.cjs --consume), plus the generator's refusal of a bad email.
// Usage: FIREBASE_ADMIN_NODE_DIR=<dir with node_modules/firebase-admin> FIREBASE_AUTH_EMULATOR_HOST=127.0.0.1:9099 \
//        node admin_email_link.cjs EMAIL CONTINUE_URL
// Prints {"link": …, "badEmail": <error code>} and exits 0; 1 when the generator failed.
const path = require('path');
const dir = process.env.FIREBASE_ADMIN_NODE_DIR;
if (!dir || !process.env.FIREBASE_AUTH_EMULATOR_HOST) { console.error('set FIREBASE_ADMIN_NODE_DIR and FIREBASE_AUTH_EMULATOR_HOST'); process.exit(2); }
const nm = path.join(dir, 'node_modules');
const { initializeApp } = require(path.join(nm, 'firebase-admin/lib/app/index.js'));
const { getAuth } = require(path.join(nm, 'firebase-admin/lib/auth/index.js'));

(async () => {
  const auth = getAuth(initializeApp({ projectId: process.env.PROJECT_ID || 'demo-phone' }));
  const [email, url] = process.argv.slice(2);
  const link = await auth.generateSignInWithEmailLink(email, { url, handleCodeInApp: true });
  let badEmail = null;
  try { await auth.generateSignInWithEmailLink('not-an-email', { url, handleCodeInApp: true }); } catch (e) { badEmail = e.code; }
  console.log(JSON.stringify({ link, badEmail }));
  process.exit(0);
})().catch((e) => { console.error(JSON.stringify({ code: e.code, message: e.message })); process.exit(1); });
