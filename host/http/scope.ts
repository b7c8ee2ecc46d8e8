// The method check of a token with a method scope (`methods` in auth.newToken): the
// request's JSON-RPC body, one call or a batch, passes only if the core allows the
// method of every call. Anything the check cannot read as JSON-RPC fails closed: no body,
// a body that is not UTF-8 JSON, an empty batch, a call without a "method" string.
//
// The body is read here as the upstream will read it, and where servers could read it
// otherwise the check refuses rather than guess. A call whose object names its method
// twice ("method" twice, or also "Method": Go's encoding/json, which most nodes use,
// matches member names without regard to case and keeps the last) is refused, as is one
// whose only method member is spelled otherwise than "method". JSON.parse keeps only the
// last of repeated names, so the members of each call are read from the text itself.
//
// Only tokens whose check gave Outcome.Scoped come here: a token without methods costs
// nothing of this.
import { RpcCode } from '../errors.js';
import { skipSpace, skipString, skipValue } from '../rpc/jsonrpc.js';
import type { Core } from '../core/core.js';
import type { Metrics, ScopeResult, ScopeVia } from '../ops/metrics.js';

/** The challenge of a refused scope (RFC 6750 §3.1). */
export const INSUFFICIENT_SCOPE = 'Bearer error="insufficient_scope"';
/** Characters of a method name a refusal shows; a longer name is cut there. */
const METHOD_SHOWN = 64;
const SCOPED = 'the provided auth token allows only some JSON-RPC methods';
const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Why a body fails the check before any method is compared. */
const UNREADABLE = {
  none: `${SCOPED}: the request must carry a JSON-RPC call or batch in its body, and it has none`,
  json: `${SCOPED}: the body is not valid UTF-8 JSON`,
  empty: `${SCOPED}: the batch is empty`,
} as const;
/** Why one call cannot be read, after "the body" for a lone call, or "call N of the batch". */
const NOT_A_CALL = 'is not a JSON-RPC call (an object with a "method" string)';
const NAMED_TWICE = 'names its method more than once (servers differ on which one counts)';

/** One call of the body, as the check read it. */
interface Call {
  /** The method, when the call names it once, as "method", with a string. */
  readonly method: string | null;
  /** The source text of its id; null for a notification (no id). */
  readonly id: string | null;
  /** Why it is not a call the check can read (NOT_A_CALL, NAMED_TWICE); '' when it is. */
  readonly problem: string;
}

/** A refused body: what the client gets, as JSON text (no line feed). */
export interface ScopeRefusal {
  readonly result: Exclude<ScopeResult, 'allowed'>;
  readonly text: string;
}

export class MethodScope {
  constructor(private readonly core: Core, private readonly metrics: Metrics) {}

  /**
   * Null when every call of `body` has a method the grant allows; otherwise the refusal,
   * naming the method (or what is wrong with the body) for each call that has an id.
   * Counted under `via`.
   */
  check(grant: number, body: Uint8Array, via: ScopeVia): ScopeRefusal | null {
    const refusal = this.judge(grant, body);
    this.metrics.scopeCheck(via, refusal === null ? 'allowed' : refusal.result);
    return refusal;
  }

  /** The refusal of a request that carries no body at all (GET, HEAD, an empty POST), counted under `via`. */
  noBody(via: ScopeVia, message: string = UNREADABLE.none): ScopeRefusal {
    this.metrics.scopeCheck(via, 'not json-rpc');
    return { result: 'not json-rpc', text: errorText(message, 'null') };
  }

  private judge(grant: number, body: Uint8Array): ScopeRefusal | null {
    if (body.length === 0) return unreadable(UNREADABLE.none);
    let text: string;
    let parsed: unknown;
    try {
      text = utf8.decode(body);
      parsed = JSON.parse(text);
    } catch {
      return unreadable(UNREADABLE.json);
    }
    const start = skipSpace(text, 0);
    if (!Array.isArray(parsed)) {
      const call = readCall(text, start);
      if (call.problem !== '') return unreadable(`${SCOPED}: the body ${call.problem}`, call.id);
      if (this.core.methodAllowed(grant, call.method!)) return null;
      return { result: 'method not allowed', text: errorText(notAllowed(call.method!), call.id ?? 'null') };
    }
    if (parsed.length === 0) return unreadable(UNREADABLE.empty);
    const calls: Call[] = [];
    let refused: Call | null = null;
    let i = skipSpace(text, start + 1);
    while (text[i] !== ']') {
      const call = readCall(text, i);
      if (call.problem !== '') return unreadableBatch(calls, call, text, i);
      if (refused === null && !this.core.methodAllowed(grant, call.method!)) refused = call;
      calls.push(call);
      i = skipSpace(text, skipValue(text, i));
      if (text[i] === ',') i = skipSpace(text, i + 1);
    }
    if (refused === null) return null;
    const also = `not forwarded: this batch also calls ${quoted(refused.method!)}, which the provided auth token does not allow`;
    const errors = calls.filter((c) => c.id !== null)
      .map((c) => errorText(this.core.methodAllowed(grant, c.method!) ? also : notAllowed(c.method!), c.id!));
    return { result: 'method not allowed', text: errors.length === 0 ? errorText(notAllowed(refused.method!), 'null') : `[${errors.join(',')}]` };
  }
}

/**
 * How many calls a body holds, as a token's rate counts them: a batch's length (at least
 * one), else one (a lone call, or a body that is not JSON, which the upstream answers).
 */
export function callCount(body: Uint8Array): number {
  let i = 0;
  while (i < body.length && (body[i] === 0x20 || body[i] === 0x09 || body[i] === 0x0a || body[i] === 0x0d)) i++;
  if (body[i] !== 0x5b) return 1;
  try {
    const parsed: unknown = JSON.parse(Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8'));
    return Array.isArray(parsed) ? Math.max(1, parsed.length) : 1;
  } catch {
    return 1;
  }
}

/** The JSON-RPC error object of a scope refusal, with `idJson` as its id. */
function errorText(message: string, idJson: string): string {
  return `{"jsonrpc":"2.0","error":${JSON.stringify({ code: RpcCode.InsufficientScope, message })},"id":${idJson}}`;
}

function unreadable(message: string, id: string | null = null): ScopeRefusal {
  return { result: 'not json-rpc', text: errorText(message, id ?? 'null') };
}

/**
 * A batch with a call the check cannot read: the whole batch fails, with that reason for
 * the call's own id and for each other call that has one.
 */
function unreadableBatch(before: readonly Call[], bad: Call, text: string, at: number): ScopeRefusal {
  const calls = [...before, bad];
  let i = skipSpace(text, skipValue(text, at));
  if (text[i] === ',') i = skipSpace(text, i + 1);
  while (text[i] !== ']') {
    calls.push(readCall(text, i));
    i = skipSpace(text, skipValue(text, i));
    if (text[i] === ',') i = skipSpace(text, i + 1);
  }
  const message = `${SCOPED}: call ${before.length} of the batch ${bad.problem}`;
  const errors = calls.filter((c) => c.id !== null).map((c) => errorText(message, c.id!));
  return { result: 'not json-rpc', text: errors.length === 0 ? errorText(message, 'null') : `[${errors.join(',')}]` };
}

function notAllowed(method: string): string {
  return `the provided auth token does not allow method ${quoted(method)}`;
}

function quoted(method: string): string {
  return JSON.stringify(method.length <= METHOD_SHOWN ? method : `${Array.from(method).slice(0, METHOD_SHOWN).join('')}…`);
}

// The text has parsed as JSON already, so the reading below trusts its shape and only
// finds where each member and value starts and ends.

/** The call whose value starts at `i`. */
function readCall(text: string, i: number): Call {
  if (text[i] !== '{') return { method: null, id: null, problem: NOT_A_CALL };
  let method: string | null = null;
  let methods = 0;
  let spelled = true;
  let id: string | null = null;
  i = skipSpace(text, i + 1);
  while (text[i] === '"') {
    const keyEnd = skipString(text, i);
    const raw = text.slice(i + 1, keyEnd - 1);
    const key = raw.includes('\\') ? JSON.parse(`"${raw}"`) as string : raw;
    const valueStart = skipSpace(text, skipSpace(text, keyEnd) + 1);
    const valueEnd = skipValue(text, valueStart);
    if (key.length === 6 && key.toLowerCase() === 'method') {
      methods++;
      spelled = key === 'method';
      method = text[valueStart] === '"' ? JSON.parse(text.slice(valueStart, valueEnd)) as string : null;
    } else if (key === 'id') {
      // The source text, so that the client gets back the digits it sent; JSON.parse keeps the last.
      const first = text[valueStart];
      id = first === '{' || first === '[' || first === 't' || first === 'f' ? 'null' : text.slice(valueStart, valueEnd);
    }
    i = skipSpace(text, valueEnd);
    if (text[i] === ',') i = skipSpace(text, i + 1);
  }
  if (methods > 1) return { method: null, id, problem: NAMED_TWICE };
  if (methods === 0 || !spelled || method === null) return { method: null, id, problem: NOT_A_CALL };
  return { method, id, problem: '' };
}

