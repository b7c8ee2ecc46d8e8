// The method check of a token with a method scope (`methods` in auth.newToken): a body's
// calls, as the one reading found them (rpc/reading.ts), pass only if the core allows the
// method of every one. A body the reading could not read never comes here: it fails
// closed before (body-admission.ts).
//
// Over HTTP, where a body has its answer in one piece, a batch of which the token allows
// only some calls is split (ScopeSplit): the allowed calls go to the node as one batch,
// and each refused call is answered in its place in the merged answer. The node never
// sees a refused call. A WebSocket message, and a check's body, are refused whole.
//
// Only tokens whose check gave Outcome.Scoped come here: a token without methods costs
// nothing of this.
import { RpcCode, ScopeRefusedError, SCOPE_ERRORS } from '../errors.js';
import type { Call, Read } from '../rpc/reading.js';
import { skipSpace, skipValue } from '../rpc/reading.js';
import type { Core } from '../core/core.js';
import { errorWithId } from '../rpc/jsonrpc.js';
import type { CallRefusal } from './refusals.js';

/** Characters of a method name a refusal shows; a longer name is cut there. */
const METHOD_SHOWN = 64;
const NOT_ALLOWED = new ScopeRefusedError('method not allowed');

/**
 * A batch of which the scope allows some calls: those go on, as one batch of their text
 * as sent and in their order, and the refused ones are answered in their place once the
 * answer to the others is back.
 */
export interface ScopeSplit {
  /** The allowed calls, as a batch. */
  readonly forward: Uint8Array;
  /** How many calls `forward` holds: what a token's limits count. */
  readonly calls: number;
  /**
   * The answer to the whole batch: the answers in `answer` (the JSON text of the
   * answer to `forward`) and the refusals, in the order of the calls they answer (an
   * answer whose id no call has comes last); `undefined` when `answer` is not a batch's
   * answer (an array), which the client then gets as it is.
   */
  merge(answer: string): string | undefined;
}

/**
 * Null when the grant allows every call of `reading`; a ScopeSplit when `split` and it
 * allows some calls of a batch; otherwise the refusal, naming the method for each call
 * that has an id.
 */
export function judgeMethods(core: Core, grant: number, reading: Read, split: boolean): CallRefusal | ScopeSplit | null {
  const calls = reading.calls;
  if (!reading.batch) {
    const call = calls[0];
    if (core.methodAllowed(grant, call.method)) return null;
    return refused(errorWithId(RpcCode.InsufficientScope, notAllowed(call.method), call.id ?? 'null'));
  }
  let allowed: boolean[] | null = null;
  let refusedCall: Call | null = null;
  for (let k = 0; k < calls.length; k++) {
    const ok = core.methodAllowed(grant, calls[k].method);
    if (!ok && refusedCall === null) {
      refusedCall = calls[k];
      allowed = calls.slice(0, k).map(() => true);
    }
    allowed?.push(ok);
  }
  if (refusedCall === null || allowed === null) return null;
  if (split && allowed.includes(true)) {
    const errors = calls.map((c, k) =>
      allowed![k] || c.id === null ? '' : errorWithId(RpcCode.InsufficientScope, notAllowed(c.method), c.id),
    );
    return splitBatch(reading, allowed, errors);
  }
  // Every call refused (the node is not asked), or a batch that goes whole or not at all.
  const also = `not forwarded: this batch also calls ${quoted(refusedCall.method)}, which the provided auth token does not allow`;
  const texts: string[] = [];
  calls.forEach((c, k) => {
    if (c.id !== null) texts.push(errorWithId(RpcCode.InsufficientScope, allowed![k] ? also : notAllowed(c.method), c.id));
  });
  // A batch of notifications only gets the one error without an id, as a body the check cannot read does.
  return refused(
    texts.length === 0 ? errorWithId(RpcCode.InsufficientScope, notAllowed(refusedCall.method), 'null') : `[${texts.join(',')}]`,
  );
}

function refused(text: string): CallRefusal {
  return { status: SCOPE_ERRORS['method not allowed'].httpStatus, text, retryAfter: 0, scope: true, error: NOT_ALLOWED };
}

/**
 * The split of a batch: `errors[k]` answers the refused call k that has an id ('' for the
 * others). An answer is matched to its call by id, compared as JSON values (the node may
 * write `1.0` as `1`), first come first served when a client repeats an id.
 */
function splitBatch(reading: Read, allowed: readonly boolean[], errors: readonly string[]): ScopeSplit {
  const { calls, text } = reading;
  const kept = calls.filter((_, k) => allowed[k]);
  const forward = new TextEncoder().encode(`[${kept.map((c) => text.slice(c.start, c.end)).join(',')}]`);
  return {
    forward,
    calls: kept.length,
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

function notAllowed(method: string): string {
  return `the provided auth token does not allow method ${quoted(method)}`;
}

function quoted(method: string): string {
  return JSON.stringify(method.length <= METHOD_SHOWN ? method : `${Array.from(method).slice(0, METHOD_SHOWN).join('')}…`);
}
