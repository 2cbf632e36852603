/**
 * Runs a command that follows the trail until the user stops it: Ctrl-C (SIGINT) or SIGTERM aborts the
 * signal, the live connection closes, and the command ends normally (exit 0) rather than being killed in
 * the middle of a line. A failure that is not the interruption is the command's failure.
 */
export async function untilInterrupted(follow: (signal: AbortSignal) => Promise<void>): Promise<void> {
  const controller = new AbortController();
  const stop = () => controller.abort();
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  try {
    await follow(controller.signal);
  } catch (error) {
    if (!controller.signal.aborted) throw error;
  } finally {
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
  }
}
