import { randomBytes } from "node:crypto";

/** A small seeded PRNG (mulberry32): the same seed gives the same workload shape. */
export class Random {
  private state: number;

  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  /** A float in [0, 1). */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** A whole number in [min, max]. */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }

  /** A size in [min, max] bytes, skewed towards small ones (log-uniform), as tool output is. */
  size(min: number, max: number): number {
    return Math.round(Math.exp(Math.log(min) + this.next() * (Math.log(max) - Math.log(min))));
  }

  /** True with probability `p`. */
  chance(p: number): boolean {
    return this.next() < p;
  }
}

const WORDS = "the agent reads a file then runs the tests and the build fails because a type is missing so it edits the module adds an import checks the diff and runs them again until they pass while the user waits for a summary of what changed and why".split(" ");

/** 1 MiB of word text (JSON-safe: letters and spaces only), sliced for prompts, reasoning and tool output. */
const TEXT = (() => {
  const parts: string[] = [];
  let n = 0;
  let i = 0;
  while (n < 1 << 20) {
    const w = WORDS[(i * 7 + (i >> 3)) % WORDS.length]!;
    parts.push(w);
    n += w.length + 1;
    i++;
  }
  return parts.join(" ");
})();

/** 2 MiB of base64 (random bytes), sliced for inline media parts. */
const MEDIA = randomBytes(3 << 19).toString("base64");

/** `bytes` characters of word text from a random offset. */
export function text(rng: Random, bytes: number): string {
  const start = rng.int(0, TEXT.length - bytes - 1);
  return TEXT.slice(start, start + bytes);
}

/** `bytes` characters of base64 media from a random offset. */
export function media(rng: Random, bytes: number): string {
  const n = Math.min(bytes, MEDIA.length - 1) & ~3;
  const start = rng.int(0, (MEDIA.length - n - 1) >> 2) << 2;
  return MEDIA.slice(start, start + n);
}

/** One event a harness turn produces: its JSON text and the message it adds to the snapshot, if any. */
export interface TurnEvent {
  json: string;
  message?: string;
}

const TOOLS = ["Read", "Edit", "Bash", "Grep", "Write", "WebFetch"];

/**
 * The events of one turn as the harness appends them (100 B to 64 KiB each):
 * a user prompt (sometimes with inline media, 128 KiB to 1.5 MiB of base64 in
 * the snapshot only), coalesced reasoning, tool calls and their results, the
 * assistant's answer, and a turn-end record with usage. `seq` numbers each
 * event within the session from `firstSeq`.
 */
export function turnEvents(rng: Random, sessionId: string, turn: number, firstSeq: number, withMedia: boolean): TurnEvent[] {
  const out: TurnEvent[] = [];
  let seq = firstSeq;
  const time = () => new Date().toISOString();
  const ev = (type: string, body: Record<string, unknown>, message?: string) => {
    out.push({ json: JSON.stringify({ type, session_id: sessionId, seq: seq++, turn, time: time(), ...body }), message });
  };
  const prompt = text(rng, rng.size(100, 2048));
  const parts = withMedia ? [{ kind: "image", mime_type: "image/png", data: media(rng, rng.size(128 << 10, 1536 << 10)) }] : undefined;
  ev("user_prompt", { text: prompt, media_parts: parts === undefined ? 0 : 1 }, JSON.stringify({ role: "user", text: prompt, parts }));
  for (let i = rng.int(1, 3); i > 0; i--) ev("reasoning", { text: text(rng, rng.size(400, 8192)) });
  const calls: string[] = [];
  for (let i = rng.int(0, 4); i > 0; i--) {
    const callId = `call_${turn}_${i}_${rng.int(0, 1e9)}`;
    const tool = TOOLS[rng.int(0, TOOLS.length - 1)]!;
    const args = { path: `/work/src/module_${rng.int(1, 99)}.ts`, note: text(rng, rng.size(50, 2048)) };
    ev("tool_call", { call_id: callId, tool, args });
    calls.push(JSON.stringify({ id: callId, name: tool, args }));
    const result = text(rng, rng.size(100, 64 * 1024 - 512));
    ev("tool_result", { call_id: callId, tool, result, is_error: rng.chance(0.05) }, JSON.stringify({ role: "tool", tool_result: { call_id: callId, content: result } }));
  }
  const answer = text(rng, rng.size(200, 4096));
  ev("assistant_text", { text: answer }, JSON.stringify({ role: "assistant", text: answer, tool_calls: calls.length > 0 ? calls.map((c) => JSON.parse(c)) : undefined }));
  ev("turn_end", { usage: { input_tokens: rng.int(1000, 200_000), output_tokens: rng.int(50, 8000) }, stop: "end_turn" });
  return out;
}

/**
 * A session snapshot that grows turn by turn, kept as pre-serialised message
 * JSON so each Save only concatenates (the payload is `sessnap-json/1`-shaped:
 * `id` first, then state, counters and messages).
 */
export class SnapshotBuilder {
  private readonly messages: string[] = [];
  private messageBytes = 0;
  turns = 0;

  constructor(
    readonly sessionId: string,
    private readonly createdAt = new Date().toISOString(),
  ) {}

  /** Adds a turn's messages. */
  addTurn(events: readonly TurnEvent[]): void {
    for (const e of events) {
      if (e.message === undefined) continue;
      this.messages.push(e.message);
      this.messageBytes += e.message.length + 1;
    }
    this.turns++;
  }

  /** Approximate payload size in bytes. */
  get size(): number {
    return this.messageBytes + 400;
  }

  /** The UTF-8 payload of the current snapshot. */
  encode(): Uint8Array {
    const head = JSON.stringify({
      id: this.sessionId,
      state: "idle",
      mode: "default",
      kind: "main",
      created_at: this.createdAt,
      counters: { Turns: this.turns },
      environment_ref: { kind: "local", id: "/work", revision: "workload" },
      title: "workload session",
    });
    return new TextEncoder().encode(`${head.slice(0, -1)},"messages":[${this.messages.join(",")}]}`);
  }
}
