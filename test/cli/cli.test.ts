import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { MAIN, startServer, type ServerProcess } from "../helpers/server.js";
import { finished, runCli, spawnCli } from "../helpers/cli.js";
import { METRICS_FLAGS } from "../helpers/metrics.js";
import { watchParks } from "../helpers/event-log.js";
import { startFaultProxy } from "../helpers/fault-proxy.js";
import { waitFor } from "../helpers/wait.js";
import { openDriverClients, type DriverClients } from "../../clients/factory.js";
import { formatNanos, ZERO_TIME } from "../../clients/time.js";
import { newIncarnation, sessnap } from "../helpers/sessnap.js";

const enc = (v: unknown) => new TextEncoder().encode(JSON.stringify(v));

describe("mecatl-drivers operator commands against a real server", () => {
  let server: ServerProcess;
  let dir: string;
  let clients: DriverClients;
  let ss: string[];
  let el: string[];
  let sl: string[];
  let sc: string[];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "mecatl-cli-"));
    server = await startServer(["--store", `sqlite:${join(dir, "store.sqlite")}`, ...METRICS_FLAGS]);
    ss = ["--session-store-url", server.address];
    el = ["--event-log-url", server.address];
    sl = ["--session-lease-url", server.address];
    sc = ["--schedule-store-url", server.address];
    clients = await openDriverClients({ sessionStoreUrl: server.address, eventLogUrl: server.address, scheduleStoreUrl: server.address });
  });
  afterAll(async () => {
    clients?.close();
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test("sessions list, get and delete, as tables and as JSON", async () => {
    const payload = enc({ id: "cli-a", state: "idle", kind: "main", messages: [{ role: "user", text: "hi" }] });
    await clients.sessionStore!.save("cli-a", payload);
    await clients.sessionStore!.save("cli-b", enc({ id: "cli-b" }));

    const table = await runCli(["sessions", "list", ...ss]);
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/MODIFIED\s+SESSION/);
    expect(table.stdout).toContain("cli-a");
    const listed = JSON.parse((await runCli(["sessions", "list", "--json", ...ss])).stdout) as Array<{ sessionId: string; modifiedAt: string }>;
    expect(listed.map((r) => r.sessionId)).toEqual(expect.arrayContaining(["cli-a", "cli-b"]));
    expect(listed.every((r) => /Z$/.test(r.modifiedAt))).toBe(true);

    const got = await runCli(["sessions", "get", "cli-a", ...ss]);
    expect(got.stdout).toMatch(/format\s+sessnap-json\/1/);
    expect(got.stdout).toMatch(/messages\s+1/);
    expect(JSON.parse((await runCli(["sessions", "get", "cli-a", "--json", ...ss])).stdout).snapshot.messages).toHaveLength(1);
    expect((await runCli(["sessions", "get", "cli-a", "--payload", ...ss])).stdout).toBe(Buffer.from(payload).toString("utf8"));

    expect((await runCli(["sessions", "delete", "cli-b", "never-was", ...ss])).code).toBe(0);
    const after = JSON.parse((await runCli(["sessions", "list", "--json", ...ss])).stdout) as Array<{ sessionId: string }>;
    expect(after.map((r) => r.sessionId)).not.toContain("cli-b");
  });

  test("sessions list --owner-issuer/--owner-subject pages one owner's sessions with their metadata (issue 12)", async () => {
    const owner = { Issuer: "https://cli.example", Subject: "olga" };
    for (const id of ["own-1", "own-2", "own-3"]) await clients.sessionStore!.save(id, sessnap({ id, owner, kind: "main", title: `title ${id}` }));
    await clients.sessionStore!.save("own-other", sessnap({ id: "own-other", owner: { ...owner, Subject: "someone" } }));
    const flags = ["--owner-issuer", owner.Issuer, "--owner-subject", owner.Subject, "--page-size", "2", ...ss];
    const json = JSON.parse((await runCli(["sessions", "list", "--json", ...flags])).stdout) as { totalCount: number; sessions: Array<{ sessionId: string; kind: string; title: string; owner: { subject: string } }> };
    expect(json.totalCount).toBe(3);
    expect(json.sessions.map((r) => [r.sessionId, r.kind, r.title, r.owner.subject])).toEqual([
      ["own-3", "main", "title own-3", "olga"],
      ["own-2", "main", "title own-2", "olga"],
      ["own-1", "main", "title own-1", "olga"],
    ]);
    const table = await runCli(["sessions", "list", "--limit", "1", ...flags]);
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/MODIFIED\s+STATE\s+KIND\s+ACTIVITY\s+TITLE\s+SESSION/);
    expect(table.stdout).toContain("own-3");
    expect(table.stdout).not.toContain("own-2");
    expect(table.stderr).toContain("1 of 3 sessions");
    expect((await runCli(["sessions", "list", "--limit", "1", ...ss])).code).toBe(0);
  });

  test("sessions lineage shows the root's records and its direct relations, from the stored incarnation by default (issue 12)", async () => {
    const rootInc = newIncarnation();
    await clients.sessionStore!.create("lin-root", sessnap({ id: "lin-root", kind: "main", incarnation: rootInc }));
    await clients.sessionStore!.create("lin-child", sessnap({ id: "lin-child", kind: "subagent", relationship: { parent_session_id: "lin-root", parent_incarnation: rootInc, call_id: "c" } }));
    await clients.sessionStore!.delete("lin-child");
    const table = await runCli(["sessions", "lineage", "lin-root", ...ss]);
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/lin-root\s+inc_\S+\s+main\s+retained/);
    expect(table.stdout).toMatch(/lin-child\s+inc_\S+\s+subagent\s+pruned\s+\S+Z\s+child of lin-root/);
    const json = JSON.parse((await runCli(["sessions", "lineage", "lin-root", "--incarnation", rootInc, "--limit", "1", "--json", ...ss])).stdout) as { truncated: boolean; records: Array<{ sessionId: string; ownerScope: string }> };
    expect([json.truncated, json.records.map((r) => r.sessionId), json.records[0]!.ownerScope]).toEqual([true, ["lin-root"], "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"]);
    const bad = await runCli(["sessions", "lineage", "lin-root", "--incarnation", "nope", ...ss]);
    expect([bad.code, bad.stderr]).toEqual([2, expect.stringContaining("not a valid incarnation")]);
  });

  test("a missing session exits 1 naming it; a missing or remote cleartext target exits 2", async () => {
    const missing = await runCli(["sessions", "get", "nope", ...ss]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('session "nope" not found');
    const noUrl = await runCli(["sessions", "list"]);
    expect(noUrl.code).toBe(2);
    expect(noUrl.stderr).toContain("--session-store-url is required");
    const remote = await runCli(["sessions", "list", "--session-store-url", "driver.example.com:7443"]);
    expect(remote.code).toBe(2);
    expect(remote.stderr).toContain("CLEARTEXT");
    expect(remote.stderr).toContain("--driver-tls");
    const caWithoutTls = await runCli(["sessions", "list", ...ss, "--driver-tls-ca", "/x.pem"]);
    expect([caWithoutTls.code, caWithoutTls.stderr]).toEqual([2, "mecatl-drivers: --driver-tls-ca requires --driver-tls\n"]);
    const noOwner = await runCli(["leases", "renew", "x", "--token", "1", ...ss]);
    expect(noOwner.code).toBe(2);
    expect(noOwner.stderr).toContain("--owner");
    expect((await runCli(["sessions", "frobnicate"])).code).toBe(2);
  });

  test("events read prints every record with its cursor; --limit and --cursor page through the log", async () => {
    for (let i = 1; i <= 5; i++) await clients.eventLog!.append("cli-ev", JSON.stringify({ type: "tool_call", n: i }));
    await clients.eventLog!.appendGap("cli-ev", "relay overflow");
    const all = (await runCli(["events", "read", "cli-ev", "--json", ...el])).stdout.trim().split("\n").map((l) => JSON.parse(l));
    expect(all.map((r) => r.kind)).toEqual(["event", "event", "event", "event", "event", "gap"]);
    expect(all[5].reason).toBe("relay overflow");
    expect(all.every((r) => typeof r.cursor === "string" && r.cursor !== "")).toBe(true);

    const first = (await runCli(["events", "read", "cli-ev", "--json", "--limit", "2", ...el])).stdout.trim().split("\n").map((l) => JSON.parse(l));
    expect(first.map((r) => r.event.n)).toEqual([1, 2]);
    const rest = (await runCli(["events", "read", "cli-ev", "--json", "--cursor", first[1].cursor, ...el])).stdout.trim().split("\n").map((l) => JSON.parse(l));
    expect(rest.map((r) => r.event?.n ?? "gap")).toEqual([3, 4, 5, "gap"]);

    const table = await runCli(["events", "read", "cli-ev", ...el]);
    expect(table.stdout).toMatch(/KIND\s+LIVE\s+BYTES\s+TYPE\s+CURSOR/);
    expect(table.stdout).toContain("tool_call");
    expect(table.stdout).toContain(all[5].cursor);
    expect(table.stderr).toContain(`resume with --cursor ${all[5].cursor}`);

    const tail = (await runCli(["events", "tail", "cli-ev", "--json", "--last", "2", "--no-follow", ...el])).stdout.trim().split("\n").map((l) => JSON.parse(l));
    expect(tail.map((r) => r.event?.n ?? "gap")).toEqual([5, "gap"]);

    // A read refused before any record: the error alone, no "0 record(s)" before it (found by a fresh-eyes run).
    const refused = await runCli(["events", "read", "cli-ev", "--cursor", "garbage", ...el]);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain("cursor");
    expect(refused.stderr).not.toContain("record(s)");
  });

  test("events read --follow prints later appends and ends cleanly on SIGINT", async () => {
    await clients.eventLog!.append("cli-follow", JSON.stringify({ n: 1 }));
    const parks = await watchParks(server);
    const proc = spawnCli(["events", "read", "cli-follow", "--follow", "--json", ...el]);
    const lines = () => proc.out.stdout.trim().split("\n").filter((l) => l !== "");
    const until = (n: number) => waitFor(() => lines().length >= n, 10_000, `the command to print ${n} records`);
    await until(1);
    await parks.parked("the command's follower");
    await clients.eventLog!.append("cli-follow", JSON.stringify({ n: 2 }));
    await until(2);
    proc.kill("SIGINT");
    const r = await finished(proc);
    expect(r.code).toBe(0);
    const records = lines().map((l) => JSON.parse(l));
    expect(records.map((x) => [x.event.n, x.live])).toEqual([
      [1, false],
      [2, true],
    ]);
  });

  test("leases acquire, renew and release; another owner is refused while held", async () => {
    const a = JSON.parse((await runCli(["leases", "acquire", "cli-lease", "--owner", "alice", "--json", ...sl])).stdout);
    expect(a).toMatchObject({ sessionId: "cli-lease", owner: "alice" });
    const held = await runCli(["leases", "acquire", "cli-lease", "--owner", "bob", ...sl]);
    expect(held.code).toBe(1);
    expect(held.stderr).toContain("held");
    const renewed = await runCli(["leases", "renew", "cli-lease", "--owner", "alice", "--token", a.token, ...sl]);
    expect(renewed.code).toBe(0);
    expect(renewed.stdout).toMatch(/SESSION\s+OWNER\s+TOKEN\s+EXPIRY/);
    expect((await runCli(["leases", "release", "cli-lease", "--owner", "alice", "--token", a.token, ...sl])).code).toBe(0);
    const b = JSON.parse((await runCli(["leases", "acquire", "cli-lease", "--owner", "bob", "--json", ...sl])).stdout);
    expect(BigInt(b.token) > BigInt(a.token)).toBe(true);
  });

  test("schedules list, get, due and fires", async () => {
    const t0 = 1_800_000_000n * 1_000_000_000n;
    await clients.scheduleStore!.saveSchedule({
      Spec: { Name: "cli-sched", Prompt: "nightly report", Trigger: { Cron: "0 3 * * *", OneShot: ZERO_TIME }, MaxFires: 0 },
      State: { NextFireAt: formatNanos(t0), LastFireAt: ZERO_TIME, FireCount: 0, Enabled: true },
    });
    await clients.scheduleStore!.claimSchedule("cli-sched", t0, t0 + 86_400n * 1_000_000_000n);
    await clients.scheduleStore!.recordFire({ ID: "sched--cli-1", ScheduleName: "cli-sched", SessionID: "sched--cli-1", FiredAt: formatNanos(t0), Stop: "end_turn", Err: "" });

    const list = await runCli(["schedules", "list", ...sc]);
    expect(list.stdout).toMatch(/NAME\s+ENABLED\s+NEXT FIRE/);
    expect(list.stdout).toContain("cron 0 3 * * *");
    const got = JSON.parse((await runCli(["schedules", "get", "cli-sched", "--json", ...sc])).stdout);
    expect(got.State.FireCount).toBe(1);
    expect((await runCli(["schedules", "get", "cli-sched", ...sc])).stdout).toMatch(/prompt\s+nightly report/);
    const due = JSON.parse((await runCli(["schedules", "due", "--at", formatNanos(t0 + 90_000n * 1_000_000_000n), "--json", ...sc])).stdout) as Array<{ Spec: { Name: string } }>;
    expect(due.map((s) => s.Spec.Name)).toContain("cli-sched");
    const notYet = JSON.parse((await runCli(["schedules", "due", "--at", formatNanos(t0), "--json", ...sc])).stdout) as Array<{ Spec: { Name: string } }>;
    expect(notYet.map((s) => s.Spec.Name)).not.toContain("cli-sched");
    const fires = await runCli(["schedules", "fires", "cli-sched", ...sc]);
    expect(fires.stdout).toMatch(/sched--cli-1\s+sched--cli-1/);
    expect(fires.stdout).toContain("end_turn");
    expect((await runCli(["schedules", "get", "nope", ...sc])).code).toBe(1);
  });

  test("sessions delete --help says the event log goes too", async () => {
    const help = await runCli(["sessions", "delete", "--help"]);
    expect(help.stdout.replace(/\s+/g, " ")).toContain("the session's event log too");
  });

  test("sessions save and create store a snapshot from a file, byte for byte; a snapshot of another id is refused", async () => {
    const file = join(dir, "snap.json");
    const bytes = `${JSON.stringify({ id: "cli-file", state: "idle", messages: [] })}\n`;
    writeFileSync(file, bytes);
    const saved = await runCli(["sessions", "save", "cli-file", "--file", file, ...ss]);
    expect(saved.code).toBe(0);
    expect(saved.stdout).toContain(`saved cli-file (${bytes.length} bytes)`);
    expect(Buffer.from((await clients.sessionStore!.load("cli-file")).payload).toString("utf8")).toBe(bytes);

    const again = await runCli(["sessions", "create", "cli-file", "--file", file, ...ss]);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain("already exists");
    writeFileSync(join(dir, "new.json"), JSON.stringify({ id: "cli-created" }));
    expect((await runCli(["sessions", "create", "cli-created", "--file", join(dir, "new.json"), ...ss])).code).toBe(0);
    expect(JSON.parse(Buffer.from((await clients.sessionStore!.load("cli-created")).payload).toString("utf8"))).toEqual({ id: "cli-created" });

    const wrongId = await runCli(["sessions", "save", "cli-other", "--file", file, ...ss]);
    expect(wrongId.code).toBe(2);
    expect(wrongId.stderr).toContain('has id "cli-file", not "cli-other"');
    writeFileSync(join(dir, "bad.json"), "not json");
    expect((await runCli(["sessions", "save", "cli-bad", "--file", join(dir, "bad.json"), ...ss])).code).toBe(2);
    await expect(clients.sessionStore!.load("cli-other")).rejects.toThrow(/not found/);
  });

  test("sessions list --limit shows the newest rows, with long ids last so the rows stay aligned", async () => {
    const ids = [1, 2, 3].map((i) => `cli-long-${i}-${"x".repeat(100 + i * 7)}`);
    for (const id of ids) await clients.sessionStore!.save(id, enc({ id }));
    const r = await runCli(["sessions", "list", "--limit", "2", ...ss]);
    expect(r.code).toBe(0);
    const lines = r.stdout.trimEnd().split("\n");
    expect(lines).toHaveLength(3);
    expect(lines[0]).toMatch(/^MODIFIED\s+SESSION/);
    expect(lines[1]!.trimEnd().endsWith(ids[2]!)).toBe(true);
    expect(lines[2]!.trimEnd().endsWith(ids[1]!)).toBe(true);
    expect(lines.map((l, i) => (i === 0 ? l.indexOf("SESSION") : l.indexOf("cli-long-")))).toEqual([lines[0]!.indexOf("SESSION"), lines[0]!.indexOf("SESSION"), lines[0]!.indexOf("SESSION")]);
    expect(lines.slice(1).every((l) => /^\d{4}-\d\d-\d\dT/.test(l))).toBe(true);
    expect(r.stderr).toMatch(/^2 of \d+ sessions; --limit 0 shows all/);
    const json = JSON.parse((await runCli(["sessions", "list", "--limit", "1", "--json", ...ss])).stdout) as Array<{ sessionId: string }>;
    expect(json.map((x) => x.sessionId)).toEqual([ids[2]]);
  });

  test("MECATL_DRIVERS_TARGET is the target of every --*-url not given", async () => {
    const env = { MECATL_DRIVERS_TARGET: server.address };
    expect((await runCli(["sessions", "list"], { env })).code).toBe(0);
    const health = await runCli(["health", "--json"], { env });
    expect(health.code).toBe(0);
    expect((JSON.parse(health.stdout) as unknown[]).length).toBe(5);
    // A flag given on the command line wins over the variable.
    const flagWins = await runCli(["sessions", "list", "--session-store-url", "127.0.0.1:1"], { env });
    expect(flagWins.code).toBe(1);
    expect((await runCli(["sessions", "list"])).stderr).toContain("or set MECATL_DRIVERS_TARGET");
  });

  test("events append adds events from an argument or a file, in order, and prints their cursors", async () => {
    const one = await runCli(["events", "append", "cli-app", '{"type":"note","n":1}', "--json", ...el]);
    expect(one.code).toBe(0);
    const cursor = JSON.parse(one.stdout).cursor as string;
    writeFileSync(join(dir, "events.jsonl"), '{"type":"note","n":2}\n\n{"type":"note","n":3}\n');
    const many = await runCli(["events", "append", "cli-app", "--file", join(dir, "events.jsonl"), ...el]);
    expect(many.code).toBe(0);
    expect(many.stdout).toMatch(/appended 2 event\(s\) to cli-app; resume after them with --cursor \S+/);
    const read: number[] = [];
    for await (const r of clients.eventLog!.readAfter("cli-app", { cursor })) if (r.kind === "event") read.push(JSON.parse(Buffer.from(r.payload).toString("utf8")).n);
    expect(read).toEqual([2, 3]);
    const notJson = await runCli(["events", "append", "cli-app", "{oops", ...el]);
    expect(notJson.code).toBe(2);
    expect((await runCli(["events", "append", "cli-app", '{"n":4}', "--file", join(dir, "events.jsonl"), ...el])).code).toBe(2);
  });

  test("events tail reads only the end of a long log", async () => {
    const filler = "y".repeat(8 * 1024);
    for (let i = 1; i <= 300; i++) await clients.eventLog!.append("cli-long-log", JSON.stringify({ type: "t", n: i, filler }));
    const proxy = await startFaultProxy(Number(server.address.split(":")[1]));
    try {
      const r = await runCli(["events", "tail", "cli-long-log", "--last", "3", "--no-follow", "--json", "--event-log-url", proxy.address]);
      expect(r.code).toBe(0);
      expect(r.stdout.trim().split("\n").map((l) => JSON.parse(l).event.n)).toEqual([298, 299, 300]);
      expect(r.stderr).toContain("3 record(s)");
      // The log is about 2.4 MiB; the tail read three records of it (plus one per probe).
      expect(proxy.bytesDown).toBeLessThan(256 * 1024);
    } finally {
      await proxy.close();
    }
    const short = await runCli(["events", "tail", "cli-long-log", "--last", "500", "--no-follow", "--json", ...el]);
    expect(short.stdout.trim().split("\n")).toHaveLength(300);
    const none = await runCli(["events", "tail", "never-appended", "--no-follow", ...el]);
    expect(none.code).toBe(0);
    expect(none.stdout).toBe("");
  });

  test("events tail counts everything it printed when Ctrl-C ends it", async () => {
    for (let i = 1; i <= 5; i++) await clients.eventLog!.append("cli-tail-count", JSON.stringify({ n: i }));
    const proc = spawnCli(["events", "tail", "cli-tail-count", "--last", "2", "--json", ...el]);
    const lines = () => proc.out.stdout.trim().split("\n").filter((l) => l !== "");
    await waitFor(() => lines().length >= 2, 10_000, "the last two records");
    await clients.eventLog!.append("cli-tail-count", JSON.stringify({ n: 6 }));
    await waitFor(() => lines().length >= 3, 10_000, "the followed record");
    proc.kill("SIGINT");
    const r = await finished(proc);
    expect(r.code).toBe(0);
    const records = lines().map((l) => JSON.parse(l));
    expect(records.map((x) => x.event.n)).toEqual([4, 5, 6]);
    expect(r.stderr).toContain(`3 record(s); resume with --cursor ${records[2].cursor}`);
  });

  test("leases release says so, and exits 1, when no live lease matched", async () => {
    const a = JSON.parse((await runCli(["leases", "acquire", "cli-rel", "--owner", "alice", "--json", ...sl])).stdout);
    const wrong = await runCli(["leases", "release", "cli-rel", "--owner", "alice", "--token", String(BigInt(a.token) + 1n), ...sl]);
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toContain("nothing released: no live lease on cli-rel is held by alice with token");
    expect((await runCli(["leases", "acquire", "cli-rel", "--owner", "bob", ...sl])).code).toBe(1);
    const right = await runCli(["leases", "release", "cli-rel", "--owner", "alice", "--token", a.token, "--json", ...sl]);
    expect(right.code).toBe(0);
    expect(JSON.parse(right.stdout)).toMatchObject({ released: true, sessionId: "cli-rel" });
    const twice = await runCli(["leases", "release", "cli-rel", "--owner", "alice", "--token", a.token, "--json", ...sl]);
    expect(twice.code).toBe(1);
    expect(JSON.parse(twice.stdout)).toMatchObject({ released: false });
    expect((await runCli(["leases", "acquire", "cli-rel", "--owner", "bob", ...sl])).code).toBe(0);
  });

  test("schedules disable, enable and delete", async () => {
    await clients.scheduleStore!.saveSchedule({
      Spec: { Name: "cli-toggle", Prompt: "p", Trigger: { Cron: "0 3 * * *", OneShot: ZERO_TIME }, MaxFires: 0 },
      State: { NextFireAt: formatNanos(1_800_000_000n * 1_000_000_000n), LastFireAt: ZERO_TIME, FireCount: 0, Enabled: true },
    });
    expect((await runCli(["schedules", "disable", "cli-toggle", ...sc])).stdout).toBe("disabled cli-toggle\n");
    expect((await clients.scheduleStore!.loadSchedule("cli-toggle")).State.Enabled).toBe(false);
    expect((await runCli(["schedules", "enable", "cli-toggle", ...sc])).code).toBe(0);
    expect((await clients.scheduleStore!.loadSchedule("cli-toggle")).State.Enabled).toBe(true);
    const unknown = await runCli(["schedules", "disable", "cli-no-such", ...sc]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain("cli-no-such");
    expect((await runCli(["schedules", "delete", "cli-toggle", ...sc])).stdout).toBe("deleted cli-toggle\n");
    expect((await runCli(["schedules", "get", "cli-toggle", ...sc])).code).toBe(1);
    expect((await runCli(["schedules", "delete", "cli-toggle", ...sc])).code).toBe(0);
  });

  test("stats counts records and bytes per kind in the store file", async () => {
    const r = await runCli(["stats", "--store", `sqlite:${join(dir, "store.sqlite")}`, "--json"]);
    expect(r.code).toBe(0);
    const byKind = Object.fromEntries((JSON.parse(r.stdout) as Array<{ kind: string; records?: number; bytes: number }>).map((k) => [k.kind, k]));
    expect(byKind.sessions!.records).toBe((await clients.sessionStore!.list()).length);
    expect(byKind.schedules!.records).toBe((await clients.scheduleStore!.listSchedules()).length);
    expect(byKind.events!.records).toBeGreaterThanOrEqual(300);
    expect(byKind.events!.bytes).toBeGreaterThan(300 * 8 * 1024);
    expect(Object.keys(byKind)).toEqual(["sessions", "events", "leases", "schedules", "fires", "other", "free"]);
    const table = await runCli(["stats", "--store", `sqlite:${join(dir, "store.sqlite")}`]);
    expect(table.stdout).toMatch(/KIND\s+RECORDS\s+BYTES\s+SIZE/);
    expect(table.stdout).toMatch(/events\s+\d+\s+\d+\s+\d+\.\d MiB/);
    const memory = await runCli(["stats", "--store", "sqlite::memory:"]);
    expect(memory.code).toBe(2);
    expect(memory.stderr).toContain("sqlite::memory: lives only inside its server process");
    expect((await runCli(["stats", "--store", `sqlite:${join(dir, "missing.sqlite")}`])).code).toBe(2);
  });

  test("workload interrupted with Ctrl-C prints its summary and leaves no schedule enabled", async () => {
    const proc = spawnCli(
      ["workload", ...ss, ...el, ...sl, ...sc, "--duration", "120s", "--processes", "1", "--sessions", "1", "--watchers", "1", "--schedules", "2", "--max-snapshot", "32KiB", "--media-every", "0", "--drain", "5s", "--run-id", "cli-int", "--keep-data"],
    );
    await waitFor(() => /\b[1-9]\d* claims\b/.test(proc.out.stderr), 30_000, "the workload's scheduler to claim a schedule");
    proc.kill("SIGINT");
    const r = await finished(proc, 60_000);
    expect(r.code).toBe(130);
    expect(r.stdout).toContain("(interrupted)");
    expect(r.stdout).toContain("INVARIANT");
    expect(r.stdout.trimEnd().endsWith("OK")).toBe(true);
    const mine = (await clients.scheduleStore!.listSchedules()).filter((s) => s.Spec.Name.startsWith("cli-int-"));
    expect(mine.map((s) => s.Spec.Name).sort()).toEqual(["cli-int-sched-0", "cli-int-sched-1"]);
    expect(mine.every((s) => s.State.Enabled === false)).toBe(true);
  });

  test("events append --file checks every line before sending any: a bad line 3 appends nothing and is named (issue 14)", async () => {
    const file = join(dir, "bad-line.jsonl");
    writeFileSync(file, '{"n":1}\n{"n":2}\n{oops\n{"n":4}\n');
    const bad = await runCli(["events", "append", "cli-bad-line", "--file", file, ...el]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain(`--file ${file} line 3 is not JSON`);
    expect(bad.stderr).toContain("nothing was appended");
    writeFileSync(file, '{"n":1}\n\n[1,2]\n');
    const notObject = await runCli(["events", "append", "cli-bad-line", "--file", file, ...el]);
    expect([notObject.code, notObject.stderr]).toEqual([2, expect.stringContaining("line 3 is not a JSON object")]);
    const stored: unknown[] = [];
    for await (const r of clients.eventLog!.readAfter("cli-bad-line")) stored.push(r);
    expect(stored).toEqual([]);
  });

  test("sessions delete with one blank id deletes nothing and names the argument (issue 14)", async () => {
    await clients.sessionStore!.save("cli-keep", enc({ id: "cli-keep" }));
    const r = await runCli(["sessions", "delete", "cli-keep", "", ...ss]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('session id 2 of 2 ("") is required and must not be blank; nothing was deleted');
    expect(r.stdout).toBe("");
    expect((await clients.sessionStore!.load("cli-keep")).payload).toEqual(enc({ id: "cli-keep" }));
    const tooLong = await runCli(["schedules", "delete", "x", "y".repeat(16 * 1024 + 1), ...sc]);
    expect([tooLong.code, tooLong.stderr]).toEqual([2, expect.stringContaining("schedule name 2 of 2")]);
  });

  test("schedules disable of a known and an unknown name reports each, and exits 1 (issue 14)", async () => {
    await clients.scheduleStore!.saveSchedule({
      Spec: { Name: "cli-part-a", Prompt: "p", Trigger: { Cron: "0 3 * * *", OneShot: ZERO_TIME }, MaxFires: 0 },
      State: { NextFireAt: formatNanos(1_800_000_000n * 1_000_000_000n), LastFireAt: ZERO_TIME, FireCount: 0, Enabled: true },
    });
    const r = await runCli(["schedules", "disable", "cli-part-nosuch", "cli-part-a", ...sc]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("disabled cli-part-a\n");
    expect(r.stderr).toMatch(/cli-part-nosuch: .*not found/);
    expect(r.stderr).toContain("1 of 2 disabled; not disabled: cli-part-nosuch");
    expect((await clients.scheduleStore!.loadSchedule("cli-part-a")).State.Enabled).toBe(false);
    const json = await runCli(["schedules", "enable", "cli-part-a", "cli-part-nosuch", "--json", ...sc]);
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout)).toEqual({ enabled: ["cli-part-a"], failed: [{ id: "cli-part-nosuch", error: expect.stringContaining("not found") }] });
    expect((await clients.scheduleStore!.loadSchedule("cli-part-a")).State.Enabled).toBe(true);
  });

  test("a missing or unreadable --file exits 2 naming the flag and the path, in every command (issue 14)", async () => {
    const missing = join(dir, "no-such-file.json");
    for (const words of [
      ["sessions", "save", "cli-nofile", ...ss],
      ["sessions", "create", "cli-nofile", ...ss],
      ["events", "append", "cli-nofile", ...el],
    ]) {
      const r = await runCli([...words, "--file", missing]);
      expect([r.code, r.stderr], words.join(" ")).toEqual([2, `mecatl-drivers: cannot read --file ${missing}: no such file\n`]);
      const isDir = await runCli([...words, "--file", dir]);
      expect([isDir.code, isDir.stderr], words.join(" ")).toEqual([2, expect.stringContaining(`cannot read --file ${dir}: EISDIR`)]);
    }
  });

  test("sessions get --payload and --out write a payload that is not JSON verbatim; the summary says the harness would refuse it (issue 14)", async () => {
    const bytes = new Uint8Array([0x6e, 0x6f, 0x74, 0x20, 0x6a, 0x73, 0x6f, 0x6e, 0x00, 0xff, 0x0a]);
    await clients.sessionStore!.save("cli-raw", bytes);
    const raw = await promisify(execFile)(process.execPath, [MAIN, "sessions", "get", "cli-raw", "--payload", ...ss], { encoding: "buffer" });
    expect(new Uint8Array(raw.stdout)).toEqual(bytes);
    const out = join(dir, "raw.bin");
    const written = await runCli(["sessions", "get", "cli-raw", "--out", out, ...ss]);
    expect(written.code).toBe(0);
    expect(new Uint8Array(readFileSync(out))).toEqual(bytes);
    const summary = await runCli(["sessions", "get", "cli-raw", ...ss]);
    expect(summary.code).toBe(0);
    expect(summary.stdout).toMatch(/bytes\s+11/);
    expect(summary.stderr).toContain("the harness would refuse to load this snapshot");
    const badOut = await runCli(["sessions", "get", "cli-raw", "--out", join(dir, "no", "such", "dir.bin"), ...ss]);
    expect([badOut.code, badOut.stderr]).toEqual([2, expect.stringContaining("cannot write --out")]);
  });

  test("sessions list escapes control characters in ids, so a row stays one line and no escape sequence reaches the terminal (issue 14)", async () => {
    const id = "cli-ctl\nsecond-line\x1b[31mred\x1b[0m";
    await clients.sessionStore!.save(id, enc({ id }));
    const r = await runCli(["sessions", "list", ...ss]);
    expect(r.code).toBe(0);
    expect(r.stdout).not.toContain("\x1b");
    const row = r.stdout.split("\n").find((l) => l.includes("cli-ctl"));
    expect(row?.trimEnd().endsWith("cli-ctl\\nsecond-line\\x1b[31mred\\x1b[0m")).toBe(true);
    expect(r.stdout).not.toMatch(/^second-line/m);
    const json = JSON.parse((await runCli(["sessions", "list", "--json", ...ss])).stdout) as Array<{ sessionId: string }>;
    expect(json.map((x) => x.sessionId)).toContain(id);
    expect((await runCli(["sessions", "delete", id, ...ss])).stdout).toBe("deleted cli-ctl\\nsecond-line\\x1b[31mred\\x1b[0m\n");
  });

  test("sessions list with only one of --owner-issuer/--owner-subject is a usage error", async () => {
    for (const flag of ["--owner-issuer", "--owner-subject"]) {
      const r = await runCli(["sessions", "list", flag, "x", ...ss]);
      expect([r.code, r.stderr]).toEqual([2, expect.stringContaining("--owner-issuer and --owner-subject go together")]);
    }
  });

  test("sessions lineage of a deleted session points at --incarnation", async () => {
    const inc = newIncarnation();
    await clients.sessionStore!.create("cli-gone", sessnap({ id: "cli-gone", incarnation: inc }));
    await clients.sessionStore!.delete("cli-gone");
    const r = await runCli(["sessions", "lineage", "cli-gone", ...ss]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("for a deleted session give its incarnation with --incarnation");
    const byInc = await runCli(["sessions", "lineage", "cli-gone", "--incarnation", inc, ...ss]);
    expect(byInc.code).toBe(0);
    expect(byInc.stdout).toMatch(/cli-gone\s+inc_\S+\s+\S+\s+pruned/);
  });

  test("health exits 0 when every named service is SERVING", async () => {
    const r = await runCli(["health", ...ss, ...el, ...sl, ...sc, "--json"]);
    expect(r.code).toBe(0);
    const rows = JSON.parse(r.stdout) as Array<{ service: string; status: string }>;
    expect(rows.map((x) => x.service)).toEqual(["(server)", "mecatl.driver.v1.SessionStoreService", "mecatl.driver.v1.EventLogService", "mecatl.driver.v1.SessionLeaseService", "mecatl.driver.v1.ScheduleStoreService"]);
    expect(rows.every((x) => x.status === "SERVING")).toBe(true);
  });
});
