import { Command } from "commander";
import { hostname } from "node:os";
import { LeaseHeldError } from "../errors.js";
import type { Lease } from "../session-lease-client.js";
import { formatNanos } from "../time.js";
import { leafCommand, parseToken, withClients, type CommonFlags } from "./common.js";
import { action, EXIT_FAILURE, printJson, printTable } from "./output.js";

interface LeaseFlags extends CommonFlags {
  owner: string;
  token?: bigint;
}

function printLease(lease: Lease, json: boolean | undefined): void {
  if (json) printJson({ sessionId: lease.sessionId, owner: lease.owner, token: lease.token, expiry: formatNanos(lease.expiry) });
  else printTable(["SESSION", "OWNER", "TOKEN", "EXPIRY"], [[lease.sessionId, lease.owner, lease.token, formatNanos(lease.expiry)]]);
}

function held(name: string, description: string): Command {
  return leafCommand(name, description, "session-lease")
    .argument("<session-id>", "the lease id (a session id, or __scheduler__ for the scheduler's leader lock)")
    .requiredOption("--owner <owner>", "the owner that holds the lease")
    .requiredOption("--token <token>", "the token the lease was granted with", parseToken);
}

/**
 * `mecatl-drivers leases acquire|renew|release`: SessionLeaseService by hand
 * (wire-contract.md section 4.3), e.g. to see who holds a session or to free
 * a lease a crashed process left behind.
 */
export function leasesCommand(): Command {
  const leases = new Command("leases").description("acquire, renew and release session leases (SessionLeaseService)");

  leases.addCommand(
    leafCommand("acquire", "take a lease; fails with 'held' while another owner holds it", "session-lease")
      .argument("<session-id>", "the lease id (a session id, or __scheduler__)")
      .option("--owner <owner>", "who takes it", `${hostname()}-${process.pid}-mecatl-drivers`)
      .action(
        action(async (sessionId: string, flags: LeaseFlags) => {
          printLease(await withClients(flags, "session-lease", (c) => c.sessionLease!.acquire(sessionId, flags.owner)), flags.json);
        }),
      ),
  );

  leases.addCommand(
    held("renew", "extend a lease this owner holds (same token, new expiry)").action(
      action(async (sessionId: string, flags: LeaseFlags) => {
        const lease = { sessionId, owner: flags.owner, token: flags.token!, expiry: 0n };
        printLease(await withClients(flags, "session-lease", (c) => c.sessionLease!.renew(lease)), flags.json);
      }),
    ),
  );

  leases.addCommand(
    held("release", "give a lease up; exits 1 saying so when no live lease matched the owner and token (already released, expired, or taken over)").action(
      action(async (sessionId: string, flags: LeaseFlags) => {
        const lease = { sessionId, owner: flags.owner, token: flags.token!, expiry: 0n };
        const released = await withClients(flags, "session-lease", async (c) => {
          // Release answers OK whether or not it matched (wire-contract.md section 4.3). A Renew
          // first tells: it succeeds only for a live lease of this owner and token, and the
          // Release that follows at once removes it, so a match changes nothing but the report.
          const matched = await c.sessionLease!.renew(lease).then(
            () => true,
            (err: unknown) => {
              if (err instanceof LeaseHeldError) return false;
              throw err;
            },
          );
          await c.sessionLease!.release(lease);
          return matched;
        });
        if (flags.json) printJson({ released, sessionId, owner: flags.owner, token: flags.token });
        else if (released) process.stdout.write(`released ${sessionId} (owner ${flags.owner}, token ${flags.token})\n`);
        if (!released) {
          process.stderr.write(`mecatl-drivers: nothing released: no live lease on ${sessionId} is held by ${flags.owner} with token ${flags.token} (already released, expired, or taken over)\n`);
          process.exitCode = EXIT_FAILURE;
        }
      }),
    ),
  );
  return leases;
}
