import { readFileSync } from "node:fs";

/**
 * The start time of process `pid` in clock ticks since boot (field 22 of
 * `/proc/<pid>/stat`), or undefined when it cannot be read (no such process,
 * or no /proc).
 */
function startTicks(pid: number): string | undefined {
  try {
    // The command name (field 2) is in parentheses and may hold spaces: count fields after its closing one.
    const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
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
  const start = startTicks(pid);
  return start === undefined ? String(pid) : `${pid}:${start}`;
}

/**
 * Whether the process named by `identity` ({@link processIdentity}) still
 * runs on this host. A process id now used by another process (a restart in
 * a container reuses pid 1) counts as gone when its start time differs.
 * Without /proc, only whether the pid exists is known. A process in another
 * PID namespace (another container sharing the file) looks gone.
 */
export function processAlive(identity: string): boolean {
  const pid = Number(identity.split(":")[0]);
  if (!Number.isSafeInteger(pid) || pid <= 0) return false;
  if (identity.includes(":")) return processIdentity(pid) === identity;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}
