/**
 * Orders two strings byte-wise on their UTF-8 encoding, as Go compares
 * strings (session ids in PageMetadata and ReadLineage order, wire-contract.md
 * section 2.5). Negative when `a` sorts first, 0 when equal.
 *
 * UTF-8 byte order is code point order; it differs from JavaScript's UTF-16
 * code unit order only where a surrogate pair (U+10000 and above) meets a
 * code unit of U+E000-U+FFFF, which this corrects without encoding either
 * string. Strings from the wire hold no lone surrogates.
 */
export function compareIdBytes(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    let ca = a.charCodeAt(i);
    let cb = b.charCodeAt(i);
    if (ca === cb) continue;
    if (ca >= 0xd800 && cb >= 0xd800) {
      ca = ca >= 0xe000 ? ca - 0x800 : ca + 0x2000;
      cb = cb >= 0xe000 ? cb - 0x800 : cb + 0x2000;
    }
    return ca - cb;
  }
  return a.length - b.length;
}
