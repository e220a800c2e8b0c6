import { parser } from "@prometheus-io/lezer-promql";

/** One series selector of a PromQL query: the metric name and the label names it matches on. */
export interface Selector {
  metric: string;
  labels: string[];
}

/** Grafana's macros replaced by PromQL a parser accepts (values do not matter: only names are checked). */
function withoutGrafanaMacros(expr: string): string {
  return expr.replace(/\$__rate_interval|\$__interval|\$__range/g, "5m");
}

/**
 * Parses a Grafana PromQL query with Prometheus' own grammar
 * (`@prometheus-io/lezer-promql`) and returns its series selectors.
 * `label_values(SELECTOR, LABEL)` (a Grafana variable query) is read as its
 * selector.
 *
 * @throws Error naming the query when it does not parse.
 */
export function selectors(query: string): Selector[] {
  const lv = /^\s*label_values\((.*),\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)\s*$/s.exec(query);
  const expr = withoutGrafanaMacros(lv === null ? query : lv[1]!);
  const tree = parser.parse(expr);
  const found: Selector[] = [];
  const cursor = tree.cursor();
  do {
    if (cursor.type.isError) throw new Error(`not valid PromQL at offset ${cursor.from}: ${query}`);
    if (cursor.name !== "VectorSelector") continue;
    const node = cursor.node;
    const metric = node.getChild("Identifier");
    const matchers = node.getChild("LabelMatchers");
    const labels = matchers === null ? [] : matchers.getChildren("UnquotedLabelMatcher").map((m) => expr.slice(m.getChild("LabelName")!.from, m.getChild("LabelName")!.to));
    if (metric !== null) found.push({ metric: expr.slice(metric.from, metric.to), labels });
  } while (cursor.next());
  return found;
}
