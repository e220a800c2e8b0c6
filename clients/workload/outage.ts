import { Code } from "@connectrpc/connect";
import { InfrastructureError } from "../errors.js";
import type { WorkloadContext } from "./context.js";

/** Pause between two tries of a call that met an outage, in milliseconds. */
export const OUTAGE_PAUSE_MS = 100;

/** Longest one call keeps being retried through an outage before the run gives up on it, in milliseconds. */
export const OUTAGE_GIVE_UP_MS = 60_000;

/**
 * True when `err` is what an outage of the driver or its store gives:
 * UNAVAILABLE (the server is down or restarting, or it could not reach its
 * store within `--store-timeout`; issue 9).
 */
export function isOutage(err: unknown): boolean {
  return err instanceof InfrastructureError && err.code === Code.Unavailable;
}

/**
 * Runs `call`; with the run's `outages` option on, retries it every
 * {@link OUTAGE_PAUSE_MS} while it fails with an outage ({@link isOutage}),
 * for at most {@link OUTAGE_GIVE_UP_MS}. Only for calls that are safe to
 * repeat (reads, idempotent writes); a write whose outcome matters goes
 * through {@link writeThroughOutages}.
 *
 * @throws the call's error when it is not an outage, when outages are not
 *   expected, or when the outage outlasts {@link OUTAGE_GIVE_UP_MS}.
 */
export async function throughOutages<T>(ctx: WorkloadContext, call: () => Promise<T>): Promise<T> {
  const giveUp = Date.now() + OUTAGE_GIVE_UP_MS;
  for (;;) {
    try {
      return await call();
    } catch (err) {
      if (!ctx.options.outages || !isOutage(err) || Date.now() > giveUp) throw err;
      ctx.stats.outageRetries++;
      await new Promise((r) => setTimeout(r, OUTAGE_PAUSE_MS));
    }
  }
}

/**
 * What reading the store says about a write whose answer was an outage:
 * `applied` (it is stored, once), `absent` (it is not stored: send it again)
 * or a string describing a state that is neither (the caller records the
 * violation).
 */
export type WriteFound = "applied" | "absent" | string;

/**
 * Writes as a careful harness does when the driver may be down: sends
 * `write`; when it fails with an outage (and the run expects outages), the
 * outcome is unknown, so it reads the store with `find` (through the
 * outage) before doing anything else, and sends the write again only when
 * `find` says it is `absent`. A write is therefore never repeated after it
 * was applied, and a record found stored twice is the driver's doing.
 *
 * @returns `applied` when the write is known stored once, or the
 *   description `find` gave of a state that is neither applied nor absent.
 * @throws any error that is not an outage, or an outage when outages are not expected.
 */
export async function writeThroughOutages(ctx: WorkloadContext, write: () => Promise<void>, find: () => Promise<WriteFound>): Promise<WriteFound> {
  const giveUp = Date.now() + OUTAGE_GIVE_UP_MS;
  for (;;) {
    try {
      await write();
      return "applied";
    } catch (err) {
      if (!ctx.options.outages || !isOutage(err) || Date.now() > giveUp) throw err;
      ctx.stats.outageRetries++;
    }
    await new Promise((r) => setTimeout(r, OUTAGE_PAUSE_MS));
    const found = await throughOutages(ctx, find);
    if (found !== "absent") return found;
  }
}
