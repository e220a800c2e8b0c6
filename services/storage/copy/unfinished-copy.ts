import type { Backend } from "../backend.js";
import { StartupError } from "../redis-connection.js";

/**
 * The source named by the checkpoint of an unfinished `mecatl-drivers copy`
 * into this store (issue 14: the SQLite table `copy_progress`, or the Redis
 * key `<prefix>v2:copy-progress`), or undefined when the store holds none.
 * A store holding one is half written: some records of the source are in
 * it, others are not.
 *
 * @throws StoreFailure when the store does not answer.
 */
export async function unfinishedCopySource(backend: Backend): Promise<string | undefined> {
  const text = backend.kind === "sqlite" ? await backend.db.call("copy.progress.read", {}) : ((await backend.redis.get(backend.keys.copyProgress())) ?? undefined);
  if (text === undefined) return undefined;
  try {
    const source = (JSON.parse(text) as { source?: unknown }).source;
    return typeof source === "string" ? source : "an unknown source";
  } catch {
    return "an unknown source";
  }
}

/**
 * Refuses to serve a store an unfinished copy is writing into (issue 14:
 * "start no server on it until `copy` exits 0"): it would serve part of the
 * source's records as if they were all.
 *
 * @throws StartupError (exit 2) naming the copy's source and the fix:
 *   `copy --resume` with the same `--from`, or `copy --replace`.
 */
export async function refuseUnfinishedCopy(backend: Backend): Promise<void> {
  const source = await unfinishedCopySource(backend);
  if (source === undefined) return;
  // Several stores can share one Redis under different --redis-key-prefix values: name the one refused.
  const store = backend.kind === "redis" ? `${backend.description} (key prefix ${JSON.stringify(backend.keys.prefix)})` : backend.description;
  throw new StartupError(
    `${store} holds an unfinished copy from ${source} (only part of its records are here): finish it with \`mecatl-drivers copy --from <that store> --to <this store> --resume\`, or start over with --replace, before serving it`,
  );
}
