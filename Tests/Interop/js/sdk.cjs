// The Firebase JS SDK the drivers here load: @firebase/app and the browser CJS build of @firebase/auth from
// FIREBASE_SDK_DIR (a folder with node_modules/@firebase/{app,auth,...}). Not the package's default Node build: it
// turns phone sign-in into a stub that always fails. Exits 2 when FIREBASE_SDK_DIR is unset.
const path = require('path');
const sdk = process.env.FIREBASE_SDK_DIR;
if (!sdk) { console.error('set FIREBASE_SDK_DIR'); process.exit(2); }
const req = (m) => require(path.join(sdk, 'node_modules', m));
module.exports = { initializeApp: req('@firebase/app').initializeApp, auth: req('@firebase/auth/dist/browser-cjs/index.js') };
