import { createHash } from "node:crypto";

/** A field of a canonical record: absent (undefined or null), a string, a whole number, a boolean or bytes. */
export type CanonicalField = string | number | bigint | boolean | Uint8Array | null | undefined;

/**
 * Encodes a record's fields as one byte string that is equal exactly when
 * every field is equal (issue 14, copy verification): each field is a type
 * tag, its length as 4 bytes, then its bytes (strings as UTF-8, numbers in
 * decimal), so no two different field lists share an encoding.
 */
export function canonicalItem(fields: readonly CanonicalField[]): Uint8Array {
  const parts: Buffer[] = [];
  for (const f of fields) {
    const [tag, body] =
      f === undefined || f === null
        ? ["n", Buffer.alloc(0)]
        : typeof f === "string"
          ? ["s", Buffer.from(f, "utf8")]
          : typeof f === "number" || typeof f === "bigint"
            ? ["i", Buffer.from(String(f), "latin1")]
            : typeof f === "boolean"
              ? ["b", Buffer.from(f ? "1" : "0", "latin1")]
              : ["x", Buffer.from(f.buffer, f.byteOffset, f.byteLength)];
    const head = Buffer.alloc(5);
    head.write(tag, 0, "latin1");
    head.writeUInt32BE(body.byteLength, 1);
    parts.push(head, body);
  }
  return Buffer.concat(parts);
}

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
 * metadata row or relationship is compared this way; payloads the harness
 * sent are compared byte for byte instead).
 *
 * @throws SyntaxError when `text` is not JSON.
 */
export function canonicalJson(text: string): string {
  return JSON.stringify(sortKeys(JSON.parse(text)));
}

const MOD = 1n << 256n;

/**
 * An order-independent digest of a multiset of items (issue 14, copy
 * verification): the sum modulo 2^256 of each item's SHA-256. Two stores that
 * hold the same records give the same digest whatever order they are read
 * in; a record missing, added, duplicated or changed changes it.
 */
export class MultisetDigest {
  private sum = 0n;
  /** Items added. */
  items = 0;

  /** Adds one item. */
  add(item: Uint8Array): void {
    this.sum = (this.sum + BigInt(`0x${createHash("sha256").update(item).digest("hex")}`)) % MOD;
    this.items++;
  }

  /** Adds every item of another digest. */
  merge(other: MultisetDigest): void {
    this.sum = (this.sum + other.sum) % MOD;
    this.items += other.items;
  }

  /** True when both digests cover the same multiset (with overwhelming probability). */
  equals(other: MultisetDigest): boolean {
    return this.sum === other.sum && this.items === other.items;
  }

  /** The digest as 64 lowercase hex characters. */
  hex(): string {
    return this.sum.toString(16).padStart(64, "0");
  }
}
