/** Bounded answers (issue 10; answer-limits-suite.ts) on the SQLite backends (a file and `sqlite::memory:`). */
import { conformanceBackends } from "../helpers/backends.js";
import { answerLimitsSuite } from "./answer-limits-suite.js";

answerLimitsSuite(conformanceBackends().filter((b) => b.name.startsWith("sqlite")));
