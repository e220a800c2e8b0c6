import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * One system call of a traced process, as `strace -f -ttt -yy -xx` printed it.
 * `start` and `end` are positions in the trace (0-based, one per printed
 * line): `start` is where the call was entered, `end` where it returned. One
 * strace prints the calls of every process it traces in the order it saw
 * them, and a traced thread waits while strace prints, so when a call of one
 * thread (of any traced process) is entered after a call of another thread
 * returned, its `start` is greater than that call's `end`.
 */
export interface Syscall {
  /** Thread id. */
  tid: number;
  /** When the call was entered (or its line printed): seconds since the epoch, to the microsecond (`-ttt`); NaN when not printed. */
  time: number;
  /** e.g. `pwrite64`, `fsync`, `writev`, `read`. */
  name: string;
  /** First argument when it is a file descriptor. */
  fd?: number;
  /** What the descriptor names: a path, or `TCP:[local->remote]` for a socket. */
  target?: string;
  /** Every byte string the call printed (buffers written, or read), concatenated. */
  data: Buffer;
  /** The return value as printed, e.g. `4096` or `-1 ENOSPC (No space left on device)`. */
  result: string;
  start: number;
  end: number;
}

/** A running `strace` attached to a process; {@link stop} detaches and returns what it saw. */
export interface SyscallTrace {
  /** Detaches (the traced process runs on) and parses the trace, in order. */
  stop(): Promise<Syscall[]>;
}

/**
 * Why this machine cannot trace another process (no `strace`, or ptrace is
 * not permitted), or undefined when it can. Tests that need a trace skip with
 * this reason.
 */
export function traceUnavailable(): string | undefined {
  // Attach to a short-lived process the way the tests attach to a server (not as its parent).
  const target = spawn("sleep", ["0.3"], { stdio: "ignore" });
  try {
    const probe = spawnSync("strace", ["-qq", "-e", "trace=none", "-p", String(target.pid)], { encoding: "utf8", timeout: 5000 });
    if (probe.error !== undefined) return `strace cannot run (${probe.error.message}); install it (apt-get install strace)`;
    if (probe.status !== 0) return `strace cannot attach to another process here (${probe.stderr.trim()}); these tests need root or CAP_SYS_PTRACE`;
    return undefined;
  } finally {
    target.kill();
  }
}

/**
 * Attaches one `strace -f` to every thread of process `pid` (or of each
 * process in `pid`, in one trace, so calls of different processes are
 * ordered against each other), recording the named system calls with
 * timestamps (`-ttt`), their descriptors resolved (`-yy`) and complete
 * buffers in hex (`-xx`, up to `maxBytes` per buffer). Resolves once strace
 * reports it is attached to every thread of every process, so every call
 * made after that is recorded.
 *
 * @throws Error with strace's message when it cannot attach.
 */
export async function traceSyscalls(pid: number | readonly number[], syscalls: readonly string[], maxBytes = 1 << 20): Promise<SyscallTrace> {
  const pids = typeof pid === "number" ? [pid] : pid;
  const dir = mkdtempSync(join(tmpdir(), "mecatl-strace-"));
  const out = join(dir, "trace");
  const targets = pids.flatMap((p) => ["-p", String(p)]);
  const proc = spawn("strace", ["-f", "-ttt", "-yy", "-xx", "-s", String(maxBytes), "-e", `trace=${syscalls.join(",")}`, "-e", "signal=none", "-o", out, ...targets], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  const exited = new Promise<number | null>((resolve) => proc.once("exit", resolve));
  await new Promise<void>((resolve, reject) => {
    proc.stderr!.setEncoding("utf8").on("data", (chunk: string) => {
      stderr += chunk;
      // "Process N attached" (one thread) or "Process N attached with K threads": printed once every thread is.
      if (pids.every((p) => new RegExp(`Process ${p} attached`).test(stderr))) resolve();
    });
    void exited.then((code) => reject(new Error(`strace exited (${code}) before attaching to ${pids.join(", ")}: ${stderr.trim()}`)));
  });
  return {
    async stop() {
      proc.kill("SIGINT");
      await exited;
      try {
        return parseTrace(readFileSync(out, "utf8"));
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}

const LINE = /^(\d+) +(?:(\d+\.\d+) +)?(.*)$/;
const UNFINISHED = " <unfinished ...>";
const RESUMED = /^<\.\.\. (\w+) resumed>(.*)$/;
const CALL = /^(\w+)\((.*)\) += (.*)$/s;
const FD = /^(\d+)<(.+?)>(?:,|$)/;
const STRING = /"((?:\\x[0-9a-f]{2})*)"/g;

/**
 * Parses `strace -f [-ttt] -yy -xx` output into {@link Syscall}s ordered by entry.
 * A call another thread interrupted (`<unfinished ...>` / `<... resumed>`)
 * is joined back into one.
 */
export function parseTrace(text: string): Syscall[] {
  const calls: Syscall[] = [];
  const open = new Map<number, { text: string; start: number; time: number }>();
  const lines = text.split("\n");
  for (const [index, line] of lines.entries()) {
    const m = LINE.exec(line);
    if (m === null) continue;
    const tid = Number(m[1]);
    let time = m[2] === undefined ? NaN : Number(m[2]);
    let body = m[3]!;
    let start = index;
    if (body.endsWith(UNFINISHED)) {
      open.set(tid, { text: body.slice(0, -UNFINISHED.length), start: index, time });
      continue;
    }
    const resumed = RESUMED.exec(body);
    if (resumed !== null) {
      const head = open.get(tid);
      if (head === undefined) continue;
      open.delete(tid);
      body = head.text + resumed[2]!;
      start = head.start;
      time = head.time;
    }
    const call = CALL.exec(body);
    if (call === null) continue;
    const args = call[2]!;
    const fd = FD.exec(args);
    const data = Buffer.concat([...args.matchAll(STRING)].map((s) => Buffer.from(s[1]!.replaceAll("\\x", ""), "hex")));
    // -xx escapes paths too.
    const target = fd?.[2]?.replace(/\\x([0-9a-f]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));
    calls.push({ tid, time, name: call[1]!, fd: fd === null ? undefined : Number(fd[1]), target, data, result: call[3]!, start, end: index });
  }
  return calls.sort((a, b) => a.start - b.start);
}

/** What {@link ackAfterSync} looks for in a trace. */
export interface DurabilityRules {
  /** A call that writes the record to the store's files (e.g. pwrite64 to the WAL). */
  isStore(c: Syscall): boolean;
  /** A call that makes those files durable (fsync / fdatasync of them). */
  isSync(c: Syscall): boolean;
  /** A write on the request's connection that answers it (e.g. the HTTP/2 HEADERS of the response). */
  isReply(c: Syscall): boolean;
}

const READS = new Set(["read", "readv", "recvfrom", "recvmsg"]);

/**
 * Checks, in a trace of the serving process, that the write request carrying
 * `marker` was answered only after it was stored and synced (issue 15: OK
 * means durable). The request is the last one read from a TCP connection
 * before the record reached the store's files (a write may take several
 * round trips, as a WATCH/MULTI/EXEC does); the thread that stored the
 * record must then sync the files, and only after that sync returned may the
 * answer be written on the request's connection.
 *
 * @returns undefined when the trace shows that order, otherwise what it shows instead.
 */
export function ackAfterSync(calls: readonly Syscall[], marker: string, rules: DurabilityRules): string | undefined {
  const needle = Buffer.from(marker);
  const carries = (c: Syscall) => READS.has(c.name) && c.target?.startsWith("TCP:") === true && c.data.includes(needle);
  const answer = (request: Syscall) => calls.find((c) => c.start > request.end && c.fd === request.fd && c.tid === request.tid && rules.isReply(c));
  const store = calls.find((c) => rules.isStore(c) && c.data.includes(needle));
  if (store === undefined) {
    const request = calls.find(carries);
    const reply = request === undefined ? undefined : answer(request);
    if (reply === undefined) return `no request carrying ${marker} was read and answered`;
    return `the request carrying ${marker} was answered (line ${reply.start}) but its record was never written to the store's files`;
  }
  const request = calls.findLast((c) => carries(c) && c.start < store.start);
  if (request === undefined) return `the record of ${marker} was written (line ${store.start}) but no request before it carried ${marker}`;
  const reply = answer(request);
  if (reply === undefined) return `no answer to the request carrying ${marker} (read at line ${request.start})`;
  if (reply.start < store.start) return `the request carrying ${marker} was answered (line ${reply.start}) before its record was written (line ${store.start})`;
  const sync = calls.find((c) => c.start > store.end && c.tid === store.tid && rules.isSync(c));
  if (sync === undefined || sync.end > reply.start) {
    return `the request carrying ${marker} was answered (line ${reply.start}) after its record was written (line ${store.start}) but ${sync === undefined ? "never synced" : `before the sync returned (line ${sync.end})`}`;
  }
  return undefined;
}

/**
 * True when `data`, the bytes of one write on an HTTP/2 connection, holds a
 * HEADERS frame (type 1): walks the frames from the start of the buffer
 * (9-byte header: 24-bit length, type, flags, stream id). A server's answer
 * to a gRPC call starts with one.
 */
export function holdsHttp2Headers(data: Buffer): boolean {
  for (let at = 0; at + 9 <= data.length; at += 9 + data.readUIntBE(at, 3)) if (data[at + 3] === 1) return true;
  return false;
}

/** What {@link answeredAfterStoreSync} looks for in one trace of a server and of the store server behind it. */
export interface RelayedDurabilityRules {
  /** A read of a client's request by the server (e.g. the driver reading its listening port's connection). */
  isRequest(c: Syscall): boolean;
  /** The server's answer on the request's connection (e.g. a write holding an HTTP/2 HEADERS frame). */
  isReply(c: Syscall): boolean;
  /** The store server writing a record to its files (e.g. redis-server writing its AOF). */
  isStore(c: Syscall): boolean;
  /** The store server making those files durable (fsync / fdatasync of them, returning 0). */
  isSync(c: Syscall): boolean;
}

/**
 * Checks, in one trace of a server and of the store server it writes to
 * ({@link traceSyscalls} with both pids), that each call carrying `marker`
 * was answered to its client only after every record the store server wrote
 * for it was synced (issue 15: the driver's OK follows the store's fsync,
 * not merely the store's reply). A call is the first request read carrying
 * `marker` and the first answer on its connection after it; its records are
 * the store writes carrying `marker` from that read until the next call
 * carrying `marker` is read (so a record written after the answer counts
 * against it). Each must be followed, on the store's thread that wrote it,
 * by a sync that returned before the answer was written.
 *
 * @returns undefined when the trace shows that order for every such call,
 *   otherwise what it shows instead (with the trace's timestamps).
 */
export function answeredAfterStoreSync(calls: readonly Syscall[], marker: string, rules: RelayedDurabilityRules): string | undefined {
  const needle = Buffer.from(marker);
  const at = (c: Syscall) => `line ${c.start}, ${c.time.toFixed(6)}`;
  const requests = calls.filter((c) => rules.isRequest(c) && c.data.includes(needle));
  if (requests.length === 0) return `no request carrying ${marker} was read`;
  for (let request: Syscall | undefined = requests[0]; request !== undefined; ) {
    const r: Syscall = request;
    const reply = calls.find((c) => c.start > r.end && c.fd === r.fd && c.tid === r.tid && rules.isReply(c));
    if (reply === undefined) return `the request carrying ${marker} (${at(r)}) was never answered`;
    const next = requests.find((c) => c.start > reply.start);
    const stores = calls.filter((c) => rules.isStore(c) && c.data.includes(needle) && c.start > r.start && (next === undefined || c.start < next.start));
    if (stores.length === 0) return `the request carrying ${marker} was answered (${at(reply)}) but nothing carrying it reached the store's files`;
    for (const store of stores) {
      if (store.start > reply.start) return `the request carrying ${marker} was answered (${at(reply)}) before the store wrote its record (${at(store)})`;
      const sync = calls.find((c) => c.start > store.end && c.tid === store.tid && rules.isSync(c));
      if (sync === undefined || sync.end > reply.start) {
        return `the request carrying ${marker} was answered (${at(reply)}) after the store wrote its record (${at(store)}) but ${sync === undefined ? "the store never synced it" : `before the store's sync returned (line ${sync.end})`}`;
      }
    }
    request = next;
  }
  return undefined;
}
