/** Bounded answers (issue 10; answer-limits-suite.ts) on the Redis backends (a single redis-server and a Redis Cluster). */
import { conformanceBackends } from "../helpers/backends.js";
import { answerLimitsSuite } from "./answer-limits-suite.js";

answerLimitsSuite(conformanceBackends().filter((b) => !b.name.startsWith("sqlite")));
