import { createHash } from "node:crypto";

/** A field of a canonical record: absent (undefined or null), a string, a whole number, a boolean or bytes. */
export type CanonicalField = string | number | bigint | boolean | Uint8Array | null | undefined;

/**
 * A record's canonical form (issue 14, copy verification): its fields in a
 * fixed order. Two items are equal exactly when every field is (see
 * {@link MultisetDigest.add} for the encoding hashed).
 */
export type CanonicalItem = readonly CanonicalField[];

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value === null || typeof value !== "object") return value;
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(value).sort()) out[k] = sortKeys((value as Record<string, unknown>)[k]);
  return out;
}

/**
 * JSON text with every object's keys sorted and no white space, so two texts
 * of the same JSON value compare equal whatever their key order (a stored
 * metadata row is compared this way; payloads the harness sent are compared
 * byte for byte instead).
 *
 * @throws SyntaxError when `text` is not JSON.
 */
export function canonicalJson(text: string): string {
  return JSON.stringify(sortKeys(JSON.parse(text)));
}

const LANES = 8;

/**
 * An order-independent digest of a multiset of items (issue 14, copy
 * verification): the sum modulo 2^256 of each item's SHA-256. Two stores
 * that hold the same records give the same digest whatever order they are
 * read in; a record missing, added, duplicated or changed changes it.
 */
export class MultisetDigest {
  /** The sum as eight 32-bit lanes, most significant first. */
  private readonly sum = new Array<number>(LANES).fill(0);
  private readonly head = Buffer.alloc(5);
  /** Items added. */
  items = 0;

  /**
   * Adds one item: SHA-256 over each field as a type tag, its length as 4
   * bytes and its bytes (strings as UTF-8, numbers in decimal), so no two
   * different field lists hash the same input.
   */
  add(item: CanonicalItem): void {
    const hash = createHash("sha256");
    for (const f of item) {
      let tag: string;
      let body: Uint8Array | string;
      if (f === undefined || f === null) [tag, body] = ["n", ""];
      else if (typeof f === "string") [tag, body] = ["s", f];
      else if (typeof f === "number" || typeof f === "bigint") [tag, body] = ["i", String(f)];
      else if (typeof f === "boolean") [tag, body] = ["b", f ? "1" : "0"];
      else [tag, body] = ["x", f];
      this.head[0] = tag.charCodeAt(0);
      this.head.writeUInt32BE(typeof body === "string" ? Buffer.byteLength(body, "utf8") : body.byteLength, 1);
      hash.update(this.head);
      hash.update(body);
    }
    this.addHash(hash.digest());
  }

  private addHash(h: Buffer): void {
    let carry = 0;
    for (let i = LANES - 1; i >= 0; i--) {
      const v = this.sum[i]! + h.readUInt32BE(i * 4) + carry;
      this.sum[i] = v >>> 0;
      carry = v > 0xffffffff ? 1 : 0;
    }
    this.items++;
  }

  /** Adds every item of another digest. */
  merge(other: MultisetDigest): void {
    const h = Buffer.alloc(LANES * 4);
    other.sum.forEach((v, i) => h.writeUInt32BE(v, i * 4));
    this.addHash(h);
    this.items += other.items - 1;
  }

  /** True when both digests cover the same multiset (with overwhelming probability). */
  equals(other: MultisetDigest): boolean {
    return this.items === other.items && this.sum.every((v, i) => v === other.sum[i]);
  }

  /** The digest as 64 lowercase hex characters. */
  hex(): string {
    return this.sum.map((v) => v.toString(16).padStart(8, "0")).join("");
  }
}
