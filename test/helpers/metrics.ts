import type { ServerProcess } from "./server.js";

/**
 * Reads the value of the unlabelled metric `name` (e.g.
 * `mecatl_drivers_followers`) from a test server's `/metrics`.
 *
 * @throws Error when the server was started without `--metrics-listen`, or
 *   does not export `name`.
 */
export async function metricValue(server: ServerProcess, name: string): Promise<number> {
  if (server.metricsAddress === undefined) throw new Error(`cannot read ${name}: start the server with --metrics-listen 127.0.0.1:0`);
  const text = await (await fetch(`http://${server.metricsAddress}/metrics`)).text();
  const m = new RegExp(`^${name} (\\S+)$`, "m").exec(text);
  if (m === null) throw new Error(`the server exports no metric ${name}`);
  return Number(m[1]);
}

/** Serve flag that exports metrics on an ephemeral port (read with {@link metricValue}). */
export const METRICS_FLAGS = ["--metrics-listen", "127.0.0.1:0"] as const;
