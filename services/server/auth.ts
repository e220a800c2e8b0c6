import { readFileSync, watchFile, unwatchFile } from "node:fs";
import { timingSafeEqual, hash } from "node:crypto";
import type { Logger } from "./logger.js";

/**
 * Bearer tokens accepted by the server, read from `--auth-token-file` (one
 * token per line; blank lines and lines starting with `#` are ignored). The
 * file is re-read when it changes, so tokens rotate without a restart. A
 * line holding a space inside its token is an error (no header could carry
 * it), at start and on a re-read alike. A
 * re-read that finds no token (the file emptied, or only comments) accepts
 * none: every call but health is refused until a token is back, so emptying
 * the file revokes every token at once (issue 14; fail closed). A re-read
 * that fails (the file missing or unreadable) keeps the previous set, since
 * it says nothing about which tokens are meant; both are logged as warnings.
 * At start, a file without a token is an error (most likely a mistake).
 */
export class TokenFile {
  private digests: Buffer[] = [];

  /**
   * @throws Error naming the file when it cannot be read or holds no token.
   */
  constructor(
    readonly path: string,
    logger: Logger,
  ) {
    this.digests = TokenFile.read(path);
    if (this.digests.length === 0) throw new Error(`--auth-token-file ${path} holds no token`);
    watchFile(path, { interval: 1000 }, () => {
      try {
        this.digests = TokenFile.read(path);
        if (this.digests.length > 0) logger.info({ tokens: this.digests.length }, "reloaded --auth-token-file");
        else logger.warn({ tokens: 0 }, "reloaded --auth-token-file: it holds no token, so every call but health is refused (UNAUTHENTICATED) until it holds one");
      } catch (err) {
        logger.warn({ err: (err as Error).message }, "keeping previous tokens: cannot reload --auth-token-file");
      }
    });
  }

  /** The digests of the tokens in the file (none for a file without one). @throws Error naming the file when it cannot be read, or the line when one holds a space inside a token. */
  private static read(path: string): Buffer[] {
    let text: string;
    try {
      text = readFileSync(path, "utf8");
    } catch (err) {
      throw new Error(`cannot read --auth-token-file ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
    const tokens: string[] = [];
    for (const [i, raw] of text.split(/\r?\n/).entries()) {
      const line = raw.trim();
      if (line === "" || line.startsWith("#")) continue;
      // A header carries one token without spaces (Bearer <token>): such a line could never match.
      if (/\s/.test(line)) throw new Error(`--auth-token-file ${path} line ${i + 1} holds a space inside a token; put one token per line`);
      tokens.push(line);
    }
    return tokens.map(digest);
  }

  /**
   * Checks the value of an `authorization: Bearer <token>` request header
   * (wire-contract.md section 6), comparing digests in constant time. Only
   * the header is needed: callers decide before reading the request body
   * (issue 10).
   *
   * @returns undefined when the token is known, otherwise the reason for
   *   UNAUTHENTICATED (missing or malformed header, unknown token).
   */
  problem(authorization: string | undefined): string | undefined {
    if (authorization === undefined) return "missing authorization: Bearer <token> metadata";
    const m = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
    if (m === null) return "malformed authorization metadata: expected Bearer <token>, one token without spaces";
    const presented = digest(m[1]!);
    return this.digests.some((d) => timingSafeEqual(d, presented)) ? undefined : "unknown bearer token";
  }

  /** Stops watching the file. */
  close(): void {
    unwatchFile(this.path);
  }
}

function digest(token: string): Buffer {
  return hash("sha256", token, "buffer");
}
