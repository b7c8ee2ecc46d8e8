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
// Over HTTP, where a body has its answer in one piece, a batch of which the token allows
// only some calls is split (ScopeSplit): the allowed calls go to the node as one batch,
// and each refused call is answered in its place in the merged answer. The node never
// sees a refused call. A WebSocket message is refused whole, as its answers come apart.
//
// Only tokens whose check gave Outcome.Scoped come here: a token without methods costs
// nothing of this.
import { RpcCode } from '../errors.js';
import { skipSpace, skipString, skipValue } from '../rpc/reading.js';
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

/**
 * A batch of which the scope allows some calls: those go on, as one batch of their text
 * as sent and in their order, and the refused ones are answered in their place once the
 * answer to the others is back.
 */
export interface ScopeSplit {
  readonly result: 'split';
  /** The allowed calls, as a batch. */
  readonly forward: Uint8Array;
  /**
   * The answer to the whole batch: the answers in `answer` (the JSON text of the
   * answer to `forward`) and the refusals, in the order of the calls they answer (an
   * answer whose id no call has comes last); `undefined` when `answer` is not a batch's
   * answer (an array), which the client then gets as it is.
   */
  merge(answer: string): string | undefined;
}

export class MethodScope {
  constructor(private readonly core: Core, private readonly metrics: Metrics) {}

  /**
   * Null when every call of `body` has a method the grant allows; otherwise the refusal,
   * naming the method (or what is wrong with the body) for each call that has an id.
   * Counted under `via`.
   */
  check(grant: number, body: Uint8Array, via: ScopeVia): ScopeRefusal | null {
    const verdict = this.judge(grant, body, false) as ScopeRefusal | null;
    this.metrics.scopeCheck(via, verdict === null ? 'allowed' : verdict.result);
    return verdict;
  }

  /**
   * check(), for a body that has its answer in one piece (an HTTP request): a batch of
   * which only some calls are allowed is split rather than refused. Counted under `via`,
   * a split as a refusal ('method not allowed').
   */
  split(grant: number, body: Uint8Array, via: ScopeVia): ScopeRefusal | ScopeSplit | null {
    const verdict = this.judge(grant, body, true);
    this.metrics.scopeCheck(via, verdict === null ? 'allowed' : verdict.result === 'split' ? 'method not allowed' : verdict.result);
    return verdict;
  }

  /** The refusal of a request that carries no body at all (GET, HEAD, an empty POST), counted under `via`. */
  noBody(via: ScopeVia, message: string = UNREADABLE.none): ScopeRefusal {
    this.metrics.scopeCheck(via, 'not json-rpc');
    return { result: 'not json-rpc', text: errorText(message, 'null') };
  }

  private judge(grant: number, body: Uint8Array, split: boolean): ScopeRefusal | ScopeSplit | null {
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
    /** Each call's text, and whether the grant allows it, by the call's place. */
    const texts: string[] = [];
    const allowed: boolean[] = [];
    let refused: Call | null = null;
    let i = skipSpace(text, start + 1);
    while (text[i] !== ']') {
      const call = readCall(text, i);
      if (call.problem !== '') return unreadableBatch(calls, call, text, i);
      const end = skipValue(text, i);
      const ok = this.core.methodAllowed(grant, call.method!);
      if (refused === null && !ok) refused = call;
      calls.push(call);
      texts.push(text.slice(i, end));
      allowed.push(ok);
      i = skipSpace(text, end);
      if (text[i] === ',') i = skipSpace(text, i + 1);
    }
    if (refused === null) return null;
    if (split) {
      const errors = calls.map((c, k) => allowed[k] || c.id === null ? '' : errorText(notAllowed(c.method!), c.id));
      if (allowed.includes(true)) return splitBatch(calls, texts, allowed, errors);
      const answers = errors.filter((e) => e !== '');
      // Every call refused: the node is not asked. A batch of notifications only gets the
      // one error without an id, as a body the check cannot read does.
      return { result: 'method not allowed', text: answers.length === 0 ? errorText(notAllowed(refused.method!), 'null') : `[${answers.join(',')}]` };
    }
    const also = `not forwarded: this batch also calls ${quoted(refused.method!)}, which the provided auth token does not allow`;
    const errors = calls.filter((c) => c.id !== null)
      .map((c) => errorText(this.core.methodAllowed(grant, c.method!) ? also : notAllowed(c.method!), c.id!));
    return { result: 'method not allowed', text: errors.length === 0 ? errorText(notAllowed(refused.method!), 'null') : `[${errors.join(',')}]` };
  }
}

/**
 * The split of a batch: `errors[k]` answers the refused call k that has an id ('' for the
 * others). An answer is matched to its call by id, compared as JSON values (the node may
 * write `1.0` as `1`), first come first served when a client repeats an id.
 */
function splitBatch(calls: readonly Call[], texts: readonly string[], allowed: readonly boolean[], errors: readonly string[]): ScopeSplit {
  const forward = new TextEncoder().encode(`[${texts.filter((_, k) => allowed[k]).join(',')}]`);
  return {
    result: 'split',
    forward,
    merge(answer: string): string | undefined {
      let answers: unknown;
      try {
        // A batch of notifications only may be answered with nothing at all.
        answers = answer.trim() === '' ? [] : JSON.parse(answer);
      } catch {
        return undefined;
      }
      if (!Array.isArray(answers)) return undefined;
      // Each answer goes on as the node wrote it (its text, not re-serialised: numbers
      // beyond a double keep their digits); its id is read from the parse.
      const byId = new Map<string, string[]>();
      let i = skipSpace(answer, skipSpace(answer, 0) + 1);
      for (const one of answers) {
        const end = skipValue(answer, i);
        const key = JSON.stringify((one as { id?: unknown } | null)?.id ?? null);
        const queue = byId.get(key);
        if (queue === undefined) byId.set(key, [answer.slice(i, end)]);
        else queue.push(answer.slice(i, end));
        i = skipSpace(answer, end);
        if (answer[i] === ',') i = skipSpace(answer, i + 1);
      }
      const merged: string[] = [];
      calls.forEach((call, k) => {
        if (!allowed[k]) {
          if (errors[k] !== '') merged.push(errors[k]);
          return;
        }
        if (call.id === null) return;
        const found = byId.get(JSON.stringify(JSON.parse(call.id)))?.shift();
        if (found !== undefined) merged.push(found);
      });
      for (const rest of byId.values()) merged.push(...rest);
      return merged.length === 0 ? answer : `[${merged.join(',')}]`;
    },
  };
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

