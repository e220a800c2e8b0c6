import { spawn } from "node:child_process";

/** A running count of one process's fsync and fdatasync calls. */
export interface FsyncCount {
  /** Stops counting; resolves to the calls seen, or undefined when `perf` could not count. */
  stop(): Promise<number | undefined>;
}

/**
 * Counts the `fsync` and `fdatasync` calls of every thread of process `pid`
 * with `perf stat` on the syscall tracepoints (counted in the kernel: the
 * process is not slowed down). Needs `perf` and permission to trace the
 * process (root, or `perf_event_paranoid` low enough); otherwise the count
 * is undefined. Resolves once perf has attached.
 */
export async function countFsyncs(pid: number): Promise<FsyncCount> {
  const perf = spawn("perf", ["stat", "-x", ",", "-e", "syscalls:sys_enter_fsync,syscalls:sys_enter_fdatasync", "-p", String(pid)], { stdio: ["ignore", "ignore", "pipe"] });
  let err = "";
  perf.stderr!.setEncoding("utf8").on("data", (d: string) => (err += d));
  const exited = new Promise<void>((resolve) => {
    perf.once("exit", () => resolve());
    perf.once("error", () => resolve());
  });
  // perf prints nothing once attached; give it a moment, or learn early that it failed.
  await Promise.race([exited, new Promise((r) => setTimeout(r, 300))]);
  return {
    async stop() {
      if (perf.exitCode === null && perf.signalCode === null) perf.kill("SIGINT");
      await exited;
      const counts = err
        .split("\n")
        .filter((line) => line.includes("syscalls:sys_enter_f"))
        .map((line) => Number(line.split(",")[0]));
      return counts.length === 2 && counts.every(Number.isFinite) ? counts[0]! + counts[1]! : undefined;
    },
  };
}
