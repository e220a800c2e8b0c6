import { existsSync, readFileSync } from "node:fs";
import { builtinModules } from "node:module";
import { dirname, join, relative, resolve } from "node:path";
import { runCli } from "./cli.js";
import { MAIN } from "./server.js";

/**
 * Checks for deployment files (Dockerfile, compose, Kubernetes manifests)
 * that cannot be run here (no container engine): what they invoke must exist
 * in the project as built.
 */

/** The repository root (the directory of package.json). */
export const ROOT = resolve(dirname(MAIN), "../../..");

const helpCache = new Map<string, Promise<string>>();

/** `mecatl-drivers WORDS... --help`, run once per command path. @throws Error when help exits non-zero (an unknown command). */
function help(words: string[]): Promise<string> {
  const key = words.join(" ");
  let text = helpCache.get(key);
  if (text === undefined) {
    text = runCli([...words, "--help"]).then((r) => {
      if (r.code !== 0) throw new Error(`mecatl-drivers ${key} --help exited ${r.code}: ${r.stderr}`);
      return r.stdout;
    });
    helpCache.set(key, text);
  }
  return text;
}

/** The flags (`--name`) a help text documents. */
function documentedFlags(helpText: string): Set<string> {
  return new Set([...helpText.matchAll(/(?<![\w-])(--[a-z][a-z0-9-]*)/g)].map((m) => m[1]!));
}

/**
 * Checks one command line that runs the project's executable: `mecatl-drivers
 * ...` or `node dist/services/server/main.js ...` (the path must be the
 * build output of a source file that exists). The command words (up to the
 * first flag) must name a command whose `--help` succeeds, and every flag
 * must appear in that help.
 *
 * @returns the problems found, each naming `where`; empty when it is sound.
 */
export async function checkInvocation(where: string, argv: readonly string[]): Promise<string[]> {
  let rest: readonly string[];
  if (argv[0] === "mecatl-drivers") rest = argv.slice(1);
  else if (argv[0] === "node" && argv[1] !== undefined) {
    const source = argv[1].replace(/^(\.\/)?dist\//, "").replace(/\.js$/, ".ts");
    if (!existsSync(join(ROOT, source))) return [`${where}: node ${argv[1]} is not the build output of any source file (no ${source})`];
    if (source !== "services/server/main.ts") return [];
    rest = argv.slice(2);
  } else return [`${where}: ${argv.join(" ")} does not run mecatl-drivers`];
  const words: string[] = [];
  for (const a of rest) {
    if (a.startsWith("-")) break;
    words.push(a);
  }
  // `serve` takes service names as arguments: they are not command words.
  const command = words[0] === "serve" ? ["serve"] : words;
  let text: string;
  try {
    text = await help(command);
  } catch (err) {
    return [`${where}: ${(err as Error).message}`];
  }
  const known = documentedFlags(text);
  return rest
    .filter((a) => a.startsWith("--"))
    .map((a) => a.split("=")[0]!)
    .filter((f) => !known.has(f))
    .map((f) => `${where}: mecatl-drivers ${command.join(" ")} has no flag ${f}`);
}

/** True when `path` (relative to the repository root) is excluded by the `.dockerignore` patterns (plain names, `*` globs). */
export function dockerIgnored(path: string, patterns: readonly string[]): boolean {
  const toRegex = (p: string) => new RegExp(`^${p.replace(/[.+^${}()|[\]\\]/g, "\\$&").replace(/\*/g, "[^/]*")}(/.*)?$`);
  let ignored = false;
  for (const raw of patterns) {
    const negated = raw.startsWith("!");
    const p = (negated ? raw.slice(1) : raw).replace(/^\/|\/$/g, "");
    if (toRegex(p).test(path)) ignored = !negated;
  }
  return ignored;
}

/** The patterns of a `.dockerignore` file: its non-blank lines that are not comments. */
export function dockerIgnorePatterns(text: string): string[] {
  return text
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "" && !l.startsWith("#"));
}

/** An import specifier after `from` or `import`; a specifier has no white space, which keeps prose such as `from ", "` inside strings out. */
const IMPORT = /(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)["']([^"'\s]+)["']/g;

/**
 * Every source file the program starting at `entry` (a `.ts` path relative to
 * the root) loads, following relative imports (static and dynamic), and every
 * package it imports by name.
 */
export function importClosure(entry: string): { files: string[]; packages: string[] } {
  const files = new Set<string>();
  const packages = new Set<string>();
  const builtins = new Set(builtinModules);
  const visit = (file: string) => {
    if (files.has(file)) return;
    files.add(file);
    const text = readFileSync(join(ROOT, file), "utf8");
    for (const m of text.matchAll(IMPORT)) {
      const spec = m[1]!;
      if (spec.startsWith(".")) visit(relative(ROOT, resolve(ROOT, dirname(file), spec.replace(/\.js$/, ".ts"))));
      else if (!spec.startsWith("node:") && !builtins.has(spec)) packages.add(spec.startsWith("@") ? spec.split("/").slice(0, 2).join("/") : spec.split("/")[0]!);
    }
  };
  visit(entry);
  return { files: [...files].sort(), packages: [...packages].sort() };
}
