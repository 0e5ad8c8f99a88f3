/**
 * CPU time of this process's threads, by kind, from Linux's
 * /proc/self/task/<tid>/stat: the main thread, the loader's worker threads
 * (Bun names them "Worker", Deno "worker-N"), and the runtime's own helpers
 * (JIT compilers, garbage collection, I/O). With wall time this tells a
 * thread that works from one that waits. Clock ticks of 10 ms: read over
 * segments of a few hundred milliseconds or more. Elsewhere than Linux, null.
 */
import { readdirSync, readFileSync } from "node:fs";

export interface ThreadCpu {
  main: number;
  workers: number;
  helpers: number;
}

/** USER_HZ: the unit of utime and stime (100 on every Linux this runs on). */
const TICK_MS = 10;

/** Milliseconds of CPU each kind of thread has used so far; null where /proc is not there. */
export function threadCpu(): ThreadCpu | null {
  try {
    const pid = readFileSync("/proc/self/stat", "utf8").split(" ")[0]!;
    const cpu: ThreadCpu = { main: 0, workers: 0, helpers: 0 };
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      let stat: string;
      try {
        stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8");
      } catch {
        continue; // the thread ended meanwhile
      }
      const name = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      const ms = (Number(fields[11]) + Number(fields[12])) * TICK_MS;
      if (tid === pid) cpu.main += ms;
      else if (name === "Worker" || name.startsWith("worker-")) {
        cpu.workers += ms;
      } else cpu.helpers += ms;
    }
    return cpu;
  } catch {
    return null;
  }
}
