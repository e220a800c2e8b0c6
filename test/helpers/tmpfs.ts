import { execFileSync } from "node:child_process";
import { mkdtempSync, openSync, writeSync, closeSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** A small tmpfs mounted by a test, so that its disk can really fill up. */
export interface SmallDisk {
  /** The mount point. */
  dir: string;
  /**
   * Writes a filler file until the file system refuses with ENOSPC.
   *
   * @returns its path (delete it to free the space).
   */
  fill(): string;
  /** Unmounts and removes the mount point. */
  unmount(): void;
}

/**
 * Mounts a tmpfs of `bytes` on a fresh directory (needs root, as CI has on
 * this machine).
 *
 * @returns the disk, or the reason the mount was refused (not root, no
 *   `mount`, inside a container without CAP_SYS_ADMIN), for the test to report.
 */
export function mountSmallDisk(bytes: number): { disk: SmallDisk } | { reason: string } {
  const dir = mkdtempSync(join(tmpdir(), "mecatl-small-disk-"));
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", `size=${bytes}`, "tmpfs", dir], { stdio: ["ignore", "ignore", "pipe"] });
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    const stderr = (err as { stderr?: Buffer }).stderr?.toString().trim();
    return { reason: `cannot mount a ${bytes}-byte tmpfs (needs root): ${stderr || (err as Error).message}` };
  }
  return {
    disk: {
      dir,
      fill() {
        const path = join(dir, `filler-${Date.now()}`);
        const fd = openSync(path, "w");
        const chunk = Buffer.alloc(64 * 1024, 1);
        try {
          for (;;) {
            try {
              writeSync(fd, chunk);
            } catch (err) {
              if ((err as NodeJS.ErrnoException).code !== "ENOSPC") throw err;
              // Fill the last partial block too, byte by byte from 4 KiB down.
              for (let size = 4096; size >= 1; size = Math.floor(size / 2)) {
                try {
                  for (;;) writeSync(fd, chunk, 0, size);
                } catch (e) {
                  if ((e as NodeJS.ErrnoException).code !== "ENOSPC") throw e;
                }
              }
              return path;
            }
          }
        } finally {
          closeSync(fd);
        }
      },
      unmount() {
        execFileSync("umount", [dir]);
        rmSync(dir, { recursive: true, force: true });
      },
    },
  };
}
