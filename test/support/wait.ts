/** Polls until the condition holds, failing with its description after the timeout. */
export async function waitFor(
  condition: () => Promise<boolean> | boolean,
  what: string,
  timeoutMs = 10_000,
  intervalMs = 50,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await condition()) return;
    if (Date.now() > deadline) throw new Error(`Timed out after ${timeoutMs} ms waiting for: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/**
 * Waits until an instant the service announced (a Retry-After, a secret's expiry): for behaviour the
 * service defines by the clock, that instant passing is the condition itself.
 */
export async function untilInstant(epochMs: number): Promise<void> {
  const remaining = epochMs - Date.now();
  if (remaining > 0) await new Promise((resolve) => setTimeout(resolve, remaining));
}
