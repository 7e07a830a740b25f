/**
 * Repositories with a test's hands on them: every call is recorded ("<repository>.<method>" in
 * `calls`, with its arguments in `invocations`); any method can be made to fail with `failNext`,
 * or held at a chosen point with `beforeNext` / `afterNext`. The repositories underneath are
 * untouched (the real Postgres ones, over PGlite or Postgres).
 */
export interface Instrumented<R> {
  readonly repositories: R;
  /** Every repository call so far, "<repository>.<method>". */
  readonly calls: string[];
  /** Every repository call so far with its arguments. */
  readonly invocations: Array<{ readonly method: string; readonly args: readonly unknown[] }>;
  /** The next `times` calls of `method` reject with `error` (before touching any row). */
  failNext(method: MethodOf<R>, error: unknown, times?: number): void;
  /** The next call of `method` first waits for `hook` (e.g. a concurrent change lands there), then runs. */
  beforeNext(method: MethodOf<R>, hook: (args: readonly unknown[]) => unknown): void;
  /** The next call of `method` runs, then waits for `hook` before its caller gets the result. */
  afterNext(method: MethodOf<R>, hook: (result: unknown, args: readonly unknown[]) => unknown): void;
}

/** "<repository>.<method>" for every method of every repository of R. */
export type MethodOf<R> = {
  [K in keyof R & string]: `${K}.${keyof R[K] & string}`;
}[keyof R & string];

export function instrumented<R extends object>(
  plain: R,
  record: Pick<Instrumented<R>, "calls" | "invocations"> = { calls: [], invocations: [] },
): Instrumented<R> {
  const { calls, invocations } = record;
  const failures = new Map<string, { error: unknown; times: number }>();
  const before = new Map<string, (args: readonly unknown[]) => unknown>();
  const after = new Map<string, (result: unknown, args: readonly unknown[]) => unknown>();
  const instrument = <T extends object>(name: string, repository: T): T =>
    new Proxy(repository, {
      get(target, property, receiver) {
        const value = Reflect.get(target, property, receiver) as unknown;
        if (typeof value !== "function" || typeof property !== "string") return value;
        const method = `${name}.${property}`;
        return (...args: unknown[]) => {
          calls.push(method);
          invocations.push({ method, args });
          const failure = failures.get(method);
          if (failure) {
            if (--failure.times <= 0) failures.delete(method);
            return Promise.reject(failure.error);
          }
          const beforeHook = before.get(method);
          const afterHook = after.get(method);
          before.delete(method);
          after.delete(method);
          const run = () => (value as (...a: unknown[]) => unknown).apply(target, args);
          if (!beforeHook && !afterHook) return run();
          return (async () => {
            if (beforeHook) await beforeHook(args);
            const result = await run();
            if (afterHook) await afterHook(result, args);
            return result;
          })();
        };
      },
    });
  const repositories = Object.fromEntries(
    Object.entries(plain).map(([name, repo]) => [name, instrument(name, repo as object)]),
  ) as R;
  return {
    repositories,
    calls,
    invocations,
    failNext(method, error, times = 1) {
      failures.set(method, { error, times });
    },
    beforeNext(method, hook) {
      before.set(method, hook);
    },
    afterNext(method, hook) {
      after.set(method, hook);
    },
  };
}
