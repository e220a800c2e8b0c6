import { execFileSync } from "node:child_process";
import { closeSync, mkdtempSync, openSync, rmSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** A small tmpfs mounted by a test, to fill up on purpose. */
export interface SmallFilesystem {
  dir: string;
  /** Writes a filler file until the filesystem has no byte left (ENOSPC). */
  fill(): void;
  /** Removes the filler, freeing the space again. */
  free(): void;
  /** Unmounts and removes the mount point. */
  remove(): void;
}

/**
 * Mounts a tmpfs of `sizeMiB` MiB on a fresh directory (needs root:
 * `mount -t tmpfs -o size=...`).
 *
 * @returns the filesystem, or a string saying why it cannot be mounted here
 *   (the test then skips with that reason).
 */
export function mountSmallFilesystem(sizeMiB: number): SmallFilesystem | string {
  const dir = mkdtempSync(join(tmpdir(), "mecatl-full-"));
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", `size=${sizeMiB}m`, "tmpfs", dir], { stdio: "pipe" });
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    const stderr = (err as { stderr?: Buffer }).stderr?.toString().trim();
    return `cannot mount a ${sizeMiB} MiB tmpfs (${stderr || (err as Error).message}); this test needs root (CAP_SYS_ADMIN)`;
  }
  const filler = join(dir, "filler");
  return {
    dir,
    fill() {
      const fd = openSync(filler, "a");
      try {
        for (const size of [1 << 16, 1 << 12, 1]) {
          const chunk = Buffer.alloc(size, 0x66);
          for (;;) {
            try {
              writeSync(fd, chunk);
            } catch (err) {
              if ((err as NodeJS.ErrnoException).code === "ENOSPC") break;
              throw err;
            }
          }
        }
      } finally {
        closeSync(fd);
      }
    },
    free() {
      rmSync(filler, { force: true });
    },
    remove() {
      execFileSync("umount", ["-l", dir], { stdio: "pipe" });
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
