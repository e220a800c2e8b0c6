import { randomBytes } from "node:crypto";

/** Random bytes drawn from the system at a time: 512 ids' worth. */
const POOL_BYTES = 4096;

let pool: Buffer = Buffer.alloc(0);
let used = 0;

/**
 * A fresh random id of 16 lowercase hex characters (64 bits from the
 * operating system's CSPRNG, as `randomBytes(8).toString("hex")` gives),
 * taken from a pool refilled 4 KiB at a time: one `randomBytes(8)` call per
 * id cost more than the rest of a small Redis write's client work put
 * together (issue 11). Each pool byte is used once.
 */
export function randomHexId(): string {
  if (used + 8 > pool.length) {
    pool = randomBytes(POOL_BYTES);
    used = 0;
  }
  used += 8;
  return pool.toString("hex", used - 8, used);
}
