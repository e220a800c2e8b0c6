import { accessSync, closeSync, constants, openSync, readSync, statSync, statfsSync, type Stats } from "node:fs";
import { dirname, resolve } from "node:path";
import { StartupError } from "./redis-connection.js";

/** What an `sqlite:` store URL names: a file, or a private in-memory database. */
export type SqliteTarget = { memory: true; path: ":memory:" } | { memory: false; path: string };

/** First 16 bytes of every SQLite 3 database file (sqlite.org/fileformat.html §1.3). */
const SQLITE_HEADER = Buffer.from("SQLite format 3\0", "latin1");

/**
 * Kernel pseudo file systems (statfs `f_type`, linux/magic.h) where a path
 * looks like a directory but can hold no database. Node's recursive mkdir
 * loops forever on procfs (issue 10), so these are refused before anything is
 * created.
 */
const PSEUDO_FILE_SYSTEMS = new Map<number, string>([
  [0x9fa0, "procfs"],
  [0x62656572, "sysfs"],
  [0x64626720, "debugfs"],
  [0x74726163, "tracefs"],
  [0x27e0eb, "cgroupfs"],
  [0x63677270, "cgroup2fs"],
  [0x73636673, "securityfs"],
  [0x1cd1, "devpts"],
  [0xcafe4a11, "bpffs"],
  [0x62656570, "configfs"],
  [0x6165676c, "pstore"],
  [0xde5e81e4, "efivarfs"],
  [0xf97cff8c, "selinuxfs"],
]);

/**
 * Parses the text after `sqlite:` in `--store`. The path is taken literally
 * (no percent-decoding); `sqlite:///abs/path` is read as `/abs/path`.
 *
 * @throws StartupError naming `--store` and the fix for an empty path, a query
 *   string or fragment (SQLite URI parameters are not understood), a host
 *   (`sqlite://HOST/...`: the store is a local file), or a `:name` other than
 *   `:memory:` (issue 10, deliverable 4).
 */
export function parseSqliteStoreUrl(store: string): SqliteTarget {
  const quoted = JSON.stringify(store);
  let path = store.slice("sqlite:".length);
  if (path === ":memory:") return { memory: true, path };
  if (path === "") throw new StartupError("--store sqlite: needs a path, e.g. sqlite:./data/mecatl-drivers.sqlite");
  if (/[?#]/.test(path)) {
    throw new StartupError(`--store ${quoted}: query parameters and fragments are not understood; remove everything from the "?" or "#" (use sqlite:PATH or sqlite::memory:)`);
  }
  if (path.startsWith("//")) {
    const authority = path.slice(2).split("/", 1)[0]!;
    if (authority !== "") throw new StartupError(`--store ${quoted}: an SQLite store is a local file and has no host or user; use sqlite:/absolute/path or sqlite:relative/path`);
    path = path.slice(2);
  }
  if (path.startsWith(":")) throw new StartupError(`--store ${quoted} is not understood; use sqlite::memory: for a private in-memory database, or sqlite:PATH for a file`);
  if (path.endsWith("/")) throw new StartupError(`--store ${quoted} names a directory; name the database file, e.g. sqlite:${path}mecatl-drivers.sqlite`);
  return { memory: false, path };
}

function statOrUndefined(path: string): Stats | undefined {
  try {
    return statSync(path);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") return undefined;
    throw err;
  }
}

function pseudoFileSystem(dir: string): string | undefined {
  return PSEUDO_FILE_SYSTEMS.get(statfsSync(dir).type);
}

function isWritable(path: string): boolean {
  try {
    accessSync(path, constants.W_OK | constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** The first 16 bytes of `file`, or fewer when it is shorter. */
function readHeader(file: string): Buffer {
  const fd = openSync(file, "r");
  try {
    const header = Buffer.alloc(SQLITE_HEADER.length);
    return header.subarray(0, readSync(fd, header, 0, header.length, 0));
  } finally {
    closeSync(fd);
  }
}

/**
 * Checks that `path` can hold the store's SQLite database, creating nothing:
 * an existing path must be a readable, writable SQLite file (or an empty file)
 * in a writable directory (SQLite keeps its `-wal` and `-shm` files next to
 * it); a new one must lie below a writable directory that is not on a kernel
 * pseudo file system (procfs, sysfs, ...). Missing directories between the two
 * are created later, by {@link SqliteDatabase.open}.
 *
 * @param store `--store` as given, for messages.
 * @throws StartupError naming `--store`, the offending path and the fix (issue 10, deliverable 4).
 */
export function checkSqlitePath(store: string, path: string): void {
  const fail = (problem: string, fix: string) => new StartupError(`--store ${JSON.stringify(store)}: ${problem}; ${fix}`);
  const file = resolve(path);
  try {
    const stat = statOrUndefined(file);
    if (stat?.isDirectory()) throw fail(`${file} is a directory`, `name a file inside it, e.g. sqlite:${file}/mecatl-drivers.sqlite`);
    if (stat !== undefined && !stat.isFile()) throw fail(`${file} is not a regular file`, "name a database file");
    let dir = dirname(file);
    let dirStat = statOrUndefined(dir);
    while (dirStat === undefined) {
      dir = dirname(dir);
      dirStat = statOrUndefined(dir);
    }
    if (!dirStat.isDirectory()) throw fail(`${dir} is not a directory`, "choose a path whose parent directories are directories");
    const pseudo = pseudoFileSystem(dir);
    if (pseudo !== undefined) throw fail(`${dir} is on ${pseudo}, a kernel pseudo file system that cannot hold a database`, "choose a path on a disk, e.g. sqlite:./data/mecatl-drivers.sqlite");
    if (!isWritable(dir)) throw fail(`the directory ${dir} is not writable`, "make it writable for this user or choose another path");
    if (stat === undefined) return;
    try {
      accessSync(file, constants.R_OK | constants.W_OK);
    } catch {
      throw fail(`${file} is not readable and writable`, "fix its permissions or choose another path");
    }
    const header = readHeader(file);
    if (stat.size > 0 && !header.equals(SQLITE_HEADER)) {
      throw fail(`${file} is not an SQLite database`, "point --store at a mecatl-drivers database, or at a path that does not exist yet");
    }
  } catch (err) {
    if (err instanceof StartupError) throw err;
    throw fail(`cannot inspect ${file} (${(err as Error).message})`, "fix the path or its permissions");
  }
}
