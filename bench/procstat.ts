// CPU time and memory of a server process from /proc (Linux): utime + stime of the process —
// which the kernel sums over all its threads (main, libuv pool, GC, compiler) — plus those of
// every descendant process and the children it has already waited for (cutime + cstime). Read
// at the start and end of a measured window, the difference is the server's whole CPU cost of
// that window, whichever thread or child spent it.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";

/** Clock ticks per second of /proc/<pid>/stat times (almost always 100). */
const CLOCK_TICKS = (() => {
  try {
    return Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
  } catch {
    return 100;
  }
})();

interface StatLine {
  readonly pid: number;
  readonly ppid: number;
  /** utime + stime + cutime + cstime, in ticks. */
  readonly ticks: number;
}

function readStat(pid: number | string): StatLine | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name (field 2) may hold spaces and parentheses: split after the last ")".
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // fields[0] is field 3 (state); ppid is field 4, utime..cstime fields 14..17.
    return {
      pid: Number(pid),
      ppid: Number(fields[1]),
      ticks: Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14]),
    };
  } catch {
    return undefined;
  }
}

/**
 * CPU microseconds used so far by `pid`, its threads and its descendant processes; undefined
 * when the process is gone or /proc is missing. Resolution: one clock tick (10 ms), so measure
 * windows of seconds.
 */
export function treeCpuMicros(pid: number): number | undefined {
  return treesCpuMicros([pid])[0];
}

/** treeCpuMicros of several processes from one scan of /proc (read at the same instant). */
export function treesCpuMicros(pids: readonly number[]): Array<number | undefined> {
  // Descendants: one scan of /proc, then walk the parent links.
  let entries: string[];
  try {
    entries = fs.readdirSync("/proc").filter((name) => /^\d+$/.test(name));
  } catch {
    entries = [];
  }
  const children = new Map<number, StatLine[]>();
  const byPid = new Map<number, StatLine>();
  for (const name of entries) {
    const line = readStat(name);
    if (!line) continue;
    byPid.set(line.pid, line);
    const list = children.get(line.ppid);
    if (list) list.push(line);
    else children.set(line.ppid, [line]);
  }
  return pids.map((pid) => {
    const root = byPid.get(pid) ?? readStat(pid);
    if (!root) return undefined;
    let ticks = root.ticks;
    const stack = [pid];
    while (stack.length) {
      for (const child of children.get(stack.pop()!) ?? []) {
        ticks += child.ticks;
        stack.push(child.pid);
      }
    }
    return (ticks / CLOCK_TICKS) * 1e6;
  });
}

/** Resident set size of one process in bytes (VmRSS), undefined when it is gone. */
export function rssBytes(pid: number): number | undefined {
  try {
    const match = /^VmRSS:\s+(\d+) kB/m.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"));
    return match ? Number(match[1]) * 1024 : undefined;
  } catch {
    return undefined;
  }
}

/** Busy and total CPU time of the whole machine (all cores), in ms. */
export function machineCpu(): { busy: number; total: number } {
  let busy = 0;
  let total = 0;
  for (const cpu of os.cpus()) {
    const t = cpu.times;
    const sum = t.user + t.nice + t.sys + t.irq + t.idle;
    total += sum;
    busy += sum - t.idle;
  }
  return { busy, total };
}

/** Busy (non-idle) CPU ticks and all ticks of the whole machine so far, from /proc/stat's "cpu" line. */
function machineTicks(): { busy: number; total: number } | undefined {
  try {
    const line = fs.readFileSync("/proc/stat", "utf8").split("\n", 1)[0]!;
    const ticks = line.trim().split(/\s+/).slice(1).map(Number);
    // user nice system idle iowait irq softirq steal …: idle and iowait are the idle ones.
    const total = ticks.slice(0, 8).reduce((a, b) => a + b, 0);
    return { busy: total - ticks[3]! - ticks[4]!, total };
  } catch {
    return undefined;
  }
}

/**
 * Waits until the machine is quiet: over one second, all its processes together used less than
 * `busyCores` of a core (the background work a load leaves behind, such as Postgres autovacuum
 * or a service flushing its audit buffer, done), at most `maxWaitMs`. Resolves with how long it
 * waited and whether it got quiet; without /proc it returns at once.
 */
export async function quietMachine(
  busyCores: number,
  maxWaitMs: number,
): Promise<{ waitedMs: number; quiet: boolean; busyCores: number }> {
  const started = performance.now();
  const cores = os.cpus().length;
  for (;;) {
    const before = machineTicks();
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const after = machineTicks();
    if (!before || !after) return { waitedMs: 0, quiet: true, busyCores: NaN };
    const busy = ((after.busy - before.busy) / Math.max(1, after.total - before.total)) * cores;
    const waitedMs = performance.now() - started;
    if (busy < busyCores) return { waitedMs, quiet: true, busyCores: busy };
    if (waitedMs >= maxWaitMs) return { waitedMs, quiet: false, busyCores: busy };
  }
}
