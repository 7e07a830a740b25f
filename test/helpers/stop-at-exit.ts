/**
 * `stop` made idempotent and run at the latest when the test process exits: a test that fails
 * before its `after` must not leave a server it started behind.
 */
export function stopAtExit(stop: () => void): () => void {
  let stopped = false;
  const once = () => {
    if (stopped) return;
    stopped = true;
    process.off("exit", once);
    stop();
  };
  process.on("exit", once);
  return once;
}
