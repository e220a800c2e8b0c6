import { ConnectError, Code } from "@connectrpc/connect";
import { expect } from "vitest";
import { ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";

/**
 * Awaits `promise`, expects it to reject with a ConnectError of `code`, and
 * returns the error. `messageIncludes` checks the message names the field.
 */
export async function expectCode(promise: Promise<unknown>, code: Code, messageIncludes?: string): Promise<ConnectError> {
  let caught: unknown;
  try {
    await promise;
  } catch (err) {
    caught = err;
  }
  expect(caught, `expected ${Code[code]}, but the call succeeded`).toBeInstanceOf(ConnectError);
  const ce = caught as ConnectError;
  expect(Code[ce.code], ce.message).toBe(Code[code]);
  if (messageIncludes !== undefined) expect(ce.rawMessage).toContain(messageIncludes);
  return ce;
}

/** The ErrorInfo reason and domain a ConnectError carries, if any. */
export function errorInfo(err: ConnectError): { reason: string; domain: string } | undefined {
  const [info] = err.findDetails(ErrorInfoSchema);
  return info === undefined ? undefined : { reason: info.reason, domain: info.domain };
}

/**
 * Awaits `promise`, expects it to fail with any ConnectError (a call that
 * must not succeed, where the exact code is another branch's work, see
 * pending.ts), and returns the error.
 */
export async function expectFailure(promise: Promise<unknown>): Promise<ConnectError> {
  const outcome = await promise.then(
    () => undefined,
    (err: unknown) => ConnectError.from(err),
  );
  expect(outcome, "expected the call to fail, but it succeeded").toBeInstanceOf(ConnectError);
  return outcome!;
}
