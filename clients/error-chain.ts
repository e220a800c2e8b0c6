/**
 * `err` and the errors of its `cause` chain, outermost first, as long as
 * they are Errors; an error that is its own cause ends the chain. Node and
 * connect-node wrap the error that says what happened (a TLS alert,
 * ECONNRESET, an HTTP/2 protocol error) in one or more others, so the
 * clients look along the whole chain for its Node `code`.
 */
export function* errorChain(err: unknown): Iterable<Error> {
  for (let e: unknown = err; e instanceof Error; e = e.cause === e ? undefined : e.cause) yield e;
}
