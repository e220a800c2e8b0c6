import { Command, InvalidArgumentError } from "commander";
import { MODEL_BACKENDS, runModel, startModelTarget, type ModelBackend, type ModelStats } from "./model-run.js";

/**
 * `npm run model -- --runs N [--backend NAME] [--max-commands N] [--seed N]`:
 * the long run of the model-based tests (issue 9 deliverable 6). Starts each
 * backend in turn (a redis-server behind the fault proxy for Redis), runs N
 * random sequences against it and prints one line of figures per backend;
 * exits 1 with fast-check's shrunk counterexample on the first failure.
 */
function positive(text: string): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n <= 0) throw new InvalidArgumentError(`expected a positive integer, got ${JSON.stringify(text)}`);
  return n;
}

const program = new Command("model")
  .description("long run of the contract model-based tests against every backend")
  .option("--runs <n>", "random sequences per backend", positive, 200)
  .option("--max-commands <n>", "longest sequence (batches and faults) of one run", positive, 40)
  .option("--backend <name>", `one of ${MODEL_BACKENDS.join(", ")} (default: all)`)
  .option("--seed <n>", "fast-check seed (default: random)", (t) => Number(t))
  .action(async (flags: { runs: number; maxCommands: number; backend?: string; seed?: number }) => {
    if (flags.backend !== undefined && !MODEL_BACKENDS.includes(flags.backend as ModelBackend)) {
      throw new InvalidArgumentError(`--backend must be one of ${MODEL_BACKENDS.join(", ")}`);
    }
    const backends = flags.backend === undefined ? MODEL_BACKENDS : [flags.backend as ModelBackend];
    const total: ModelStats = { runs: 0, operations: 0, concurrentBatches: 0, lostReplies: 0, resets: 0 };
    for (const backend of backends) {
      const target = await startModelTarget(backend);
      const started = performance.now();
      try {
        const s = await runModel(target, { runs: flags.runs, maxCommands: flags.maxCommands, seed: flags.seed });
        const secs = (performance.now() - started) / 1000;
        console.log(`${backend}: ${s.runs} runs, ${s.operations} operations (${s.concurrentBatches} concurrent batches), ${s.lostReplies} lost replies, ${s.resets} resets, 0 failures, ${secs.toFixed(1)} s`);
        for (const k of Object.keys(total) as Array<keyof ModelStats>) total[k] += s[k];
      } finally {
        await target.stop();
      }
    }
    console.log(`total: ${total.runs} runs, ${total.operations} operations, ${total.lostReplies} lost replies, ${total.resets} resets over ${backends.length} backend(s), 0 failures`);
  });

program.parseAsync().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : String(err));
  if (err instanceof Error && err.cause instanceof Error) console.error(`caused by: ${err.cause.message}`);
  process.exit(1);
});
