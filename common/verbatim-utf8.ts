import { configureTextEncoding } from "@bufbuild/protobuf/wire";

/**
 * Decodes UTF-8 bytes exactly: a leading U+FEFF (byte order mark) is kept,
 * not dropped as a default `TextDecoder` drops it; `decode` throws a
 * TypeError on bytes that are not UTF-8 (wire-contract.md section 1).
 */
export const strictUtf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** Decodes UTF-8 bytes keeping a leading U+FEFF, as {@link strictUtf8}, but reads bytes that are not UTF-8 as U+FFFD instead of throwing. */
export const lenientUtf8 = new TextDecoder("utf-8", { ignoreBOM: true });

/**
 * Makes protobuf-es decode `string` fields verbatim, for every message this
 * process decodes (requests on the server, answers in the clients).
 *
 * protobuf-es decodes strings with a default `TextDecoder`, which drops a
 * byte order mark (U+FEFF) at the start of the text. U+FEFF is an ordinary
 * code point in a protobuf string (Go's runtime, the harness's, keeps it), so
 * the default made `"\ufeffa"` and `"a"` one session id, one lease owner, one
 * event log: two owners could hold one lease. The decoders set here
 * ({@link strictUtf8}, {@link lenientUtf8}) keep it;
 * strict decoding (protobuf-es's `validateUtf8`, on by default) still refuses
 * invalid UTF-8 (wire-contract.md section 1).
 *
 * The setting is process-wide (protobuf-es keeps it on `globalThis`);
 * calling this again changes nothing.
 */
export function decodeStringsVerbatim(): void {
  const encoder = new TextEncoder();
  configureTextEncoding({
    encodeUtf8: (text: string) => encoder.encode(text) as Uint8Array<ArrayBuffer>,
    decodeUtf8: (bytes: Uint8Array, strictly?: boolean) => (strictly === true ? strictUtf8 : lenientUtf8).decode(bytes),
    // A JavaScript string encodes to UTF-8 unless it holds a lone surrogate (ES2024's isWellFormed, in Node 20).
    checkUtf8: (text: string) => (text as string & { isWellFormed(): boolean }).isWellFormed(),
  });
}
