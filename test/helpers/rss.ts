import { readFileSync } from "node:fs";

/** Resident set size of process `pid` in bytes, from `/proc/<pid>/status` (Linux). */
export function rssBytes(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m === null ? NaN : Number(m[1]) * 1024;
}

/** A running RSS sampler; `stop()` returns the highest and the last sample, in bytes. */
export interface RssSampler {
  stop(): { peak: number; last: number };
}

/** Samples the RSS of `pid` every `everyMs` milliseconds until stopped. */
export function sampleRss(pid: number, everyMs = 50): RssSampler {
  let peak = rssBytes(pid);
  let last = peak;
  const timer = setInterval(() => {
    last = rssBytes(pid);
    peak = Math.max(peak, last);
  }, everyMs);
  return {
    stop() {
      clearInterval(timer);
      last = rssBytes(pid);
      return { peak: Math.max(peak, last), last };
    },
  };
}

/** Bytes as MiB with one decimal. */
export function mib(bytes: number): string {
  return (bytes / (1024 * 1024)).toFixed(1);
}
