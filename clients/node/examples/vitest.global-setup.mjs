// Vitest: `test: { globalSetup: ['./vitest.global-setup.mjs'] }` in vitest.config.mjs. One emulator for the run; the
// workers inherit FIREBASE_AUTH_EMULATOR_HOST / PHONE_AUTH_EMULATOR_URL from this process's environment. Vitest calls
// the returned function when the run ends.
import { startEmulator } from '../index.mjs';  // from a checkout; with the package installed: 'phone-auth-emulator'

export default async function setup() {
  const emulator = await startEmulator({ args: ['--test-phone', '+15555550100=654321'] });
  return async () => { await emulator.stop(); };
}
