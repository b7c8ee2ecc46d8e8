// The admission step's second half (admission.ts hands it over): for a request whose
// token has a method scope or limits, the calls of its body, or of a WebSocket message,
// read once (rpc/reading.ts) and judged by that one reading. The scope checks each call's
// method (scope.ts), the limits count the calls that will go to the node (a batch all at
// once, so that one larger than the burst spends nothing), and the caller forwards
// exactly the bytes that were judged, or the split batch the scope made of them. A body
// the reading cannot read fails closed: the node might run calls nobody counted.
//
// Tokens with neither a scope nor limits never come here: their requests stream through
// as they come, and their usage counts requests (a WebSocket message, its calls).
import { ADMIT_OK, admitRecord } from '../core/abi.js';
import type { Core } from '../core/core.js';
import { LIMIT_REFUSALS, methodLabel } from '../ops/metric-labels.js';
import type { ScopeVia } from '../ops/metric-labels.js';
import type { Metrics } from '../ops/metrics.js';
import { readCalls } from '../rpc/reading.js';
import type { Read, Reading } from '../rpc/reading.js';
import type { Gate } from './gate.js';
import { limitRefusal, unreadableRefusal } from './refusals.js';
import type { CallRefusal } from './refusals.js';
import { judgeMethods } from './scope.js';
import type { ScopeSplit } from './scope.js';

/** A token with limits, admitted at its request's head: its calls are counted against its rate from here. */
export interface LimitedToken {
  readonly serial: number;
  /** Unix seconds: the core frees the token's slot once it has passed. */
  readonly expiry: number;
  readonly grant: number;
  /** The client's 16 bytes, as checked against the token's client ranges. */
  readonly client: Uint8Array;
}

/** What a request still owes its admission once its head passed: its calls, judged by its token's scope and limits. */
export interface Ticket {
  /** The grant of a token with a method scope, whose calls' methods are checked; -1 for none. */
  readonly grant: number;
  /** A token with limits, whose calls are counted; null for none. */
  readonly limited: LimitedToken | null;
}

/** The judgement of one body or message. */
export interface Judged {
  /** The one reading, also for the access log. */
  readonly reading: Reading;
  /** Why it goes no further; null when it goes on. */
  readonly refusal: CallRefusal | null;
  /** A batch of which only some calls go on, as this batch; null when the body goes on as received. */
  readonly split: ScopeSplit | null;
}

export class BodyAdmission {
  // What `admit` found beside its answer, filled on each count: this call site's own record.
  private readonly admitted = admitRecord();

  constructor(
    private readonly core: Core,
    private readonly gate: Gate,
    private readonly metrics: Metrics,
  ) {}

  /**
   * Judges `body` (read whole; `via` for the metrics). `split`: the request's answer comes
   * in one piece (an HTTP request), so a batch of which the scope allows only some calls
   * is split rather than refused.
   */
  judge(ticket: Ticket, body: Uint8Array, split: boolean, via: ScopeVia): Judged {
    const reading = readCalls(body);
    if (!reading.ok) return { reading, refusal: this.unreadable(ticket, reading.problem, reading.at, reading.id, via), split: null };
    // Counted from this reading, the one the judgement is made on.
    const calls = reading.calls;
    const counts = this.metrics.rpcCalls;
    for (let i = 0; i < calls.length; i++) counts[methodLabel(calls[i].method)]++;
    return this.judgeCalls(ticket, reading, split, via);
  }

  /**
   * A request that carries no body (its head said so): a scope has no call to allow, and
   * limits count the request as one call. Null when it goes on.
   */
  withoutBody(ticket: Ticket, via: ScopeVia): CallRefusal | null {
    if (ticket.grant >= 0) return this.unreadable(ticket, 'none', -1, null, via);
    return this.count(ticket.limited!, 1, 'null');
  }

  /** A request whose body is compressed (Content-Encoding), which api-auth does not read. */
  compressed(ticket: Ticket, via: ScopeVia): CallRefusal {
    return this.unreadable(ticket, 'encoding', -1, null, via);
  }

  private judgeCalls(ticket: Ticket, reading: Read, split: boolean, via: ScopeVia): Judged {
    let made: ScopeSplit | null = null;
    if (ticket.grant >= 0) {
      const verdict = judgeMethods(this.core, ticket.grant, reading, split);
      if (verdict === null) {
        this.metrics.scopeCheck(via, 'allowed');
      } else {
        // A split is counted as a refusal: some calls were refused.
        this.metrics.scopeCheck(via, 'method not allowed');
        if (!('forward' in verdict)) return { reading, refusal: verdict, split: null };
        made = verdict;
      }
    }
    const limited = ticket.limited;
    if (limited === null) return { reading, refusal: null, split: made };
    const calls = made === null ? reading.calls.length : made.calls;
    const id = reading.batch ? 'null' : (reading.calls[0].id ?? 'null');
    return { reading, refusal: this.count(limited, calls, id), split: made };
  }

  /** `calls` calls of a token with limits, all at once; null when they pass (and are counted). */
  private count(limited: LimitedToken, calls: number, idJson: string): CallRefusal | null {
    const admitted = this.admitted;
    const result = this.gate.admitCalls(limited.serial, limited.expiry, limited.grant, calls, limited.client, admitted);
    return result === ADMIT_OK ? null : limitRefusal(result, admitted, calls, idJson);
  }

  private unreadable(
    ticket: Ticket,
    problem: Parameters<typeof unreadableRefusal>[0],
    at: number,
    id: string | null,
    via: ScopeVia,
  ): CallRefusal {
    if (ticket.grant >= 0) this.metrics.scopeCheck(via, 'not json-rpc');
    else this.metrics.limitRefusals[LIMIT_UNREADABLE]++;
    return unreadableRefusal(problem, at, id, ticket.grant >= 0);
  }
}

const LIMIT_UNREADABLE = LIMIT_REFUSALS.indexOf('unreadable');
