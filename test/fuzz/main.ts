/**
 * `npm run fuzz -- --requests 100000 --backend sqlite|sqlite-memory|redis [--seed N]`:
 * the long fuzz run of issue 10, deliverable 5. Starts a server on a fresh
 * store, sends the requests one at a time, prints progress on stderr and a
 * JSON report on stdout (requests, seconds, codes seen, mutations sent,
 * defects grouped), and exits 1 when it found any defect.
 */
import { Command, Option } from "commander";
import { parsePositiveInt } from "../../common/flag-parsers.js";
import { FUZZ_BACKENDS, fuzzRequests, groupDefects, openFuzzSession, type FuzzBackend } from "./run.js";

const program = new Command("fuzz")
  .description("fuzz every RPC of a real server with generated and mutated request bytes")
  .option("--requests <n>", "requests to send", parsePositiveInt, 100_000)
  .addOption(new Option("--backend <name>", "store of the server").choices(FUZZ_BACKENDS).default("sqlite"))
  .option("--seed <n>", "fast-check seed (default: random)", (t) => Number.parseInt(t, 10))
  .action(async (flags: { requests: number; backend: FuzzBackend; seed?: number }) => {
    const seed = flags.seed ?? Math.floor(Math.random() * 2 ** 31);
    const session = await openFuzzSession(flags.backend);
    const started = performance.now();
    try {
      const stats = await fuzzRequests(session.fuzzer, flags.requests, seed, (s) => {
        const seconds = (performance.now() - started) / 1000;
        process.stderr.write(`${s.requests} requests, ${seconds.toFixed(0)} s, ${(s.requests / seconds).toFixed(0)}/s, ${s.defects.length} defects\n`);
      });
      const seconds = (performance.now() - started) / 1000;
      const groups = groupDefects(stats.defects);
      const report = {
        backend: flags.backend,
        seed,
        requests: stats.requests,
        seconds: Number(seconds.toFixed(1)),
        requestsPerSecond: Math.round(stats.requests / seconds),
        codes: stats.codes,
        mutations: stats.mutations,
        byRpc: stats.byRpc,
        refusedWritesChecked: stats.refusalsChecked,
        defects: stats.defects.length,
        defectGroups: groups.map((g) => ({ count: g.count, ...g.example, requestHex: g.example.requestHex.slice(0, 400) })),
      };
      process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
      process.exitCode = stats.defects.length === 0 ? 0 : 1;
    } finally {
      await session.close();
    }
  });

await program.parseAsync(process.argv);
