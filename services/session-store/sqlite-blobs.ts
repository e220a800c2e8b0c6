import type Database from "better-sqlite3";
import { PAYLOAD_HEADROOM_BYTES, withHeadroom } from "../../common/payload-headroom.js";
import type { Migration } from "../storage/sqlite-op.js";
import { statement } from "../storage/sqlite-statement.js";
import { processAlive } from "../storage/process-identity.js";
import { STAGE_LOST_CODE } from "../storage/sqlite-failure.js";

/**
 * Large snapshots on SQLite (issue 11): a payload above {@link STAGE_BYTES}
 * is not written in one transaction, which would hold the single writer (and
 * every Renew queued behind it) for the whole multi-MiB insert. It is staged
 * instead, {@link CHUNK_BYTES} per transaction, as the chunks of a new blob,
 * and the Save that publishes it is a small write that points the session at
 * the blob. The tables:
 *
 * - `session_blob_chunks` (blob id, seq, bytes): the payload, in order;
 * - `session_stages` (blob id, owner, started): blobs being staged, with the
 *   process staging them ({@link processIdentity}); a blob leaves this table
 *   when its Save publishes it, or when its staging is given up;
 * - `sessions.blob_id`: the blob holding the session's payload (its
 *   `payload` column is then empty), NULL for a payload held inline.
 *
 * A blob that no session points at and no process stages is garbage: the
 * one a Save replaced, a deleted session's, an abandoned stage's. Its chunks
 * are deleted a few at a time ({@link dropChunks}, each call its own small
 * transaction) after the write that made it garbage, and at start for what
 * a crash left ({@link removeAbandonedBlobs}).
 */

/** Payload bytes above which a Save is staged in chunks (1 MiB); at most this much is ever written inline. */
export const STAGE_BYTES = 1024 * 1024;

/**
 * Bytes of one staged chunk: one chunk per transaction (128 KiB). A small
 * write (a Renew) that arrives while a chunk is written waits for that
 * chunk's insert and fsync, and the disk it syncs to is busy with what the
 * chunks before wrote: smaller chunks bound both. Beside a loop of 64 MiB
 * Saves, Renew p99 was 71–154 ms with 1 MiB chunks, 44–94 ms with 256 KiB
 * and 35–41 ms with 128 KiB, with as many Saves completed (interleaved runs
 * of a probe, chunk commits then without an fsync of their own;
 * bench/RESULTS.md 2026-12-03); 64 KiB gained nothing more. Blobs written
 * with other chunk sizes read the same (chunks are read in `seq` order
 * whatever their length).
 */
export const CHUNK_BYTES = 128 * 1024;

/** Chunks one {@link dropChunks} call deletes: 4 MiB of a garbage blob per transaction, a few milliseconds. */
export const DROP_CHUNKS = (4 * 1024 * 1024) / CHUNK_BYTES;

/** Schema version 3 of the session store: staged and chunked payloads. */
export const blobMigration: Migration = {
  component: "session-store",
  version: 3,
  sql: `ALTER TABLE sessions ADD COLUMN blob_id INTEGER;
        CREATE INDEX sessions_by_blob ON sessions (blob_id) WHERE blob_id IS NOT NULL;
        CREATE TABLE session_blob_chunks (
          blob_id INTEGER NOT NULL,
          seq     INTEGER NOT NULL,
          bytes   BLOB    NOT NULL,
          PRIMARY KEY (blob_id, seq)
        ) STRICT;
        CREATE TABLE session_stages (
          blob_id    INTEGER PRIMARY KEY AUTOINCREMENT,
          owner      TEXT    NOT NULL,
          started_ms INTEGER NOT NULL
        ) STRICT;`,
};

/** Starts staging a new blob for process `owner`; returns its id (never one used before). */
export function beginStage(db: Database.Database, owner: string): number {
  return statement<[string, number], { blob_id: number }>(db, `INSERT INTO session_stages (owner, started_ms) VALUES (?, ?) RETURNING blob_id`).get(owner, Date.now())!.blob_id;
}

/**
 * Writes chunk `seq` of a staged blob (again, harmlessly, when retried).
 *
 * @throws Error with code {@link STAGE_LOST_CODE} when the blob is not being staged (given up, or removed as abandoned).
 */
export function writeChunk(db: Database.Database, blobId: number, seq: number, bytes: Uint8Array): void {
  requireStaged(db, blobId);
  statement(db, `INSERT INTO session_blob_chunks (blob_id, seq, bytes) VALUES (?, ?, ?) ON CONFLICT DO UPDATE SET bytes = excluded.bytes`).run(blobId, seq, bytes);
}

/**
 * Ends the staging of a blob that is about to be published, after checking
 * that it holds exactly `size` bytes.
 *
 * @throws Error with code {@link STAGE_LOST_CODE} when the blob is not being staged or is not whole.
 */
export function endStage(db: Database.Database, blobId: number, size: number): void {
  requireStaged(db, blobId);
  const held = statement<[number], { n: number | null }>(db, `SELECT sum(length(bytes)) AS n FROM session_blob_chunks WHERE blob_id = ?`).get(blobId)!.n ?? 0;
  if (held !== size) throw stageLost(`the staged snapshot holds ${held} of its ${size} bytes`);
  statement(db, `DELETE FROM session_stages WHERE blob_id = ?`).run(blobId);
}

/** Gives up staging a blob (its chunks become garbage); a no-op when it is not staged. */
export function abandonStage(db: Database.Database, blobId: number): void {
  statement(db, `DELETE FROM session_stages WHERE blob_id = ?`).run(blobId);
}

function requireStaged(db: Database.Database, blobId: number): void {
  if (statement(db, `SELECT 1 FROM session_stages WHERE blob_id = ?`).get(blobId) === undefined) {
    throw stageLost("the staged snapshot was removed before it was saved (its staging was given up, or another process took it for abandoned)");
  }
}

function stageLost(message: string): Error {
  return Object.assign(new Error(message), { code: STAGE_LOST_CODE });
}

/**
 * The whole payload of a blob, read in one go (call inside a read
 * transaction, off the main thread), into a buffer of its own with
 * {@link PAYLOAD_HEADROOM_BYTES} free before it: it moves to the main thread
 * without a copy, and the Load answer is framed around it there. (Not
 * shared memory: a SharedArrayBuffer created on a worker lives until that
 * worker collects its garbage, which a worker allocating as little as this
 * one hardly ever does; 40 Loads of 64 MiB kept 2.4 GB.)
 */
export function readBlob(db: Database.Database, blobId: number): Buffer {
  const size = statement<[number], { n: number | null }>(db, `SELECT sum(length(bytes)) AS n FROM session_blob_chunks WHERE blob_id = ?`).get(blobId)!.n ?? 0;
  const out = withHeadroom(size);
  let at = 0;
  for (const row of statement<[number], { bytes: Buffer }>(db, `SELECT bytes FROM session_blob_chunks WHERE blob_id = ? ORDER BY seq`).iterate(blobId)) {
    at += row.bytes.copy(out, at);
  }
  return out;
}

/**
 * Deletes up to {@link DROP_CHUNKS} chunks of blob `blobId` if it is garbage
 * (no session points at it, no process stages it); returns how many it
 * deleted (0 once none is left, or when the blob is in use).
 */
export function dropChunks(db: Database.Database, blobId: number): number {
  const inUse =
    statement(db, `SELECT 1 FROM sessions WHERE blob_id = ?`).get(blobId) !== undefined || statement(db, `SELECT 1 FROM session_stages WHERE blob_id = ?`).get(blobId) !== undefined;
  if (inUse) return 0;
  return statement(db, `DELETE FROM session_blob_chunks WHERE blob_id = ? AND seq IN (SELECT seq FROM session_blob_chunks WHERE blob_id = ? ORDER BY seq LIMIT ${DROP_CHUNKS})`).run(
    blobId,
    blobId,
  ).changes;
}

/**
 * Run once at start, in its own transaction: gives up the stages of every
 * process that is gone (a crash mid-Save), then deletes the chunks of every
 * garbage blob (those stages', and those a process stopped before it had
 * dropped them). Returns the number of chunks deleted.
 */
export function removeAbandonedBlobs(db: Database.Database): number {
  for (const { owner } of statement<[], { owner: string }>(db, `SELECT DISTINCT owner FROM session_stages`).all()) {
    if (!processAlive(owner)) statement(db, `DELETE FROM session_stages WHERE owner = ?`).run(owner);
  }
  return statement(
    db,
    `DELETE FROM session_blob_chunks WHERE blob_id NOT IN (SELECT blob_id FROM sessions WHERE blob_id IS NOT NULL) AND blob_id NOT IN (SELECT blob_id FROM session_stages)`,
  ).run().changes;
}
