import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { execFileSync } from "node:child_process";
import { Agent, request } from "node:http";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { missingPrerequisite } from "../helpers/prerequisite.js";
import { startServer, type ServerProcess } from "../helpers/server.js";

/**
 * Issue 9 deliverable 4, HTTP/1.1 on the Connect listener: HTTP/1.1 has no
 * ping, so its connections get TCP keepalive (connect-keepalive.ts), probes
 * starting after --keepalive-time of silence. The kernel shows the keepalive
 * timer of the server's end of the connection (`ss -o`).
 */
/** True when iproute2's `ss` can be run (.ci/run installs it; without it the test skips locally and fails under CI). */
function hasSs(): boolean {
  try {
    execFileSync("ss", ["-V"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

describe("TCP keepalive on the Connect listener's HTTP/1.1 connections", () => {
  let server: ServerProcess;
  const agent = new Agent({ keepAlive: true });
  const ss = hasSs();
  beforeAll(async () => {
    if (!ss) return;
    server = await startServer(["session-store", "--store", "sqlite::memory:", "--connect-listen", "127.0.0.1:0", "--keepalive-time", "7s"]);
  });
  afterAll(async () => {
    agent.destroy();
    await server?.stop();
  });

  test("the server's end of an idle connection has a keepalive timer of at most --keepalive-time", async (ctx) => {
    if (!ss) return missingPrerequisite(ctx, "iproute2's ss is not installed (apt-get install iproute2)");
    const port = server.connectAddress!.split(":")[1]!;
    // One call on a connection the agent keeps open afterwards: the server has accepted it.
    const status = await new Promise<number>((resolve, reject) => {
      const req = request({ host: "127.0.0.1", port, method: "POST", path: `/${SessionStoreService.typeName}/Capabilities`, headers: { "content-type": "application/json" }, agent }, (res) => {
        res.resume();
        res.once("end", () => resolve(res.statusCode!));
      });
      req.once("error", reject);
      req.end("{}");
    });
    expect(status).toBe(200);
    const sockets = execFileSync("ss", ["-tnoH", "state", "established", `( sport = :${port} )`], { encoding: "utf8" });
    const timer = /timer:\(keepalive,([^,]+),/.exec(sockets);
    expect(timer, sockets).not.toBeNull();
    // Seconds (`6.384ms` in ss's notation: seconds.milliseconds), not the kernel's default of 2 hours (`119min59sec`).
    expect(timer![1], sockets).toMatch(/^[0-7](\.\d+)?m?s(ec)?$/);
  });
});
