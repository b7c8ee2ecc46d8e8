// JSON-RPC 2.0 over a request body: parsing, request validation, batches, notifications,
// and dispatch through a method table. Transport concerns (HTTP status, content-type,
// body size) belong to the server; this module sees only the bytes of a body.
import { RpcCode, RpcError } from '../errors.js';
import { errorFields } from '../ops/log.js';
import type { Logger } from '../ops/log.js';
import { skipSpace, skipString, skipValue } from './reading.js';
import { closest } from '../closest.js';

export const MAX_BATCH = 100;

export type Id = string | number | null;

/** Params by name, as the client sent them; a method refuses members it does not know (knownParams). */
export type Params = Readonly<Record<string, unknown>>;

/** What a method knows of its caller. */
export interface CallContext {
  /** The client's address, as the transport saw it; '' for the built-in node endpoints, whose methods do not read it. */
  readonly address: string;
  /** What a browser's request to /ext/auth brought of a console session (its cookie, CSRF header, origin); none elsewhere. */
  readonly session?: SessionCredentials;
}

/** A console session as a request presents it (service/console-session.ts): plain values, as a thread passes them. */
export interface SessionCredentials {
  /** The session cookie's value; '' when the request has none. */
  readonly token: string;
  /** The CSRF header's value; '' when the request has none. */
  readonly csrf: string;
  /** False when the request names an Origin that is not the server's own (its Host). */
  readonly sameOrigin: boolean;
}

/** The session cookie a reply sets: its value (the session), or '' with maxAge 0 to clear it. */
export interface ReplyCookie {
  readonly value: string;
  /** Seconds. */
  readonly maxAge: number;
}

/** A method's result that also sets (or clears) the session cookie: `value` is the JSON-RPC result. */
export class WithCookie {
  constructor(
    readonly value: unknown,
    readonly cookie: ReplyCookie,
  ) {}
}

/** A method returns its result (any JSON value) or throws RpcError for an error response. */
export type Method = (params: Params, context: CallContext) => unknown;

export type MethodTable = ReadonlyMap<string, Method>;

/** The answer to a body: its text (null when none is due), and for a lone request refused for now, the refusal. */
export interface Reply {
  readonly text: string | null;
  readonly refusal?: { readonly code: RpcCode; readonly retryAfter: number };
  /** The session cookie to set, when a call signed in, renewed or signed out (WithCookie). */
  readonly cookie?: ReplyCookie;
}

/** -32602 `invalid params: <name> must be <what>`. */
export function invalidParams(name: string, what: string): RpcError {
  return new RpcError(RpcCode.InvalidParams, `invalid params: ${name} must be ${what}`);
}

/**
 * -32602 for the first member of `params` that `method` does not take, naming it and the
 * taken name it is likely a slip of. Left unread, a misspelt optional param ("method" for
 * "methods", "expiresin") would make the call do more than asked: an unscoped token of the
 * longest lifetime.
 */
export function knownParams(params: Params, method: string, known: readonly string[]): void {
  for (const name of Object.keys(params)) {
    if (known.includes(name)) continue;
    const likely = closest(name, known);
    throw new RpcError(
      RpcCode.InvalidParams,
      `invalid params: unknown param ${JSON.stringify(shortened(name))}` +
        `${likely === undefined ? '' : ` (did you mean ${likely}?)`}; ${method} takes ${spokenList(known)}`,
    );
  }
}

/** "a", "a and b", "a, b and c". */
function spokenList(names: readonly string[]): string {
  return names.length === 1 ? names[0] : `${names.slice(0, -1).join(', ')} and ${names.at(-1)}`;
}

/** The string member `name` of params, or -32602. */
export function stringParam(params: Params, name: string): string {
  const value = params[name];
  if (typeof value !== 'string') throw invalidParams(name, 'a string');
  return value;
}

/** The JSON text of an error response. */
export function errorResponse(code: number, message: string, id: Id = null): string {
  return errorWithId(code, message, JSON.stringify(id));
}

/**
 * The JSON text of an error response whose id is `idJson`, the id's source text (digits as
 * the client sent them), with the error's `data` when given: every JSON-RPC error api-auth
 * writes, over HTTP and WebSocket, is this envelope.
 */
export function errorWithId(code: number, message: string, idJson: string, data?: unknown): string {
  return `{"jsonrpc":"2.0","error":${JSON.stringify(data === undefined ? { code, message } : { code, message, data })},"id":${idJson}}`;
}

const EMPTY_PARAMS: Params = Object.freeze({});
const METHOD_NAME_SHOWN = 64;
const utf8 = new TextDecoder('utf-8', { fatal: true });

/** An endpoint for `methods` whose unexpected failures are logged as internal errors. */
export function loggedEndpoint(methods: MethodTable, log: Logger): JsonRpcEndpoint {
  return new JsonRpcEndpoint(methods, (error, method) => log.error('internal error', { method, ...errorFields(error) }));
}

/** One JSON-RPC endpoint: a method table and what to do with unexpected method failures. */
export class JsonRpcEndpoint {
  constructor(
    private readonly methods: MethodTable,
    private readonly onInternalError: (error: unknown, method: string) => void,
  ) {}

  /**
   * The reply to a request body: its text, or null when no response is due (a
   * notification, or a batch of them). Every failure of a method becomes an error
   * response; only a result that is not JSON (a bug) throws or rejects.
   *
   * The reply comes at once when every method the body calls answers at once (the
   * built-in node endpoints), so that the server can answer inside the callback that
   * delivered the body; a promise when one of them is asynchronous (the token service).
   * `body` is read before handle() returns: it may be memory the server reuses.
   */
  handle(body: Uint8Array, context: CallContext): Reply | Promise<Reply> {
    let text: string;
    let message: unknown;
    try {
      text = utf8.decode(body);
    } catch {
      return { text: errorResponse(RpcCode.ParseError, 'parse error: the body is not UTF-8') };
    }
    try {
      message = JSON.parse(text);
    } catch {
      // Not V8's own message: it quotes the body, and a body may hold a password.
      return { text: errorResponse(RpcCode.ParseError, 'parse error: the body is not valid JSON') };
    }
    if (!Array.isArray(message)) return this.call(message, text, -1, context);
    if (message.length === 0) return { text: errorResponse(RpcCode.InvalidRequest, 'invalid request: empty batch') };
    if (message.length > MAX_BATCH) {
      return { text: errorResponse(RpcCode.InvalidRequest, `batch holds more than ${MAX_BATCH} requests`) };
    }
    // In order, one at a time: a batch may revoke a token and then use the service again,
    // and the effects must happen in the order the client wrote them.
    const responses: string[] = [];
    for (let i = 0; i < message.length; i++) {
      const reply = this.call(message[i], text, i, context);
      if (reply instanceof Promise) return this.finishBatch(reply, message, text, i, context, responses);
      if (reply.text !== null) responses.push(reply.text);
    }
    return batchReply(responses, undefined);
  }

  /** The rest of a batch from the first call that did not answer at once. */
  private async finishBatch(
    pending: Promise<Reply>,
    batch: unknown[],
    text: string,
    from: number,
    context: CallContext,
    responses: string[],
  ): Promise<Reply> {
    // The token service's calls all come here; the last cookie a call set is the batch's.
    let cookie: ReplyCookie | undefined;
    for (let i = from; i < batch.length; i++) {
      const reply = await (i === from ? pending : this.call(batch[i], text, i, context));
      if (reply.text !== null) responses.push(reply.text);
      if (reply.cookie !== undefined) cookie = reply.cookie;
    }
    return batchReply(responses, cookie);
  }

  /** `index` is the request's place in a batch, -1 for a lone request; `text` is the body. */
  private call(request: unknown, text: string, index: number, context: CallContext): Reply | Promise<Reply> {
    if (typeof request !== 'object' || request === null || Array.isArray(request)) {
      return { text: errorResponse(RpcCode.InvalidRequest, 'invalid request: expected a JSON-RPC 2.0 request object') };
    }
    const r = request as Record<string, unknown>;
    const notification = !Object.hasOwn(r, 'id');
    const id = r.id;
    if (!notification && typeof id !== 'string' && typeof id !== 'number' && id !== null) {
      return { text: errorResponse(RpcCode.InvalidRequest, 'invalid request: id must be a string, a number or null') };
    }
    // A number that is not a safe integer (beyond 2^53, a fraction, 1e400) may have lost
    // digits in the double; the client gets back the digits it sent.
    const idJson =
      typeof id === 'number' && !Number.isSafeInteger(id)
        ? (sourceOfId(text, index) ?? JSON.stringify(id))
        : JSON.stringify(notification ? null : id);
    if (r.jsonrpc !== '2.0') return { text: errorWithId(RpcCode.InvalidRequest, 'invalid request: jsonrpc must be "2.0"', idJson) };
    if (typeof r.method !== 'string')
      return { text: errorWithId(RpcCode.InvalidRequest, 'invalid request: method must be a string', idJson) };
    const params = r.params;
    if (params !== undefined && (typeof params !== 'object' || params === null || Array.isArray(params))) {
      return { text: errorWithId(RpcCode.InvalidRequest, 'invalid request: params must be an object of named params', idJson) };
    }
    const name = r.method;
    const method = this.methods.get(name);
    let result: unknown;
    try {
      if (method === undefined) throw new RpcError(RpcCode.MethodNotFound, `method not found: ${shortened(name)}`);
      result = method((params as Params | undefined) ?? EMPTY_PARAMS, context);
    } catch (error) {
      return this.failure(error, name, notification, idJson);
    }
    // What `await` would wait for: a promise, or any other thenable.
    if (typeof (result as PromiseLike<unknown> | null)?.then === 'function') {
      return Promise.resolve(result).then(
        (value) => success(value, notification, idJson),
        (error: unknown) => this.failure(error, name, notification, idJson),
      );
    }
    return success(result, notification, idJson);
  }

  private failure(error: unknown, method: string, notification: boolean, idJson: string): Reply {
    if (!(error instanceof RpcError)) {
      this.onInternalError(error, method);
      // Internal failures stay in the log: their text may name files or state.
      return { text: notification ? null : errorWithId(RpcCode.InternalError, 'internal error', idJson) };
    }
    const refusal = error.retryAfter === undefined ? undefined : { code: error.rpcCode, retryAfter: error.retryAfter };
    return { text: notification ? null : errorWithId(error.rpcCode, error.message, idJson), refusal };
  }
}

function success(result: unknown, notification: boolean, idJson: string): Reply {
  if (result instanceof WithCookie) {
    const { cookie } = result;
    return notification
      ? { text: null, cookie }
      : { text: `{"jsonrpc":"2.0","result":${JSON.stringify(result.value)},"id":${idJson}}`, cookie };
  }
  if (notification) return { text: null };
  return { text: `{"jsonrpc":"2.0","result":${JSON.stringify(result)},"id":${idJson}}` };
}

function batchReply(responses: string[], cookie: ReplyCookie | undefined): Reply {
  const text = responses.length === 0 ? null : `[${responses.join(',')}]`;
  return cookie === undefined ? { text } : { text, cookie };
}

function shortened(name: string): string {
  return name.length <= METHOD_NAME_SHOWN ? name : Array.from(name).slice(0, METHOD_NAME_SHOWN).join('');
}

// Node 20's JSON.parse cannot hand out source text, so the few ids that need it are
// found by scanning the body again. The body has already parsed, so the scan can trust
// its shape and only skips over values.

/** The source text of the "id" member of the lone request (`index` -1) or batch entry `index`. */
function sourceOfId(text: string, index: number): string | undefined {
  let i = skipSpace(text, 0);
  if (index >= 0) {
    i = skipSpace(text, i + 1);
    for (let n = 0; n < index; n++) i = skipSpace(text, skipSpace(text, skipValue(text, i)) + 1);
  }
  if (text[i] !== '{') return undefined;
  let found: string | undefined;
  i = skipSpace(text, i + 1);
  while (text[i] === '"') {
    const keyEnd = skipString(text, i);
    const key = text.slice(i, keyEnd);
    const valueStart = skipSpace(text, skipSpace(text, keyEnd) + 1);
    const valueEnd = skipValue(text, valueStart);
    // Like JSON.parse, the last of repeated members wins.
    if (key === '"id"' || (key.includes('\\') && JSON.parse(key) === 'id')) found = text.slice(valueStart, valueEnd);
    i = skipSpace(text, valueEnd);
    if (text[i] === ',') i = skipSpace(text, i + 1);
  }
  return found;
}
