import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { spawnRedis, type SpawnedRedis } from "./redis-server.js";

/**
 * One backend a conformance suite runs against. `setup` creates a fresh store
 * and returns the `--store` URL (plus any extra serve flags); `teardown`
 * removes it. Suites run `describe.each(BACKENDS)`.
 */
export interface TestBackend {
  name: "sqlite-file" | "sqlite-memory" | "redis";
  /** True when two server processes can share the store. */
  shared: boolean;
  setup(): Promise<{ store: string; args: string[]; redis?: SpawnedRedis }>;
  teardown(): Promise<void>;
}

function sqliteFile(): TestBackend {
  let dir = "";
  return {
    name: "sqlite-file",
    shared: true,
    async setup() {
      dir = mkdtempSync(join(tmpdir(), "mecatl-sqlite-"));
      return { store: `sqlite:${join(dir, "store.sqlite")}`, args: [] };
    },
    async teardown() {
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function sqliteMemory(): TestBackend {
  return {
    name: "sqlite-memory",
    shared: false,
    async setup() {
      return { store: "sqlite::memory:", args: [] };
    },
    async teardown() {},
  };
}

function redis(): TestBackend {
  let server: SpawnedRedis | undefined;
  return {
    name: "redis",
    shared: true,
    async setup() {
      server = await spawnRedis();
      return { store: server.url, args: [], redis: server };
    },
    async teardown() {
      await server?.stop();
    },
  };
}

/** Fresh backend factories: an SQLite file, `sqlite::memory:`, and a spawned redis-server. */
export function allBackends(): TestBackend[] {
  return [sqliteFile(), sqliteMemory(), redis()];
}

/** Backends two processes can share (for cross-process tests). */
export function sharedBackends(): TestBackend[] {
  return allBackends().filter((b) => b.shared);
}
