// Outcomes of a token check, shared with every host (see README.md beside this file).
// The numbers are part of the ABI: append, never renumber.
export const enum Outcome {
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
}
