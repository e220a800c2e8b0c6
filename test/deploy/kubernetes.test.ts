import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import { Health, HealthCheckResponse_ServingStatus as Status } from "../../gen/grpc/health/v1/health_pb.js";
import { checkInvocation, ROOT } from "../helpers/deploy-checks.js";
import { makePki, type TestPki } from "../helpers/certs.js";
import { spawnRedis, type SpawnedRedis } from "../helpers/redis-server.js";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { grpcClient } from "../helpers/clients.js";
import { openDriverClients } from "../../clients/factory.js";

const DIR = join(ROOT, "deploy/kubernetes");

interface Probe {
  grpc?: { port: unknown; service?: string };
}
interface Container {
  name: string;
  image: string;
  command?: string[];
  args?: string[];
  ports?: Array<{ name?: string; containerPort: number }>;
  env?: Array<{ name: string; value?: string }>;
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  livenessProbe?: Probe;
  readinessProbe?: Probe;
  startupProbe?: Probe;
  lifecycle?: { preStop?: { exec?: { command: string[] } } };
  volumeMounts?: Array<{ name: string; mountPath: string; readOnly?: boolean }>;
}
interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string };
  spec: Record<string, any>;
}

/** Every document of every YAML file in deploy/kubernetes, parsed with the `yaml` package (errors fail the test). */
function manifests(): Array<{ file: string; doc: Manifest }> {
  return readdirSync(DIR)
    .filter((f) => /\.ya?ml$/.test(f) && f !== "kustomization.yaml")
    .flatMap((file) =>
      parseAllDocuments(readFileSync(join(DIR, file), "utf8")).map((d) => {
        if (d.errors.length > 0) throw new Error(`${file}: ${d.errors.map((e) => e.message).join("; ")}`);
        return { file, doc: d.toJS() as Manifest };
      }),
    );
}

const all = manifests();
const deployment = all.find((m) => m.doc.kind === "Deployment")!.doc;
const pod = deployment.spec.template.spec as { terminationGracePeriodSeconds: number; containers: Container[]; volumes: Array<{ name: string; secret?: { secretName: string; items?: Array<{ key: string; path: string }> } }> };
const drivers = pod.containers.find((c) => c.image.startsWith("mecatl-drivers"))!;
const argv = [...(drivers.command ?? ["mecatl-drivers"]), ...(drivers.args ?? [])];
const flag = (name: string) => {
  const i = argv.indexOf(name);
  return i < 0 ? undefined : argv[i + 1];
};
const portOf = (addr: string | undefined) => Number(addr?.split(":").at(-1));
const seconds = (d: string) => Number(/^(\d+)s$/.exec(d)?.[1]);
const bytes = (q: string) => Number(/^(\d+)Mi$/.exec(q)?.[1] ?? Number(/^(\d+)Gi$/.exec(q)?.[1]) * 1024) * 1024 * 1024;

describe("deploy/kubernetes manifests", () => {
  test("parse, and are a Deployment, a Service and a PodDisruptionBudget listed in the kustomization", () => {
    expect(all.map((m) => m.doc.kind).sort()).toEqual(["Deployment", "PodDisruptionBudget", "Service"]);
    for (const { file, doc } of all) expect(doc.metadata.name, file).toBe("mecatl-drivers");
    const kustomization = parseAllDocuments(readFileSync(join(DIR, "kustomization.yaml"), "utf8"))[0]!.toJS() as { resources: string[] };
    expect(kustomization.resources.sort()).toEqual([...new Set(all.map((m) => m.file))].sort());
  });

  test("every flag the Deployment passes exists in serve --help", async () => {
    expect(argv.slice(0, 2)).toEqual(["mecatl-drivers", "serve"]);
    expect(await checkInvocation("Deployment mecatl-drivers", argv)).toEqual([]);
  });

  test("liveness and readiness use Kubernetes' native gRPC probes on the cleartext health listener", () => {
    const health = portOf(flag("--health-listen"));
    for (const probe of [drivers.livenessProbe, drivers.readinessProbe, drivers.startupProbe]) {
      expect(probe?.grpc, JSON.stringify(probe)).toBeDefined();
      // A gRPC probe's port must be a number (named ports are not accepted there).
      expect(probe!.grpc!.port).toBe(health);
    }
    expect(drivers.livenessProbe!.grpc!.service).toBe("liveness");
    expect(drivers.readinessProbe!.grpc!.service).toBe("");
    expect(drivers.ports!.map((p) => p.containerPort)).toContain(health);
  });

  test("the token file, the Redis password and the TLS files are secrets mounted read-only as files", () => {
    for (const f of ["--auth-token-file", "--redis-password-file", "--tls-cert", "--tls-key"]) {
      const path = flag(f);
      expect(path, f).toBeDefined();
      const mount = drivers.volumeMounts!.find((m) => path!.startsWith(`${m.mountPath}/`));
      expect(mount, `${f} ${path} is on a mounted volume`).toBeDefined();
      expect(mount!.readOnly).toBe(true);
      const volume = pod.volumes.find((v) => v.name === mount!.name)!;
      expect(volume.secret, `${f}: volume ${volume.name} is a secret`).toBeDefined();
      const file = path!.slice(mount!.mountPath.length + 1);
      if (volume.secret!.items !== undefined) expect(volume.secret!.items.map((i) => i.path), f).toContain(file);
    }
  });

  test("shutdown settings match --shutdown-grace; resources are set and cite the benchmarks", () => {
    const grace = seconds(flag("--shutdown-grace")!);
    const preStop = drivers.lifecycle?.preStop?.exec?.command;
    const sleep = preStop?.[0] === "sleep" ? Number(preStop[1]) : 0;
    expect(pod.terminationGracePeriodSeconds).toBeGreaterThan(grace + sleep);
    const r = drivers.resources!;
    for (const k of ["cpu", "memory"]) {
      expect(r.requests?.[k], `requests.${k}`).toBeDefined();
      expect(r.limits?.[k], `limits.${k}`).toBeDefined();
    }
    expect(bytes(r.limits!.memory!)).toBeGreaterThanOrEqual(bytes(r.requests!.memory!));
    const heap = Number(/--max-old-space-size=(\d+)/.exec(drivers.env?.find((e) => e.name === "NODE_OPTIONS")?.value ?? "")?.[1]);
    expect(heap * 1024 * 1024).toBeLessThan(bytes(r.limits!.memory!));
    expect(readFileSync(join(DIR, "deployment.yaml"), "utf8")).toMatch(/bench\/RESULTS\.md/);
  });

  test("the Service and the PodDisruptionBudget select the Deployment's pods", () => {
    const labels = deployment.spec.template.metadata.labels as Record<string, string>;
    const service = all.find((m) => m.doc.kind === "Service")!.doc;
    const pdb = all.find((m) => m.doc.kind === "PodDisruptionBudget")!.doc;
    for (const selector of [service.spec.selector as Record<string, string>, pdb.spec.selector.matchLabels as Record<string, string>]) {
      for (const [k, v] of Object.entries(selector)) expect(labels[k]).toBe(v);
    }
    const named = new Set(drivers.ports!.map((p) => p.name));
    for (const p of service.spec.ports as Array<{ targetPort: string | number }>) expect(typeof p.targetPort === "number" || named.has(p.targetPort)).toBe(true);
    expect((service.spec.ports as Array<{ port: number }>).map((p) => p.port)).toContain(portOf(flag("--listen")));
    // The budget must leave a drain possible: at most replicas - 1 pods kept.
    const replicas = deployment.spec.replicas as number;
    if (pdb.spec.minAvailable !== undefined) expect(pdb.spec.minAvailable).toBeLessThan(replicas);
    else expect(pdb.spec.maxUnavailable).toBeGreaterThanOrEqual(1);
  });
});

describe("a server started with the Deployment's arguments", () => {
  let pki: TestPki;
  let redis: SpawnedRedis;
  let server: ServerProcess;
  beforeAll(async () => {
    pki = makePki();
    redis = await spawnRedis({ password: "k8s-redis-secret" });
    writeFileSync(join(pki.dir, "tokens"), "k8s-token\n");
    writeFileSync(join(pki.dir, "password"), "k8s-redis-secret\n");
    // Only what names this machine changes: secret paths, listen addresses, the store's host.
    const local: Record<string, string> = {
      "--tls-cert": pki.serverCert,
      "--tls-key": pki.serverKey,
      "--tls-client-ca": pki.caCert,
      "--auth-token-file": join(pki.dir, "tokens"),
      "--redis-password-file": join(pki.dir, "password"),
      "--store": redis.url,
      "--listen": "127.0.0.1:0",
      "--health-listen": "127.0.0.1:0",
      "--metrics-listen": "127.0.0.1:0",
    };
    const args = argv.slice(2).map((a, i, list) => local[list[i - 1]!] ?? a);
    server = await startServer(args.filter((a, i) => !(a === "--listen" || args[i - 1] === "--listen")), { listen: "127.0.0.1:0" });
  });
  afterAll(async () => {
    await server?.stop();
    await redis?.stop();
    rmSync(pki.dir, { recursive: true, force: true });
  });

  test("starts, answers the probes' health names SERVING in cleartext, and serves with TLS and the token", async () => {
    const health = grpcClient(Health, server.healthAddress!);
    for (const probe of [drivers.livenessProbe, drivers.readinessProbe, drivers.startupProbe]) {
      expect((await health.check({ service: probe!.grpc!.service ?? "" })).status).toBe(Status.SERVING);
    }
    const clients = await openDriverClients({ sessionStoreUrl: `localhost:${portOf(server.address)}`, tls: { ca: pki.read(pki.caCert) }, authToken: "k8s-token" });
    try {
      await clients.sessionStore!.save("k8s-1", new TextEncoder().encode(JSON.stringify({ id: "k8s-1" })));
      expect((await clients.sessionStore!.list()).map((s) => s.sessionId)).toContain("k8s-1");
    } finally {
      clients.close();
    }
  });
});
