// Jest: `globalSetup: './jest.global-setup.mjs'` and `globalTeardown: './jest.global-teardown.mjs'` in jest.config.
// Jest runs both in its parent process; test files (in workers) see the exported environment.
import { startEmulator } from '../index.mjs';  // from a checkout; with the package installed: 'phone-auth-emulator'

export default async function globalSetup() {
  globalThis.__PHONE_AUTH_EMULATOR__ = await startEmulator();
}
