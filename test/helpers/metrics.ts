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
  const text = await (await fetch(`http://${server.metricsAddress}/metrics`)).text();
  const m = new RegExp(`^${name} (\\S+)$`, "m").exec(text);
  if (m === null) throw new Error(`the server exports no metric ${name}`);
  return Number(m[1]);
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
  const text = await (await fetch(`http://${metricsAddress}/metrics`)).text();
  let sum = 0;
  for (const line of text.split("\n")) {
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (m === null || m[1] !== name) continue;
    const have = m[2] ?? "";
    if (Object.entries(labels).every(([k, v]) => have.includes(`${k}="${v}"`))) sum += Number(m[3]);
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
