import { describe, expect, it } from "vitest";
import { randomHexId } from "../../services/storage/random-id.js";

describe("randomHexId (Redis operation ids)", () => {
  it("gives 16 lowercase hex characters, never the same twice across several pool refills", () => {
    const ids = Array.from({ length: 2000 }, () => randomHexId());
    for (const id of ids) expect(id).toMatch(/^[0-9a-f]{16}$/);
    expect(new Set(ids).size).toBe(ids.length);
  });
});
