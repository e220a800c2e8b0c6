import { readFileSync } from "node:fs";

/**
 * What `/proc/<pid>/stat` says of process `pid`: its state (field 3: `R`,
 * `S`, `Z` for a zombie, ...) and its start time in clock ticks since boot
 * (field 22), or undefined when it cannot be read (no such process, or no
 * /proc).
 */
function procStat(pid: number): { state: string; start: string } | undefined {
  try {
    // The command name (field 2) is in parentheses and may hold spaces: count fields after its closing one.
    const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return { state: fields[0]!, start: fields[19]! };
  } catch {
    return undefined;
  }
}

/**
 * A name for process `pid` (default: this one) that no later process on this
 * host will bear: `<pid>:<start time in clock ticks since boot>` where /proc
 * tells the start time (Linux), else `<pid>`. Used to mark work a process
 * left unfinished, such as staged snapshot chunks (issue 11), so that a later
 * process can tell whether the one that started it is gone.
 */
export function processIdentity(pid = process.pid): string {
  const start = procStat(pid)?.start;
  return start === undefined ? String(pid) : `${pid}:${start}`;
}

/**
 * Whether the process named by `identity` ({@link processIdentity}) still
 * runs on this host. A process id now used by another process (a restart in
 * a container reuses pid 1) counts as gone when its start time differs.
 * A process that has exited but not yet been reaped by its parent (a
 * zombie, as a server killed a moment ago often still is when its
 * replacement starts) is gone: it runs no more code and holds no file locks.
 * Without /proc, only whether the pid exists is known. A process in another
 * PID namespace (another container sharing the file) looks gone.
 */
export function processAlive(identity: string): boolean {
  const pid = Number(identity.split(":")[0]);
  if (!Number.isSafeInteger(pid) || pid <= 0) return false;
  if (identity.includes(":")) {
    const stat = procStat(pid);
    return stat !== undefined && stat.state !== "Z" && stat.state !== "X" && `${pid}:${stat.start}` === identity;
  }
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}
