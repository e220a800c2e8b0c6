// Fails when gen/ differs from what `buf generate` produces from proto/.
// Generates into a temporary copy of the tree and compares file by file.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, statSync, cpSync, rmSync } from "node:fs";
import { join, relative } from "node:path";
import { tmpdir } from "node:os";

const root = process.cwd();
const scratch = mkdtempSync(join(tmpdir(), "mecatl-gen-"));
try {
  for (const f of ["proto", "buf.yaml", "buf.gen.yaml"]) cpSync(join(root, f), join(scratch, f), { recursive: true });
  execFileSync(join(root, "node_modules/.bin/buf"), ["generate"], {
    cwd: scratch,
    stdio: "inherit",
    env: { ...process.env, PATH: `${join(root, "node_modules/.bin")}:${process.env.PATH}` },
  });
  const list = (dir) =>
    readdirSync(dir).flatMap((n) => {
      const p = join(dir, n);
      return statSync(p).isDirectory() ? list(p) : [p];
    });
  const fresh = new Map(list(join(scratch, "gen")).map((p) => [relative(join(scratch, "gen"), p), readFileSync(p, "utf8")]));
  const committed = new Map(list(join(root, "gen")).map((p) => [relative(join(root, "gen"), p), readFileSync(p, "utf8")]));
  const stale = [...new Set([...fresh.keys(), ...committed.keys()])].filter((k) => fresh.get(k) !== committed.get(k));
  if (stale.length > 0) {
    console.error(`gen/ is stale (run \`npm run generate\` and commit): ${stale.join(", ")}`);
    process.exit(1);
  }
  console.log(`gen/ is fresh (${fresh.size} files)`);
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
