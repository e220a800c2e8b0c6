/**
 * Bounded answers (issue 10; answer-limits-suite.ts) on an SQLite file.
 * `sqlite::memory:` runs the same SQLite store code (only the file and its
 * durability settings differ, which every other conformance file covers on
 * it), so it is left out here: each of these tests moves 64+ MiB, and CI's
 * time is bounded.
 */
import { conformanceBackends } from "../helpers/backends.js";
import { answerLimitsSuite } from "./answer-limits-suite.js";

answerLimitsSuite(conformanceBackends().filter((b) => b.name === "sqlite-file"));
