// Playwright: a worker-scoped fixture, one emulator per worker on its own free port. In your fixtures file:
//
//   import { test as base } from '@playwright/test';
//   import { emulatorFixture } from './playwright-emulator.mjs';
//   export const test = base.extend({ emulator: emulatorFixture });
//
//   test('admins see the dashboard', async ({ page, emulator }) => {
//     const idToken = await mintToken('ada', { url: emulator.url, claims: { role: 'admin' } });
//     await page.goto(`/?emulator=${emulator.url}`);   // the app calls connectAuthEmulator(auth, emulator.url)
//   });
//
// (Kept free of any import of @playwright/test, so the repository's own tests run it without npm.)
import { startEmulator, reset } from '../index.mjs';  // from a checkout; with the package installed: 'phone-auth-emulator'

export const emulatorFixture = [async ({}, use, workerInfo) => {
  const emulator = await startEmulator({ exportEnv: false });
  emulator.workerIndex = workerInfo.workerIndex;
  await use(emulator);
  await emulator.stop();
}, { scope: 'worker' }];

/** A test-scoped fixture over it: the emulator reset to its starting state before each test. */
export const freshEmulatorFixture = async ({ emulator }, use) => {
  await reset({ url: emulator.url, project: emulator.project });
  await use(emulator);
};
