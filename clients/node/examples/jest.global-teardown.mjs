export default async function globalTeardown() {
  await globalThis.__PHONE_AUTH_EMULATOR__?.stop();
}
