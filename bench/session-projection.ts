/**
 * Session projection benchmark (issue 12): what projecting a 16 MiB
 * `sessnap-json/1` snapshot costs beside the Save of that snapshot.
 *
 * Two payload shapes of 16 MiB each, built like the harness's encoder writes
 * them (Go field order, snake_case on top, Go names nested):
 *  - transcript, code-dense: ~33k messages, mostly code with escaped quotes
 *    and newlines in tool calls (JSON arguments) and tool results: one quote
 *    every ~20 bytes, the hardest case for a skimmer;
 *  - transcript, prose: ~7k messages, mostly prose: one quote every ~150 bytes;
 *  - media: a dozen messages and one ~15 MiB base64 image part.
 * For each, in one run:
 *  - projection with the activity given (the harness always sends it): the
 *    top level is read and `messages` skimmed;
 *  - projection with no activity and a draft conversation (no genuine
 *    prompt), the worst case: every message is walked;
 *  - `JSON.parse` of the payload, the naive alternative, for scale;
 *  - one durable Save of the payload through the driver (gRPC, SQLite file
 *    and spawned Redis), which includes the projection;
 *  - what the projection adds to a Save: the same payload saved through a
 *    session store opened in this process (its own SQLite file, its own
 *    Redis key prefix), four ways, in rotating order: projected on the
 *    projection worker while the whole payload is staged (this build's
 *    Save of a payload over 1 MiB, both backends), projected inline as a
 *    function the store calls as staging starts (the previous build: on
 *    SQLite while the first chunk is written, on Redis before the staging),
 *    computed first and then handed over (the Save before issue 12's
 *    overlap), and precomputed outside the timing (a Save without
 *    projection). The added cost is the median of each round's difference
 *    to the precomputed Save; for the worker Saves, also how long before
 *    the Save's answer the worker had answered (when that exceeds the
 *    publishing write, the Save never waited for the projection);
 *  - what the worker costs the main thread: the synchronous part of handing
 *    a payload to the worker (its copy into the shared buffer and the post),
 *    with the buffer reused and with a fresh one (the first large Save, or
 *    one after the spare buffer was released: allocated, warmed by the
 *    worker, then copied), and the worker's round trip.
 * Figures are medians of repeated runs; compare them as ratios. With
 * `--baseline` (another build's dist/services/session-store/projection.js,
 * e.g. main's, built as bench/RESULTS.md says) both projections run
 * interleaved in the same loop, their results must be equal, and a second
 * table compares their CPU time (process CPU time, which the load of other
 * processes sways less than the wall clock).
 *
 * Run: npx tsc -p tsconfig.json && node dist/bench/session-projection.js [saves-per-target] [--baseline projection.js] [--shape dense|prose|media ...]
 * (`--shape`, repeatable: only those payloads; default all three).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { isDeepStrictEqual, parseArgs } from "node:util";
import { SessionStoreService } from "../gen/mecatl/driver/v1/session_store_pb.js";
import { projectSnapshot } from "../services/session-store/projection.js";
import { ProjectionThread } from "../services/session-store/projection-thread.js";
import { closeBackend, openBackend } from "../services/storage/backend.js";
import { openSessionStore } from "../services/session-store/open.js";
import { startServer } from "../test/helpers/server.js";
import { spawnRedis } from "../test/helpers/redis-server.js";
import { rawGrpcClient, rawUnary } from "../test/helpers/raw-grpc.js";
import { sessnapObject } from "../test/helpers/sessnap.js";
import { fmt, quantile } from "./lib/measure.js";

const { values: opts, positionals } = parseArgs({ options: { baseline: { type: "string" }, shape: { type: "string", multiple: true } }, allowPositionals: true });
const SAVES = Number(positionals[0] ?? 10);
type Project = typeof projectSnapshot;
const baseline = opts.baseline === undefined ? undefined : ((await import(pathToFileURL(resolve(opts.baseline)).href)) as { projectSnapshot: Project }).projectSnapshot;
const TARGET_BYTES = 16 * 1024 * 1024;

const CODE = 'function f(x) {\n  return "quoted \\"text\\"" + x; // with a backslash \\\\ and a tab\t\n}\n';
const PROSE = "The harness keeps its durable state outside its own process, and this paragraph stands in for a model's answer. ";

/**
 * ~16 MiB of conversation in turns of four messages (a user message, an
 * assistant message with a tool call, a tool result, an assistant answer);
 * `density` scales how much of it is code with escaped quotes (tool call
 * arguments are JSON inside a string, so their quotes are escaped twice)
 * against plain prose. `prompted` puts one genuine user prompt near the
 * start; otherwise every user message is a compaction summary (a draft, the
 * worst case for deriving activity).
 */
function transcript(prompted: boolean, density: "dense" | "prose"): object[] {
  const code = density === "dense" ? 3 : 1;
  const prose = density === "dense" ? 1 : 8;
  const messages: object[] = [];
  let bytes = 0;
  for (let i = 0; bytes < TARGET_BYTES - 4096; i++) {
    const m =
      i % 4 === 0
        ? { role: "user", text: `[conversation compacted] turn ${i}` }
        : i % 4 === 1
          ? { role: "assistant", text: PROSE.repeat(4 * prose), tool_calls: [{ ID: `call-${i}`, Name: "edit", Args: JSON.stringify({ path: `src/${i}.ts`, content: CODE.repeat(code) }) }] }
          : i % 4 === 2
            ? { role: "tool", tool_results: [{ call_id: `call-${i - 1}`, content: CODE.repeat(2 * code) + PROSE.repeat(prose) }] }
            : { role: "assistant", text: PROSE.repeat(2 * prose), reasoning: PROSE.repeat(prose) };
    if (prompted && i === 4) (m as { text: string }).text = "please refactor the parser";
    bytes += JSON.stringify(m).length + 1;
    messages.push(m);
  }
  return messages;
}

/** A few messages and one large base64 image part, padding the payload to ~16 MiB. */
function media(): object[] {
  const head = Array.from({ length: 12 }, (_, i) => ({ role: i % 2 === 0 ? "assistant" : "tool", text: PROSE }));
  const image = Buffer.alloc(((TARGET_BYTES - 8192) * 3) / 4, 0x5a).toString("base64");
  return [...head, { role: "user", text: "", parts: [{ kind: "image", mime: "image/png", data: image }] }];
}

function payloadOf(id: string, messages: object[]): Buffer {
  const o = sessnapObject({
    id,
    kind: "subagent",
    relationship: { parent_session_id: "root", call_id: "call-0" },
    owner: { Issuer: "https://issuer.example", Subject: "alice" },
    title: "refactor the parser",
    modelId: "anthropic/claude-3.5-sonnet",
  });
  return Buffer.from(JSON.stringify({ ...o, messages }));
}

/** Milliseconds one call of `fn` takes. */
async function timed(fn: () => unknown): Promise<number> {
  const t = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - t) / 1e6;
}

/** Milliseconds of this process's CPU time (user and system) one synchronous call of `fn` takes: less swayed by other processes' load than the wall clock. */
function cpuTimed(fn: () => unknown): number {
  const t = process.cpuUsage();
  fn();
  const d = process.cpuUsage(t);
  return (d.user + d.system) / 1000;
}

const median = (xs: number[]) => quantile([...xs].sort((a, b) => a - b), 0.5);

/**
 * The main thread's share of a worker projection of `payload`: the
 * synchronous part of {@link ProjectionThread.project} and the round
 * trip, with the spare buffer reused and with a fresh buffer, and the inline projection for
 * scale; medians of 15 rounds, one table row.
 */
async function handOver(thread: ProjectionThread, shape: string, id: string, payload: Buffer): Promise<string> {
  const m = { reused: [] as number[], trip: [] as number[], fresh: [] as number[], freshTrip: [] as number[], inline: [] as number[] };
  for (let i = 0; i < 15; i++) {
    let t = process.hrtime.bigint();
    const answer = thread.project(id, payload, "active");
    m.reused.push(Number(process.hrtime.bigint() - t) / 1e6);
    await answer;
    m.trip.push(Number(process.hrtime.bigint() - t) / 1e6);
    // A started worker whose spare buffer is too small for the payload: the hand-over allocates a fresh one, which the worker warms first.
    const fresh = new ProjectionThread();
    await fresh.project(id, Buffer.from(JSON.stringify({ id })), "active");
    t = process.hrtime.bigint();
    const again = fresh.project(id, payload, "active");
    m.fresh.push(Number(process.hrtime.bigint() - t) / 1e6);
    await again;
    m.freshTrip.push(Number(process.hrtime.bigint() - t) / 1e6);
    await fresh.stop();
    m.inline.push(await timed(() => projectSnapshot(id, payload, "active")));
  }
  return `| ${shape} | ${(["reused", "trip", "fresh", "freshTrip", "inline"] as const).map((k) => fmt(median(m[k]))).join(" | ")} |`;
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), "mecatl-bench-"));
  const redis = await spawnRedis();
  const targets = [
    { name: "sqlite", server: await startServer(["session-store", "--store", `sqlite:${join(dir, "driver.sqlite")}`, "--log-level", "warn"]), backend: await openBackend({ store: `sqlite:${join(dir, "in-process.sqlite")}` }) },
    { name: "redis", server: await startServer(["session-store", "--store", redis.url, "--log-level", "warn"]), backend: await openBackend({ store: redis.url, redisKeyPrefix: "bench-in-process:" }) },
  ];
  const shapes = [
    { key: "dense", shape: "transcript, code-dense", build: () => ({ active: transcript(true, "dense"), draft: transcript(false, "dense") }) },
    { key: "prose", shape: "transcript, prose", build: () => ({ active: transcript(true, "prose"), draft: transcript(false, "prose") }) },
    { key: "media", shape: "media", build: () => ({ active: media(), draft: media().slice(0, 12).concat([{ role: "user", text: `[conversation compacted] ${"x".repeat(TARGET_BYTES - 8192)}` }]) }) },
  ]
    .filter((s) => opts.shape === undefined || opts.shape.includes(s.key))
    .map(({ shape, build }) => ({ shape, ...build() }));
  const lines: string[] = [];
  const cpuLines: string[] = [];
  const addedLines: string[] = [];
  const handLines: string[] = [];
  const thread = new ProjectionThread();
  for (const s of shapes) {
    const id = `bench-${s.shape.replace(/\W+/g, "-")}`;
    const active = payloadOf(id, s.active);
    const draft = payloadOf(id, s.draft);
    // CPU time of each projection, both backends' rounds together (the projection does not depend on the backend).
    const cpu = { given: [] as number[], derived: [] as number[], baseGiven: [] as number[], baseDerived: [] as number[] };
    const project = (into: { wall: number[]; cpu: number[] }, fn: () => unknown) => {
      const t = process.hrtime.bigint();
      into.cpu.push(cpuTimed(fn));
      into.wall.push(Number(process.hrtime.bigint() - t) / 1e6);
    };
    for (const t of targets) {
      const client = rawGrpcClient(SessionStoreService, t.server.address);
      const store = openSessionStore(t.backend);
      await store.open();
      const snapshot = { format: "sessnap-json/1", payload: active };
      const precomputed = projectSnapshot(id, active, "active");
      const storeSaves = [
        {
          into: "thread" as const,
          save: async () => {
            let answered = 0n;
            await store.save(id, snapshot, () =>
              thread.project(id, active, "active").then((p) => {
                answered = process.hrtime.bigint();
                return p;
              }),
            );
            slack.push(Number(process.hrtime.bigint() - answered) / 1e6);
          },
        },
        { into: "inside" as const, save: () => store.save(id, snapshot, () => projectSnapshot(id, active, "active")) },
        { into: "first" as const, save: () => store.save(id, snapshot, projectSnapshot(id, active, "active")) },
        { into: "none" as const, save: () => store.save(id, snapshot, precomputed) },
      ];
      // Per worker Save: milliseconds from the worker's answer to the Save's answer (the projection was not waited for when this exceeds the publishing write).
      const slack: number[] = [];
      const added = { thread: [] as number[], inside: [] as number[], first: [] as number[], none: [] as number[] };
      const save = () => rawUnary(client, SessionStoreService.method.save, { sessionId: id, snapshot: { format: "sessnap-json/1", payload: active }, activityState: "active" });
      await save();
      if (baseline !== undefined) {
        for (const [payload, activity] of [[active, "active"], [draft, ""]] as const) {
          if (!isDeepStrictEqual(baseline(id, payload, activity), projectSnapshot(id, payload, activity))) throw new Error(`${s.shape}: the baseline projects differently`);
        }
      }
      // Interleaved, so that load drifting on a shared machine falls on every figure alike.
      const m = { save: [] as number[], given: [] as number[], derived: [] as number[], baseGiven: [] as number[], baseDerived: [] as number[], parse: [] as number[] };
      for (let i = 0; i < SAVES; i++) {
        if (baseline !== undefined) project({ wall: m.baseGiven, cpu: cpu.baseGiven }, () => baseline(id, active, "active"));
        project({ wall: m.given, cpu: cpu.given }, () => projectSnapshot(id, active, "active"));
        if (baseline !== undefined) project({ wall: m.baseDerived, cpu: cpu.baseDerived }, () => baseline(id, draft, ""));
        project({ wall: m.derived, cpu: cpu.derived }, () => projectSnapshot(id, draft, ""));
        m.parse.push(await timed(() => JSON.parse(active.toString("utf8"))));
        m.save.push(await timed(save));
        for (let k = 0; k < storeSaves.length; k++) {
          const v = storeSaves[(i + k) % storeSaves.length]!;
          added[v.into].push(await timed(v.save));
        }
      }
      // Each round's own difference, so that load drifting between rounds cancels out.
      const over = (xs: number[]) => median(xs.map((x, i) => x - added.none[i]!));
      const none = median(added.none);
      // The fastest of each: the Save least disturbed by other processes.
      const minNone = Math.min(...added.none);
      const pct = (x: number, of: number) => `${fmt((x / of) * 100, 2)}%`;
      const cells = (["first", "inside", "thread"] as const).map((k) => {
        const [med, fastest] = [over(added[k]), Math.min(...added[k]) - minNone];
        return { k, med, fastest, text: `${fmt(med)} | ${pct(med, none)} | ${fmt(fastest)} | ${pct(fastest, minNone)}` };
      });
      process.stderr.write(`${s.shape} on ${t.name}: store Save ${fmt(none)} ms without projection (fastest ${fmt(minNone)}); projection adds ${cells.map((c) => `${c.k} ${fmt(c.med)} (fastest ${fmt(c.fastest)})`).join(", ")}\n`);
      addedLines.push(`| ${s.shape} | ${t.name} | ${fmt(none)} | ${fmt(minNone)} | ${cells.map((c) => c.text).join(" | ")} | ${fmt(Math.min(...slack))} | ${fmt(median(slack))} |`);
      const [sv, gv, dv, pv] = [median(m.save), median(m.given), median(m.derived), median(m.parse)];
      const base = (xs: number[]) => (xs.length === 0 ? "–" : fmt(median(xs)));
      process.stderr.write(`${s.shape} on ${t.name}: Save ${fmt(sv)} ms, projection ${fmt(gv)} ms (baseline ${base(m.baseGiven)}; derived ${fmt(dv)} ms, baseline ${base(m.baseDerived)}), JSON.parse ${fmt(pv)} ms\n`);
      lines.push(
        `| ${s.shape} | ${(active.length / 1048576).toFixed(1)} | ${t.name} | ${fmt(sv)} | ${base(m.baseGiven)} | ${fmt(gv)} | ${fmt((gv / sv) * 100, 2)}% | ${base(m.baseDerived)} | ${fmt(dv)} | ${fmt((dv / sv) * 100, 2)}% | ${fmt(pv)} |`,
      );
    }
    handLines.push(await handOver(thread, s.shape, id, active));
    if (baseline !== undefined) {
      const [bg, g, bd, d] = [median(cpu.baseGiven), median(cpu.given), median(cpu.baseDerived), median(cpu.derived)];
      cpuLines.push(`| ${s.shape} | ${fmt(bg)} | ${fmt(g)} | ${fmt(bg / g, 2)}× | ${fmt(bd)} | ${fmt(d)} | ${fmt(bd / d, 2)}× |`);
    }
  }
  for (const t of targets) {
    await t.server.stop();
    await closeBackend(t.backend);
  }
  await redis.stop();
  rmSync(dir, { recursive: true, force: true });
  console.log("| payload | MiB | backend | Save p50 ms | activity sent: baseline ms | this build ms | ÷ Save | draft, derived: baseline ms | this build ms | ÷ Save | JSON.parse ms |");
  console.log("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|");
  for (const l of lines) console.log(l);
  console.log(
    "\nWhat the projection (activity sent) adds to a Save through an in-process store: for each way, the median of each round's difference to the same Save with the projection precomputed (÷ its median), then the fastest Save's difference to the fastest precomputed Save (÷ that):\n",
  );
  console.log(
    "| payload | backend | Save, precomputed p50 ms | fastest ms | computed first: adds ms | ÷ Save | fastest: adds ms | ÷ Save | inline as staging starts: adds ms | ÷ Save | fastest: adds ms | ÷ Save | on the worker while staging: adds ms | ÷ Save | fastest: adds ms | ÷ Save | worker answered before the Save, least ms | median ms |",
  );
  console.log("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
  for (const l of addedLines) console.log(l);
  console.log(
    "\nThe worker's cost to the main thread (synchronous part of handing a payload over: with the buffer reused, its copy and the post; with a fresh one, its allocation and the post asking the worker to warm it, the copy following the worker's answer) and the round trip, medians:\n",
  );
  console.log("| payload | hand-over, buffer reused ms | round trip ms | hand-over, fresh buffer ms | round trip ms | projection inline ms |");
  console.log("|---|---:|---:|---:|---:|---:|");
  for (const l of handLines) console.log(l);
  if (cpuLines.length === 0) return;
  console.log("\nCPU time of the projection (medians over both backends' rounds):\n");
  console.log("| payload | activity sent: baseline CPU ms | this build CPU ms | speed-up | draft, derived: baseline CPU ms | this build CPU ms | speed-up |");
  console.log("|---|---:|---:|---:|---:|---:|---:|");
  for (const l of cpuLines) console.log(l);
}

await main();
