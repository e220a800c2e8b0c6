import { spawnRedis } from "./dist/test/helpers/redis-server.js";
import { startFaultProxy } from "./dist/test/helpers/fault-proxy.js";
import { startServer } from "./dist/test/helpers/server.js";
import { grpcClient } from "./dist/test/helpers/clients.js";
import { EventLogService } from "./dist/gen/mecatl/driver/v1/event_log_pb.js";
const redis = await spawnRedis();
try {
  const proxy = await startFaultProxy(redis.port);
  const server = await startServer(["--store", `redis://${proxy.address}`, "--store-timeout", "1000ms", "--log-level", "debug"]);
  const events = grpcClient(EventLogService, server.address);
  await events.append({ sessionId: "silent", event: { format: "eventlog-json/1", payload: new TextEncoder().encode('{"n":1}') } });
  const t0 = Date.now();
  proxy.setMode("blackhole");
  await new Promise(r => setTimeout(r, 9000));
  for (const l of server.stderr) { try { const e = JSON.parse(l); console.log(e.time - t0, e.msg, e.problem ?? "", e.op ?? "", e.err?.message ?? ""); } catch { console.log(l.slice(0,200)); } }
  await server.stop(); proxy.close?.();
} finally { await redis.stop(); }
