// Outcomes of a token check, shared with every host (see README.md beside this file).
// The numbers are part of the ABI: append, never renumber. Plain TypeScript as much as
// AssemblyScript: the host imports this very file (host/core/core.ts). An enum rather
// than a const enum, so that the host's copy is an object with names; the core's build
// is the same either way.
export enum Outcome {
  Valid = 0,
  Malformed = 1,
  BadSignature = 2,
  Expired = 3,
  Revoked = 4,
  EarlierGeneration = 5,
  NotGranted = 6,
  NoToken = 7,
  BadHeader = 8,
  BadPath = 9,
  /**
   * Valid for the path, but the token's grant has a method scope: the request may be
   * served only for a method `methodAllowed` lets through. Its grant id is at RESULT_GRANT
   * (result-record.ts), and 1 at RESULT_SCOPED.
   */
  Scoped = 10,
  /**
   * Valid for the path, but the token's grant has limits (a rate, client ranges): the
   * request may be served only once `admit` lets it through, and, when the grant also has
   * a method scope, for a method `methodAllowed` lets through. Its serial is at
   * RESULT_SERIAL, its expiry at RESULT_EXPIRY, its grant id at RESULT_GRANT, and at
   * RESULT_SCOPED a u32 that is 1 when the grant also has a method scope, else 0.
   */
  Limited = 11,
}
