// The relay's bounds on what waits for a client, from the session memory model
// (session-memory.ts), which the options' --ws-memory-budget check reads too.
export { CLIENT_HIGH_WATER, CLIENT_LOW_WATER, clientBackpressure } from '../session-memory.js';
