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
  const root = readStat(pid);
  if (!root) return undefined;
  let ticks = root.ticks;
  // Descendants: one scan of /proc, then walk the parent links.
  let entries: string[];
  try {
    entries = fs.readdirSync("/proc").filter((name) => /^\d+$/.test(name));
  } catch {
    entries = [];
  }
  const children = new Map<number, StatLine[]>();
  for (const name of entries) {
    if (Number(name) === pid) continue;
    const line = readStat(name);
    if (!line) continue;
    const list = children.get(line.ppid);
    if (list) list.push(line);
    else children.set(line.ppid, [line]);
  }
  const stack = [pid];
  while (stack.length) {
    for (const child of children.get(stack.pop()!) ?? []) {
      ticks += child.ticks;
      stack.push(child.pid);
    }
  }
  return (ticks / CLOCK_TICKS) * 1e6;
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
