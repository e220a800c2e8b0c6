import { CHECKS, type Check } from "./model.js";
import type { WorkloadProgress, WorkloadResult } from "./run.js";
import { percentile } from "./stats.js";

const MiB = 1024 * 1024;

/** One line of live progress, e.g. `[  5s] 1234 calls (246/s), 52.1 MiB (10.4 MiB/s), 16 sessions, 3 claims, 0 violations`. */
export function progressLine(p: WorkloadProgress): string {
  const s = Math.max(p.seconds, 0.001);
  return `[${p.seconds.toFixed(0).padStart(3)}s] ${p.calls} calls (${(p.calls / s).toFixed(0)}/s), ${(p.bytes / MiB).toFixed(1)} MiB (${(p.bytes / MiB / s).toFixed(1)} MiB/s), ${p.sessions} sessions, ${p.claims} claims, ${p.errors} errors, ${p.violations} violations`;
}

/** Per-RPC figures of a run: calls and bytes per second over the write phase, latency percentiles in milliseconds. */
export interface RpcSummary {
  rpc: string;
  calls: number;
  errors: number;
  /** Expected refusals among the calls (lease held, claim lost). */
  rejected: number;
  callsPerSecond: number;
  mibPerSecond: number;
  p50Ms: number;
  p99Ms: number;
}

/** The machine-readable summary `--json` prints. */
export interface WorkloadSummary {
  writeSeconds: number;
  totals: { calls: number; errors: number; callsPerSecond: number; mibPerSecond: number };
  rpcs: RpcSummary[];
  counts: { sessions: number; turns: number; leaseGrants: number; claims: number; lostClaims: number; crashes: number; watcherReconnects: number; watcherResumes: number; outageRetries: number };
  /** Each invariant with its violation count; `checked` is false when its part did not run. */
  checks: Array<{ check: string; checked: boolean; violations: number }>;
  violations: Array<{ check: string; detail: string }>;
  skipped: string[];
  /** True when Ctrl-C ended the turns before `--duration`. */
  interrupted: boolean;
  ok: boolean;
}

/** Whether `check` means anything for a run that ran these parts. */
function applies(check: Check, ran: WorkloadResult["ran"]): boolean {
  switch (check) {
    case "acknowledged events are readable, in order":
    case "watchers see every event exactly once, in order":
      return ran.events;
    case "no two owners hold one lease":
    case "lease tokens rise on takeover":
    case "leases renew until released":
      return ran.leases;
    case "no slot fires twice":
    case "the store counted every claim and fire":
      return ran.scheduler;
    default:
      return true;
  }
}

/** Builds the summary of a finished run. */
export function summarize(r: WorkloadResult): WorkloadSummary {
  const secs = Math.max(r.writeSeconds, 0.001);
  const rpcs = r.stats.all().map((s) => {
    const sorted = [...s.samples].sort((a, b) => a - b);
    return {
      rpc: s.name,
      calls: s.calls,
      errors: s.errors,
      rejected: s.rejected,
      callsPerSecond: s.calls / secs,
      mibPerSecond: (s.bytesIn + s.bytesOut) / MiB / secs,
      p50Ms: percentile(sorted, 50),
      p99Ms: percentile(sorted, 99),
    };
  });
  const t = r.stats.totals();
  return {
    writeSeconds: r.writeSeconds,
    totals: { calls: t.calls, errors: t.errors, callsPerSecond: t.calls / secs, mibPerSecond: t.bytes / MiB / secs },
    rpcs,
    counts: {
      sessions: r.sessions,
      turns: r.turns,
      leaseGrants: r.leaseGrants,
      claims: r.claims,
      lostClaims: r.lostClaims,
      crashes: r.crashes,
      watcherReconnects: r.watcherReconnects,
      watcherResumes: r.watcherResumes,
      outageRetries: r.outageRetries,
    },
    checks: CHECKS.map((check) => ({ check, checked: applies(check, r.ran), violations: r.violations.count(check) })),
    violations: r.violations.list,
    skipped: r.skipped,
    interrupted: r.interrupted,
    ok: r.violations.total === 0,
  };
}

function fixed(n: number, digits: number): string {
  return n.toFixed(digits);
}

/** The human summary: per-RPC table, totals, counts, invariant checks with PASS/FAIL, and the first violations. */
export function formatSummary(s: WorkloadSummary): string {
  const lines: string[] = [];
  const head = ["RPC", "CALLS", "REFUSED", "ERRORS", "CALLS/S", "MiB/S", "P50 ms", "P99 ms"];
  const rows = s.rpcs.map((r) => [r.rpc, String(r.calls), String(r.rejected), String(r.errors), fixed(r.callsPerSecond, 1), fixed(r.mibPerSecond, 2), fixed(r.p50Ms, 2), fixed(r.p99Ms, 2)]);
  rows.push(["total", String(s.totals.calls), "", String(s.totals.errors), fixed(s.totals.callsPerSecond, 1), fixed(s.totals.mibPerSecond, 2), "", ""]);
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const fmt = (r: string[]) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ");
  lines.push(`workload: ${fixed(s.writeSeconds, 1)} s of turns${s.interrupted ? " (interrupted)" : ""}; REFUSED = expected answers such as a lease held by another owner or a claim that lost its slot`, "", fmt(head), ...rows.map(fmt), "");
  const c = s.counts;
  lines.push(
    `sessions ${c.sessions}, turns ${c.turns}, lease grants ${c.leaseGrants}, claims ${c.claims} (${c.lostClaims} lost races), crashes ${c.crashes}, watcher reconnects ${c.watcherReconnects}, resumes after errors ${c.watcherResumes}, retries through outages ${c.outageRetries}`,
  );
  for (const sk of s.skipped) lines.push(`skipped: ${sk}`);
  lines.push("", "INVARIANT".padEnd(52) + "RESULT");
  for (const ch of s.checks) lines.push(ch.check.padEnd(52) + (ch.violations > 0 ? `FAIL (${ch.violations})` : ch.checked ? "PASS" : "not run"));
  if (s.violations.length > 0) {
    lines.push("", "violations:");
    for (const v of s.violations) lines.push(`  ${v.check}: ${v.detail}`);
  }
  lines.push("", s.ok ? "OK" : "FAILED");
  return `${lines.join("\n")}\n`;
}
