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
