// POST to a local JSON-RPC endpoint: the body read in its chunks up to its limit, then
// answered by the endpoint, and the answer written (or nothing, when the client went).
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import { RPC_ERRORS } from '../errors.js';
import { errorFields } from '../ops/log.js';
import type { Logger } from '../ops/log.js';
import type { CallContext, Reply, SessionCredentials } from '../rpc/jsonrpc.js';
import { setCookieHeader } from '../service/console-session.js';
import { writeCorsHeaders } from './cors.js';
import type { InFlight, Pending } from './in-flight.js';
import type { BodyAdmission, Ticket } from './body-admission.js';
import { writeCallRefusal } from './refusals.js';
import { MAX_BODY_BYTES } from '../own-endpoints.js';
import { readBody, tableStatus, writeBodyTooLarge, writeInternalError, writeNotJson } from './responses.js';
import type { ScopeSplit } from './scope.js';
import { bodyRead } from './access-log.js';

/** What answers a body: a JSON-RPC endpoint, or the token service's link. */
export interface RpcHandler {
  /** The reply at once when it can be had at once; `body` is read before handle() returns. */
  handle(body: Uint8Array, context: CallContext): Reply | Promise<Reply>;
}

const JSON_CONTENT_TYPE = /^[ \t]*application\/json[ \t]*(?:;|$)/i;

/** A token with limits or a method scope, whose body's calls are judged before the handler sees them. */
export interface JudgedCall {
  readonly bodies: BodyAdmission;
  readonly ticket: Ticket;
}

/**
 * Reads the request's body and answers it with `handler`. `address` is the client's, for
 * the call's context; `allowOrigin` the CORS origin the answer is for (cors.ts), "" for
 * none; `judgedCall` the ticket of a token with limits or a method scope, if it has
 * one. Call it from the uWS handler, before returning.
 */
export function postCall(
  res: HttpResponse,
  req: HttpRequest,
  handler: RpcHandler,
  address: string,
  inFlight: InFlight,
  log: Logger,
  allowOrigin = '',
  judgedCall: JudgedCall | null = null,
  management: Management | null = null,
): void {
  if (!JSON_CONTENT_TYPE.test(req.getHeader('content-type'))) return writeNotJson(res);
  const declared = req.getHeader('content-length');
  // The body is not read, so the connection cannot carry another request.
  if (declared !== '' && !(Number(declared) <= MAX_BODY_BYTES)) return writeBodyTooLarge(res);
  const pending = inFlight.begin(res);
  // handle() reads the body before returning, so the usual body, in one piece, is read
  // where uWS holds it, without a copy.
  const context: CallContext = management === null ? { address } : { address, session: management.read(req) };
  readBody(res, pending, (body) => answer(res, handler, body, context, pending, log, allowOrigin, judgedCall, management));
}

/**
 * The token service's calls (/ext/auth): the console session a request presents is read
 * from its head, and every answer is `Cache-Control: no-store`, with the session cookie a
 * call sets (Secure under TLS).
 */
export interface Management {
  read(req: HttpRequest): SessionCredentials;
  readonly secure: boolean;
}

/**
 * Answers a body. Called inside uWS's data callback: a reply that comes at once is
 * written there, in the cork uWS already holds, so the answer leaves with no promise
 * made and no cork of its own; a reply that waits (the token service) is written in a
 * cork when it comes.
 */
function answer(
  res: HttpResponse,
  handler: RpcHandler,
  body: Uint8Array,
  context: CallContext,
  pending: Pending,
  log: Logger,
  allowOrigin: string,
  judgedCall: JudgedCall | null,
  management: Management | null,
): void {
  let split: ScopeSplit | null = null;
  if (judgedCall !== null) {
    const judged = judgedCall.bodies.judge(judgedCall.ticket, body, true, 'http');
    bodyRead(res, judged.reading);
    if (judged.refusal !== null) {
      writeCallRefusal(res, judged.refusal, false, allowOrigin);
      pending.finish();
      return;
    }
    split = judged.split;
  }
  let reply: Reply | Promise<Reply>;
  try {
    reply = split === null ? handler.handle(body, context) : merged(split, handler.handle(split.forward, context));
  } catch (error) {
    failed(res, error, pending, log);
    return;
  }
  if (reply instanceof Promise) {
    reply.then(
      (later) => {
        if (pending.open) res.cork(() => writeReply(res, later, allowOrigin, management));
        pending.finish();
      },
      (error: unknown) => failed(res, error, pending, log),
    );
    return;
  }
  writeReply(res, reply, allowOrigin, management);
  pending.finish();
}

/** The reply to a split batch's allowed calls, merged with the refused calls' errors (scope.ts). */
function merged(split: ScopeSplit, reply: Reply | Promise<Reply>): Reply | Promise<Reply> {
  const merge = (answer: Reply): Reply => {
    const text = split.merge(answer.text ?? '');
    return { text: text === undefined ? answer.text : text === '' ? null : text };
  };
  return reply instanceof Promise ? reply.then(merge) : merge(reply);
}

function failed(res: HttpResponse, error: unknown, pending: Pending, log: Logger): void {
  log.error('internal error', errorFields(error));
  if (pending.open) res.cork(() => writeInternalError(res));
  pending.finish();
}

/** Writes a JSON-RPC reply; call it corked. */
function writeReply(res: HttpResponse, reply: Reply, allowOrigin: string, management: Management | null): void {
  const { text, refusal } = reply;
  if (text === null) {
    res.writeStatus('204 No Content');
    if (management !== null) writeManagementHeaders(res, reply, management);
    if (allowOrigin !== '') writeCorsHeaders(res, allowOrigin);
    res.endWithoutBody();
    return;
  }
  // A lone call refused for now says so in HTTP too (the error table's status), so that proxies and clients back off.
  if (refusal !== undefined) {
    res.writeStatus(tableStatus(RPC_ERRORS[refusal.code].httpStatus)).writeHeader('Retry-After', String(refusal.retryAfter));
  }
  if (management !== null) writeManagementHeaders(res, reply, management);
  if (allowOrigin !== '') writeCorsHeaders(res, allowOrigin);
  res.writeHeader('Content-Type', 'application/json').end(text + '\n');
}

/** no-store, and the session cookie a call set; after the status, before the body. */
function writeManagementHeaders(res: HttpResponse, reply: Reply, management: Management): void {
  res.writeHeader('Cache-Control', 'no-store');
  if (reply.cookie !== undefined)
    res.writeHeader('Set-Cookie', setCookieHeader(reply.cookie.value, reply.cookie.maxAge, management.secure));
}
