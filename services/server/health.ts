import { EventEmitter } from "node:events";
import type { ServiceImpl } from "@connectrpc/connect";
import { Code, ConnectError } from "@connectrpc/connect";
import { Health, HealthCheckResponse_ServingStatus as Status } from "../../gen/grpc/health/v1/health_pb.js";
import type { Logger } from "./logger.js";

export { Status as ServingStatus };

/**
 * The health name for liveness probes (issue 14): SERVING for as long as the
 * process answers, whatever the store's state and also while shutting down,
 * so that an orchestrator restarts a process that stopped answering but never
 * one that merely waits for its store (a restart cannot fix the store).
 * Readiness uses the overall name `""` or a service name.
 */
export const LIVENESS_SERVICE = "liveness";

/**
 * Serving status per gRPC service name, and overall under the empty name
 * (grpc.health.v1). Every served service shares the backend, so they turn
 * NOT_SERVING together while it is unreachable or the process shuts down;
 * {@link LIVENESS_SERVICE} alone stays SERVING.
 */
export class HealthState extends EventEmitter {
  private readonly statuses = new Map<string, Status>();

  /** @param services fully-qualified names, e.g. `mecatl.driver.v1.SessionStoreService`. */
  constructor(services: readonly string[]) {
    super();
    this.setMaxListeners(0);
    for (const s of ["", ...services]) this.statuses.set(s, Status.NOT_SERVING);
    this.statuses.set(LIVENESS_SERVICE, Status.SERVING);
  }

  /** Sets every known service (and the overall entry), not {@link LIVENESS_SERVICE}, to `status`, notifying watchers on change. */
  setAll(status: Status): void {
    for (const name of this.statuses.keys()) {
      if (name !== LIVENESS_SERVICE && this.statuses.get(name) !== status) {
        this.statuses.set(name, status);
        this.emit("change", name, status);
      }
    }
  }

  /** The status of `service`, or undefined for a name this server does not serve. */
  get(service: string): Status | undefined {
    return this.statuses.get(service);
  }

  /** Every known name with its status. */
  all(): ReadonlyMap<string, Status> {
    return this.statuses;
  }
}

/**
 * The grpc.health.v1.Health service over a {@link HealthState}. Check answers
 * NOT_FOUND for an unknown name; Watch sends SERVICE_UNKNOWN for one and keeps
 * the stream open, sending each change, until the client cancels or the
 * server shuts down. Health needs no bearer token.
 */
export function healthService(state: HealthState): ServiceImpl<typeof Health> {
  return {
    check(req) {
      const status = state.get(req.service);
      if (status === undefined) throw new ConnectError(`unknown service ${JSON.stringify(req.service)}`, Code.NotFound);
      return { status };
    },
    list() {
      return { statuses: Object.fromEntries([...state.all()].map(([k, v]) => [k, { status: v }])) };
    },
    async *watch(req, ctx) {
      const queue: Status[] = [state.get(req.service) ?? Status.SERVICE_UNKNOWN];
      let wake: (() => void) | undefined;
      const onChange = (name: string, status: Status) => {
        if (name !== req.service) return;
        queue.push(status);
        wake?.();
      };
      const onAbort = () => wake?.();
      state.on("change", onChange);
      ctx.signal.addEventListener("abort", onAbort);
      try {
        while (!ctx.signal.aborted) {
          const next = queue.shift();
          if (next !== undefined) {
            yield { status: next };
            continue;
          }
          await new Promise<void>((resolve) => (wake = resolve));
          wake = undefined;
        }
      } finally {
        state.off("change", onChange);
        ctx.signal.removeEventListener("abort", onAbort);
      }
    },
  };
}

/**
 * Returns a function to call with the backend's current problem (see
 * storage/backend.ts `backendProblem`, undefined when writes can succeed)
 * whenever health is recomputed. It logs one line per change, never one per
 * call (issue 9): an error `store cannot take writes; health is NOT_SERVING`
 * with the `problem`, and an info line `store takes writes again; health is
 * SERVING` when it clears. `store` names the backend (`--store` as given).
 */
export function healthChangeLogger(logger: Logger, store: string): (problem: string | undefined) => void {
  let last: string | undefined;
  return (problem) => {
    if (problem === last) return;
    if (problem !== undefined) logger.error({ store, problem }, "store cannot take writes; health is NOT_SERVING");
    else logger.info({ store, was: last }, "store takes writes again; health is SERVING");
    last = problem;
  };
}
