/**
 * Holds what the listeners accept while the server is still starting.
 *
 * `serve` binds every listener before it opens the store, so a busy address
 * or socket path fails the start before anything is created on disk
 * (issue 14: a failed start leaves nothing behind). A connection (or Connect
 * request) that arrives in the meantime is held, untouched, until the
 * services are mounted ({@link StartGate.open}: it is then handed over and
 * served as usual; bytes the peer already sent stay buffered in its socket),
 * or dropped when the start fails ({@link StartGate.fail}: the peer sees its
 * connection closed, as if nothing had listened).
 */
export class StartGate {
  private state: "starting" | "open" | "failed" = "starting";
  private held: Array<{ pass(): void; drop(): void }> = [];

  /**
   * Runs `pass` now when the server is open, later when it opens, or `drop`
   * instead when the start failed or fails.
   */
  admit(pass: () => void, drop: () => void): void {
    if (this.state === "open") pass();
    else if (this.state === "failed") drop();
    else this.held.push({ pass, drop });
  }

  /** The services are mounted: hands every held connection over, in arrival order. */
  open(): void {
    this.settle("open");
  }

  /** The start failed: drops every held connection and every later one. */
  fail(): void {
    this.settle("failed");
  }

  private settle(state: "open" | "failed"): void {
    if (this.state !== "starting") return;
    this.state = state;
    const held = this.held;
    this.held = [];
    for (const h of held) (state === "open" ? h.pass : h.drop)();
  }
}
