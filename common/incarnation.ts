import { createHash } from "node:crypto";

/** Newly minted incarnation: `inc_` + 26 lowercase base32 characters of 16 random bytes (last one carries 2 zero bits). */
const MINTED = /^inc_[a-z2-7]{25}[aeimquy4]$/;

/** Legacy incarnation: `legacy_` + the hex of a SHA-256 digest (Go's hex decoding accepts either case). */
const LEGACY = /^legacy_[0-9a-fA-F]{64}$/;

/**
 * True when `id` is a valid session incarnation id (spec/session-metadata.md
 * section 1.5): `inc_` followed by 26 characters of `a-z2-7` whose last is one
 * of `aeimquy4`, or `legacy_` followed by 64 hex digits. The empty string is
 * not valid (an empty incarnation in a payload is replaced by
 * {@link legacyIncarnation}).
 */
export function isValidIncarnation(id: string): boolean {
  return MINTED.test(id) || LEGACY.test(id);
}

/** Go's `binary.PutVarint`: zig-zag, then little-endian groups of 7 bits with the high bit as continuation. */
function varint(x: bigint): Buffer {
  let ux = BigInt.asUintN(64, x << 1n);
  if (x < 0n) ux = BigInt.asUintN(64, ~ux);
  const out: number[] = [];
  while (ux >= 0x80n) {
    out.push(Number(ux & 0x7fn) | 0x80);
    ux >>= 7n;
  }
  out.push(Number(ux));
  return Buffer.from(out);
}

/**
 * Go's `time.Time.UnixNano` of an instant given in nanoseconds since the
 * epoch: the same value, wrapped to a signed 64-bit integer as Go's int64
 * arithmetic wraps for instants outside 1678-2262 (the zero time gives
 * -6795364578871345152).
 */
export function goUnixNano(nanos: bigint): bigint {
  return BigInt.asIntN(64, nanos);
}

/**
 * The deterministic incarnation the harness gives a session whose snapshot
 * has none (spec/session-metadata.md section 1.5):
 * `legacy_` + hex(SHA-256("mecatl.session-incarnation/legacy-v1" ‖ 0x00 ‖
 * uint64_BE(len(id bytes)) ‖ id bytes ‖ varint(created_at UnixNano) ‖
 * ownerScope)).
 *
 * @param createdAtNanos the payload's `created_at` in nanoseconds since the
 *   epoch (Go's zero time when absent).
 * @param ownerScope the 32-byte principal scope hash of the owner (see
 *   common/principal-scope.ts).
 */
export function legacyIncarnation(sessionId: string, createdAtNanos: bigint, ownerScope: Uint8Array): string {
  const id = Buffer.from(sessionId, "utf8");
  const len = Buffer.alloc(8);
  len.writeBigUInt64BE(BigInt(id.length));
  const digest = createHash("sha256")
    .update("mecatl.session-incarnation/legacy-v1")
    .update(Buffer.of(0))
    .update(len)
    .update(id)
    .update(varint(goUnixNano(createdAtNanos)))
    .update(ownerScope)
    .digest("hex");
  return `legacy_${digest}`;
}
