import { randomBytes } from "node:crypto";

/** A session owner as the harness's `Principal` (spec/session-metadata.md section 1.7). */
export interface TestPrincipal {
  Issuer: string;
  Subject: string;
  GrantType?: string;
  Name?: string;
}

/** What a test session needs; everything else gets the fixtures' defaults. */
export interface TestSession {
  id: string;
  state?: string;
  turns?: number;
  createdAt?: string;
  /** A valid incarnation, `""` to leave it out (legacy), default a fresh one. */
  incarnation?: string;
  messages?: Array<{ role: string; text?: string }>;
  kind?: string;
  relationship?: Record<string, string | number>;
  modelId?: string;
  title?: string;
  titleProvenance?: string;
  owner?: TestPrincipal;
  env?: { Kind: string; ID: string; Revision: string };
}

const BASE32 = "abcdefghijklmnopqrstuvwxyz234567";

/** A fresh incarnation id as the harness mints it: `inc_` + unpadded lowercase base32 of 16 random bytes. */
export function newIncarnation(): string {
  const bytes = randomBytes(16);
  let bits = 0;
  let value = 0;
  let out = "inc_";
  for (const b of bytes) {
    value = (value << 8) | b;
    bits += 8;
    while (bits >= 5) {
      out += BASE32[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  return out + BASE32[(value << (5 - bits)) & 31];
}

/**
 * The session as the harness's `sessnap-json/1` encoder writes it: one JSON
 * object, keys in Go's struct order, snake_case tags on top and Go field
 * names in nested structs (spec/session-metadata.md section 1).
 */
export function sessnapObject(s: TestSession): Record<string, unknown> {
  const o: Record<string, unknown> = {
    id: s.id,
    state: s.state ?? "idle",
    mode: "default",
    limits: { MaxTurns: 7, MaxToolCalls: 21, MaxConsecutiveFailures: 3 },
    counters: { Turns: s.turns ?? 0, ToolCalls: 0, ConsecutiveFailures: 0 },
    created_at: s.createdAt ?? "1970-01-01T00:00:01Z",
  };
  const incarnation = s.incarnation ?? newIncarnation();
  if (incarnation !== "") o.incarnation = incarnation;
  o.messages = s.messages ?? [];
  if (s.kind !== undefined) o.kind = s.kind;
  if (s.relationship !== undefined) o.relationship = s.relationship;
  if (s.modelId !== undefined) o.model_id = s.modelId;
  if (s.title !== undefined) o.title = s.title;
  if (s.titleProvenance !== undefined) o.title_provenance = s.titleProvenance;
  o.token_usage = {};
  if (s.owner !== undefined) o.owner = { GrantType: "user", Name: "", ...s.owner };
  o.environment_ref = s.env ?? { Kind: "local", ID: "/workspace", Revision: "in-tree-v1" };
  return o;
}

/** {@link sessnapObject} encoded as the payload bytes the harness sends. */
export function sessnap(s: TestSession): Uint8Array {
  return Buffer.from(JSON.stringify(sessnapObject(s)), "utf8");
}

/** The incarnation inside a payload built by {@link sessnap}. */
export function incarnationOf(payload: Uint8Array): string {
  return (JSON.parse(Buffer.from(payload).toString("utf8")) as { incarnation: string }).incarnation;
}
