import { createServer, type Server } from "node:http";

/** One span as an OTLP/HTTP JSON export carried it, flattened for assertions. */
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** Empty for a root span. */
  parentSpanId: string;
  name: string;
  /** OTLP SpanKind: 1 internal, 2 server, 3 client. */
  kind: number;
  /** Epoch nanoseconds. */
  startNs: bigint;
  endNs: bigint;
  attributes: Record<string, string | number | boolean>;
  /** OTLP status code: 0 unset, 1 ok, 2 error. */
  statusCode: number;
  statusMessage: string;
  /** The attributes of the resource that exported it (`service.name`...). */
  resource: Record<string, string | number | boolean>;
}

/** A minimal OpenTelemetry collector: an OTLP/HTTP receiver for traces in JSON (`OTEL_EXPORTER_OTLP_PROTOCOL=http/json`). */
export interface OtlpReceiver {
  /** Base URL for `OTEL_EXPORTER_OTLP_ENDPOINT` (exports go to `/v1/traces` under it). */
  endpoint: string;
  /** Every span received so far, in arrival order. */
  spans: ReceivedSpan[];
  /** Every request body received, verbatim (to check what was never sent). */
  bodies: string[];
  close(): Promise<void>;
}

type AnyValue = { stringValue?: string; intValue?: string | number; doubleValue?: number; boolValue?: boolean };
type KeyValue = { key: string; value: AnyValue };

function attributesOf(list: KeyValue[] | undefined): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  for (const { key, value } of list ?? []) {
    out[key] = value.stringValue ?? (value.intValue !== undefined ? Number(value.intValue) : (value.doubleValue ?? value.boolValue ?? ""));
  }
  return out;
}

/**
 * Starts an HTTP server on 127.0.0.1 (random port) that accepts OTLP trace
 * exports as `application/json` on `POST /v1/traces`, as the OpenTelemetry
 * protocol specifies them, and answers `{}` (full success). Anything else gets
 * 404 or 415, so an exporter speaking another encoding fails loudly.
 */
export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const bodies: string[] = [];
  const server: Server = createServer((req, res) => {
    if (req.method !== "POST" || req.url !== "/v1/traces") return void res.writeHead(404).end();
    if (!(req.headers["content-type"] ?? "").startsWith("application/json")) return void res.writeHead(415).end();
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      bodies.push(body);
      const parsed = JSON.parse(body) as {
        resourceSpans?: Array<{
          resource?: { attributes?: KeyValue[] };
          scopeSpans?: Array<{ spans?: Array<Record<string, unknown> & { attributes?: KeyValue[]; status?: { code?: number; message?: string } }> }>;
        }>;
      };
      for (const rs of parsed.resourceSpans ?? []) {
        const resource = attributesOf(rs.resource?.attributes);
        for (const ss of rs.scopeSpans ?? []) {
          for (const s of ss.spans ?? []) {
            spans.push({
              traceId: String(s.traceId),
              spanId: String(s.spanId),
              parentSpanId: String(s.parentSpanId ?? ""),
              name: String(s.name),
              kind: Number(s.kind),
              startNs: BigInt(String(s.startTimeUnixNano)),
              endNs: BigInt(String(s.endTimeUnixNano)),
              attributes: attributesOf(s.attributes),
              statusCode: s.status?.code ?? 0,
              statusMessage: s.status?.message ?? "",
              resource,
            });
          }
        }
      }
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  const port = typeof address === "object" && address !== null ? address.port : 0;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    spans,
    bodies,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
