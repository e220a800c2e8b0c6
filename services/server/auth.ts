import { readFileSync, watchFile, unwatchFile } from "node:fs";
import { timingSafeEqual, createHash } from "node:crypto";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Logger } from "./logger.js";

/**
 * Bearer tokens accepted by the server, read from `--auth-token-file` (one
 * token per line; blank lines and lines starting with `#` are ignored). The
 * file is re-read when it changes, so tokens rotate without a restart; a
 * re-read that fails keeps the previous set and logs a warning.
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
    watchFile(path, { interval: 1000 }, () => {
      try {
        this.digests = TokenFile.read(path);
        logger.info({ tokens: this.digests.length }, "reloaded --auth-token-file");
      } catch (err) {
        logger.warn({ err: (err as Error).message }, "keeping previous tokens: cannot reload --auth-token-file");
      }
    });
  }

  private static read(path: string): Buffer[] {
    let text: string;
    try {
      text = readFileSync(path, "utf8");
    } catch (err) {
      throw new Error(`cannot read --auth-token-file ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
    const tokens = text
      .split(/\r?\n/)
      .map((l) => l.trim())
      .filter((l) => l !== "" && !l.startsWith("#"));
    if (tokens.length === 0) throw new Error(`--auth-token-file ${path} holds no token`);
    return tokens.map(digest);
  }

  /**
   * Checks the `authorization: Bearer <token>` request header (wire-contract.md
   * section 6), comparing digests in constant time.
   *
   * @throws ConnectError UNAUTHENTICATED when the header is missing, malformed
   *   or carries an unknown token.
   */
  check(headers: Headers): void {
    const value = headers.get("authorization");
    const m = value === null ? null : /^Bearer\s+(\S+)\s*$/i.exec(value);
    if (m === null) throw new ConnectError("missing authorization: Bearer <token> metadata", Code.Unauthenticated);
    const presented = digest(m[1]!);
    if (!this.digests.some((d) => timingSafeEqual(d, presented))) throw new ConnectError("unknown bearer token", Code.Unauthenticated);
  }

  /** Stops watching the file. */
  close(): void {
    unwatchFile(this.path);
  }
}

function digest(token: string): Buffer {
  return createHash("sha256").update(token).digest();
}
