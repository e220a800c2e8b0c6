import { MultiBar, Presets, type SingleBar } from "cli-progress";
import type { CopyProgress } from "../../services/copy/copy-run.js";
import type { VerifyProgress } from "../../services/copy/verify.js";
import { formatBytes } from "./stats.js";

/** Milliseconds between two plain progress lines of one kind when stderr is not a terminal. */
const PLAIN_INTERVAL_MS = 2000;

/**
 * Shows the progress of `mecatl-drivers copy` on stderr (issue 14): on a
 * terminal, one bar per kind and phase (cli-progress) with ids done, records
 * and bytes; otherwise plain lines (`copy events: 4200/10000 logs, 420311
 * records, 83.1 MiB`), one when a kind starts and ends and at most one per
 * {@link PLAIN_INTERVAL_MS} in between.
 */
export class CopyProgressView {
  private readonly bars: MultiBar | undefined;
  private readonly byKey = new Map<string, SingleBar>();
  private readonly lastLine = new Map<string, number>();

  constructor(private readonly stream: NodeJS.WriteStream = process.stderr) {
    this.bars = stream.isTTY
      ? new MultiBar(
          { stream, format: "{phase} {kind} |{bar}| {value}/{total} {unit} | {detail}", clearOnComplete: false, hideCursor: true, autopadding: true, etaBuffer: 50 },
          Presets.shades_classic,
        )
      : undefined;
  }

  private show(key: string, values: { phase: string; kind: string; unit: string; detail: string }, done: number, total: number): void {
    if (this.bars !== undefined) {
      let bar = this.byKey.get(key);
      if (bar === undefined) this.byKey.set(key, (bar = this.bars.create(total, done, values)));
      bar.setTotal(total);
      bar.update(done, values);
      return;
    }
    const now = Date.now();
    const last = this.lastLine.get(key);
    if (last !== undefined && done < total && now - last < PLAIN_INTERVAL_MS) return;
    if (last === Number.POSITIVE_INFINITY) return;
    this.lastLine.set(key, done >= total ? Number.POSITIVE_INFINITY : now);
    this.stream.write(`${values.phase} ${values.kind}: ${done}/${total} ${values.unit}, ${values.detail}\n`);
  }

  /** After a batch of the copying phase (or when a kind starts). */
  copy(p: CopyProgress): void {
    const detail = `${p.done.records} records, ${formatBytes(p.done.bytes)}`;
    this.show(`copy ${p.kind}`, { phase: "copy", kind: p.kind, unit: p.kind === "events" ? "logs" : "ids", detail }, p.idsDone, p.ids);
  }

  /** While one side of one kind is verified. */
  verify(p: VerifyProgress): void {
    this.show(`verify ${p.kind} ${p.side}`, { phase: "verify", kind: `${p.kind} (${p.side})`, unit: p.kind === "events" ? "logs" : "ids", detail: "digesting" }, p.idsDone, p.ids);
  }

  /** Writes a plain message below the bars. */
  note(text: string): void {
    if (this.bars !== undefined) this.bars.log(`${text}\n`);
    else this.stream.write(`${text}\n`);
  }

  /** Stops redrawing (the bars stay on screen). */
  stop(): void {
    this.bars?.stop();
  }
}
