import { describe, expect, test } from "vitest";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parse } from "yaml";
import { checkInvocation, dockerIgnored, dockerIgnorePatterns, importClosure, ROOT } from "../helpers/deploy-checks.js";

/** One Dockerfile instruction with its arguments (continuation lines joined, comments dropped). */
interface Instruction {
  stage: number;
  keyword: string;
  args: string;
}

function instructions(text: string): Instruction[] {
  const out: Instruction[] = [];
  let stage = -1;
  let pending = "";
  for (const line of text.split("\n")) {
    if (line.trim().startsWith("#") || (pending === "" && line.trim() === "")) continue;
    pending += line.replace(/\\\s*$/, " ");
    if (/\\\s*$/.test(line)) continue;
    const m = /^\s*(\S+)\s*(.*)$/.exec(pending)!;
    const keyword = m[1]!.toUpperCase();
    if (keyword === "FROM") stage++;
    out.push({ stage, keyword, args: m[2]!.trim() });
    pending = "";
  }
  return out;
}

/** The argv of an exec-form (JSON array) CMD, ENTRYPOINT or HEALTHCHECK CMD. */
function execForm(args: string): string[] {
  const json = args.slice(args.indexOf("["));
  return JSON.parse(json) as string[];
}

/** The simple commands of a shell line: split at `&&`, `||`, `;` and `|`, then at blanks. */
function shellCommands(args: string): string[][] {
  return args
    .split(/&&|\|\||;|\|/)
    .map((c) => c.trim().split(/\s+/).filter((w) => w !== ""))
    .filter((c) => c.length > 0);
}

const dockerfile = instructions(readFileSync(join(ROOT, "Dockerfile"), "utf8"));
const finalStage = Math.max(...dockerfile.map((i) => i.stage));
const inStage = (stage: number, keyword: string) => dockerfile.filter((i) => i.stage === stage && i.keyword === keyword);
const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { scripts: Record<string, string>; dependencies: Record<string, string> };

describe("the Dockerfile", () => {
  test("is multi-stage: compilers only in the build stage, a non-root user and a health check in the image", () => {
    expect(finalStage).toBeGreaterThanOrEqual(1);
    const buildRuns = dockerfile.filter((i) => i.stage < finalStage && i.keyword === "RUN").map((i) => i.args);
    expect(buildRuns.some((r) => /apt-get install/.test(r) && /\bpython3\b/.test(r) && /\bmake\b/.test(r) && /\bg\+\+/.test(r))).toBe(true);
    expect(buildRuns.some((r) => /npm rebuild better-sqlite3/.test(r))).toBe(true);
    expect(dockerfile.some((i) => i.stage < finalStage && i.keyword === "ENV" && /npm_config_build_from_source=true/.test(i.args))).toBe(true);
    expect(buildRuns.some((r) => /npm prune --omit=dev/.test(r))).toBe(true);
    expect(inStage(finalStage, "RUN").some((i) => /apt-get|g\+\+|\bmake\b/.test(i.args))).toBe(false);
    const user = inStage(finalStage, "USER").at(-1)?.args;
    expect(user).toBeDefined();
    expect(["root", "0"]).not.toContain(user!.split(":")[0]);
    expect(inStage(finalStage, "COPY").every((i) => i.args.startsWith("--from="))).toBe(true);
    const health = inStage(finalStage, "HEALTHCHECK").at(-1)!;
    expect(execForm(health.args).slice(0, 2)).toEqual(["mecatl-drivers", "health"]);
  });

  test("every mecatl-drivers invocation and flag exists in the CLI's help", async () => {
    const entrypoint = execForm(inStage(finalStage, "ENTRYPOINT").at(-1)!.args);
    const cmd = execForm(inStage(finalStage, "CMD").at(-1)!.args);
    expect([...entrypoint, ...cmd].slice(0, 2)).toEqual(["mecatl-drivers", "serve"]);
    const problems = await checkInvocation("ENTRYPOINT + CMD", [...entrypoint, ...cmd]);
    problems.push(...(await checkInvocation("HEALTHCHECK", execForm(inStage(finalStage, "HEALTHCHECK").at(-1)!.args))));
    for (const run of dockerfile.filter((i) => i.keyword === "RUN")) {
      for (const c of shellCommands(run.args).filter((c) => c[0] === "mecatl-drivers" || (c[0] === "node" && c[1]?.includes("dist/")))) {
        problems.push(...(await checkInvocation(`RUN ${run.args}`, c)));
      }
    }
    // The executable the image links to is the build output of the CLI's entry point.
    const link = inStage(finalStage, "RUN").find((i) => /ln -s/.test(i.args))!;
    expect(link.args).toContain("/app/dist/services/server/main.js /usr/local/bin/mecatl-drivers");
    expect(problems).toEqual([]);
  });

  test("every npm script it runs exists in package.json", () => {
    const scripts = dockerfile.filter((i) => i.keyword === "RUN").flatMap((i) => shellCommands(i.args).filter((c) => c[0] === "npm" && (c[1] === "run" || c[1] === "run-script")).map((c) => c[2]!));
    expect(scripts.length).toBeGreaterThan(0);
    for (const s of scripts) expect(Object.keys(pkg.scripts), s).toContain(s);
  });

  test("the files it COPYs exist and are not excluded by .dockerignore; together they hold every file the executable loads", () => {
    const patterns = dockerIgnorePatterns(readFileSync(join(ROOT, ".dockerignore"), "utf8"));
    const sources = dockerfile
      .filter((i) => i.keyword === "COPY" && !i.args.startsWith("--from="))
      .flatMap((i) => {
        const words = i.args.split(/\s+/);
        return words.slice(0, -1);
      });
    for (const s of sources) {
      expect(existsSync(join(ROOT, s)), `COPY ${s}`).toBe(true);
      expect(dockerIgnored(s, patterns), `COPY ${s} is excluded by .dockerignore`).toBe(false);
    }
    const { files, packages } = importClosure("services/server/main.ts");
    const outside = files.filter((f) => !sources.some((s) => f === s || f.startsWith(`${s.replace(/\/$/, "")}/`)));
    expect(outside).toEqual([]);
    expect(files.filter((f) => dockerIgnored(f, patterns))).toEqual([]);
    // Only production dependencies are installed: everything the executable imports must be one.
    expect(packages.filter((p) => pkg.dependencies[p] === undefined)).toEqual([]);
  });
});

describe("deploy/compose.yaml", () => {
  const compose = parse(readFileSync(join(ROOT, "deploy/compose.yaml"), "utf8")) as {
    services: Record<string, { build?: { context: string; dockerfile: string }; command?: string[]; healthcheck?: { test: string[] }; secrets?: string[]; stop_grace_period?: string; depends_on?: Record<string, { condition: string }> }>;
    secrets: Record<string, { file: string }>;
  };
  const ours = Object.entries(compose.services).filter(([, s]) => s.build !== undefined);

  test("builds this repository's Dockerfile and passes only flags serve --help documents", async () => {
    expect(ours.length).toBeGreaterThan(0);
    const problems: string[] = [];
    for (const [name, s] of ours) {
      expect(join(ROOT, "deploy", s.build!.context, s.build!.dockerfile)).toBe(join(ROOT, "Dockerfile"));
      expect(s.command?.[0]).toBe("serve");
      problems.push(...(await checkInvocation(`compose service ${name}`, ["mecatl-drivers", ...s.command!])));
      if (s.healthcheck !== undefined && s.healthcheck.test.includes("mecatl-drivers")) problems.push(...(await checkInvocation(`compose ${name} healthcheck`, s.healthcheck.test.slice(1))));
    }
    expect(problems).toEqual([]);
  });

  test("runs a durable Redis, and mounts every secret file a flag reads", () => {
    const redis = Object.values(compose.services).find((s) => s.build === undefined && JSON.stringify(s.command ?? []).includes("redis-server"))!;
    const line = redis.command!.join(" ");
    expect(line).toMatch(/--appendonly yes/);
    expect(line).toMatch(/--appendfsync always/);
    for (const [name, s] of ours) {
      const cmd = s.command!;
      for (const [i, a] of cmd.entries()) {
        if (!a.endsWith("-file")) continue;
        const secret = /^\/run\/secrets\/(.+)$/.exec(cmd[i + 1]!)?.[1];
        expect(secret, `${name} ${a} reads a mounted secret`).toBeDefined();
        expect(s.secrets, `${name} mounts ${secret}`).toContain(secret);
        expect(Object.keys(compose.secrets)).toContain(secret);
      }
      const grace = cmd.indexOf("--shutdown-grace");
      expect(parseFloat(s.stop_grace_period!)).toBeGreaterThan(parseFloat(cmd[grace + 1]!));
      expect(Object.values(s.depends_on ?? {}).every((d) => d.condition === "service_healthy")).toBe(true);
    }
  });
});
