import type { ServerProcess } from "./server.js";


/**
 * Reads the value of the unlabelled metric `name` (e.g.
 * `mecatl_drivers_followers`) from a test server's `/metrics`; unlike
 * {@link metricValue}, an absent metric is an error.
 *
 * @throws Error when the server was started without `--metrics-listen`, or
 *   does not export `name`.
 */
export async function serverMetric(server: ServerProcess, name: string): Promise<number> {
  if (server.metricsAddress === undefined) throw new Error(`cannot read ${name}: start the server with --metrics-listen 127.0.0.1:0`);
  const value = sampleValue(await scrape(server.metricsAddress), name);
  if (value === undefined) throw new Error(`the server exports no metric ${name}`);
  return value;
}

/** Serve flag that exports metrics on an ephemeral port (read with {@link metricValue}). */
export const METRICS_FLAGS = ["--metrics-listen", "127.0.0.1:0"] as const;

/**
 * Reads one sample from a server's Prometheus text at
 * `http://<metricsAddress>/metrics`: the metric `name` whose labels include
 * every pair in `labels` (all samples of `name` summed when several match).
 *
 * @returns the value, or 0 when no sample matches (a labelled gauge that was
 *   never set is absent).
 */
export async function metricValue(metricsAddress: string, name: string, labels: Record<string, string> = {}): Promise<number> {
  let sum = 0;
  for (const s of samples(await scrape(metricsAddress))) {
    if (s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v)) sum += s.value;
  }
  return sum;
}

/**
 * Calls of one method whose handler is running on the server
 * (`mecatl_drivers_rpcs_in_flight`): the signal that a request has arrived,
 * for tests that must act while it is in flight.
 */
export function rpcsInFlight(metricsAddress: string, method: string): Promise<number> {
  return metricValue(metricsAddress, "mecatl_drivers_rpcs_in_flight", { method });
}

/** One sample of the Prometheus text exposition: metric name, labels and value. */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** GETs `http://ADDRESS/metrics` and returns the text. @throws Error on a non-200 answer. */
export async function scrape(address: string): Promise<string> {
  const res = await fetch(`http://${address}/metrics`);
  if (res.status !== 200) throw new Error(`GET /metrics answered ${res.status}`);
  return res.text();
}

/** The samples of an exposition text (comment lines skipped; label values unescaped for `\"` and `\\`). */
export function samples(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split("\n")) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)/.exec(line);
    if (m === null) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!.replace(/\\(.)/g, "$1");
    out.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return out;
}

/** The value of the sample `name` whose labels include `labels`, or undefined when there is none. */
export function sampleValue(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  return samples(text).find((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))?.value;
}
