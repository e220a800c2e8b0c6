import { Code, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import { Health, HealthCheckResponse_ServingStatus as ServingStatus } from "../gen/grpc/health/v1/health_pb.js";
import { unaryCall, type CallOptions } from "./call.js";

export { ServingStatus };

/** One row of a health check: a gRPC service name (`""` = the whole server) and its status. */
export interface HealthStatus {
  service: string;
  /** `SERVING`, `NOT_SERVING`, `UNKNOWN`, or `SERVICE_UNKNOWN` when the server does not serve that name. */
  status: keyof typeof ServingStatus;
}

/**
 * Asks `grpc.health.v1.Health/Check` about each name in `services` (`""` is
 * the server as a whole). A name the server does not know (NOT_FOUND) is
 * reported as `SERVICE_UNKNOWN`, not thrown. Health needs no bearer token, but
 * the transport's token is sent anyway.
 *
 * @throws InfrastructureError when the server cannot be reached or fails.
 */
export async function checkHealth(transport: Transport, services: readonly string[], options?: CallOptions): Promise<HealthStatus[]> {
  const client = createClient(Health, transport);
  const out: HealthStatus[] = [];
  for (const service of services) {
    const status = await unaryCall("Health/Check", options, async (o) => {
      try {
        return (await client.check({ service }, o)).status;
      } catch (err) {
        if (err instanceof ConnectError && err.code === Code.NotFound) return ServingStatus.SERVICE_UNKNOWN;
        throw err;
      }
    });
    out.push({ service, status: ServingStatus[status] as keyof typeof ServingStatus });
  }
  return out;
}
