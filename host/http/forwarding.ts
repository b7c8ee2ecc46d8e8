// What goes to the upstream node, and what its failure gives, for the proxy (proxy.ts) and
// the WebSocket relay (websocket.ts) alike: the request target, the header rules, the
// answers to an upstream that does not answer, and the counting and logging of that.
// Written once, so that an upgrade reaches the node as a request would.
//
// Headers (RFC 9110 §7.6.1): hop-by-hop fields (Connection and the fields it names, on
// every Connection line, Keep-Alive, Proxy-Connection, TE, Transfer-Encoding, Upgrade,
// Trailer) are not forwarded either way. Authorization and Proxy-Authorization never
// reach the upstream. Host is the upstream's own (a node checks it against its allowed
// hosts). Forwarding headers (Forwarded, X-Forwarded-*, X-Real-IP and kin) are believed
// only from a trusted proxy: from one, X-Forwarded-For, -Host and -Proto are kept and
// X-Forwarded-For is extended with the peer; from anyone else all of them are dropped,
// and api-auth writes X-Forwarded-For (the peer), X-Forwarded-Host (the client's Host)
// and -Proto (https when api-auth serves TLS itself, else http; the same for a WebSocket
// upgrade, as nginx sends it). Their spellings with "_" for "-" (X_Forwarded_For,
// X-Real_IP, Authorization's too) are dropped from everyone: a CGI or WSGI upstream
// reads them as the dashed ones.
//
// The body's framing is judged on the request as received, before anything is removed:
// two Content-Length, two Transfer-Encoding, or a coding other than chunked get 400, as
// a proxy in front may have read another body there than uWS did.
//
// The request line and header values reach the upstream byte for byte. uWS hands the
// query and header values over decoded as UTF-8, and the request head is written as
// Latin-1, so text beyond ASCII is turned back into its UTF-8 bytes (one Latin-1
// character per byte) before it is handed on. Text uWS could only decode with U+FFFD in
// it (bytes that are not UTF-8) cannot be turned back, and is refused with 400 rather
// than forwarded altered.
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import { RPC_ERRORS, RpcCode, UpstreamError } from '../errors.js';
import { errorWithId } from '../rpc/jsonrpc.js';
import type { Logger } from '../ops/log.js';
import { responseReason, UPSTREAM_ERROR_KINDS } from '../ops/metric-labels.js';
import type { ResponseReason, UpstreamErrorKind } from '../ops/metric-labels.js';
import type { Metrics } from '../ops/metrics.js';
import { refusedFor } from './counted-response.js';
import { jsonLine, tableStatus } from './responses.js';

/** Hop-by-hop fields (RFC 9110 §7.6.1): never forwarded, either way. */
export const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'te', 'transfer-encoding', 'upgrade', 'trailer']);
// Never sent upstream: the gate's credentials, a proxy's credentials, and what the
// client writes itself (Host, and the framing of the body); Expect too, as the body is
// sent without waiting for a 100 Continue.
const CREDENTIALS = new Set(['authorization', 'proxy-authorization']);
const REQUEST_DROPPED = new Set([...HOP_BY_HOP, ...CREDENTIALS, 'host', 'expect']);
// Headers that tell an upstream who the client is, how it connected, or which path it
// asked for, beside every x-forwarded-* name: believed by some upstream, so never taken
// from a client. The last two are route overrides some frameworks honour: the upstream
// must route by the path the gate authorised.
const FORWARDING = new Set([
  'forwarded',
  'x-forwarded',
  'forwarded-for',
  'x-real-ip',
  'true-client-ip',
  'x-client-ip',
  'client-ip',
  'cf-connecting-ip',
  'fastly-client-ip',
  'x-cluster-client-ip',
  'x-original-forwarded-for',
  'x-envoy-external-address',
  'x-azure-clientip',
  'front-end-https',
  'x-url-scheme',
  'x-original-url',
  'x-rewrite-url',
]);
/** Text beyond ASCII: uWS decoded it from UTF-8, and the request head is written as Latin-1. */
const BEYOND_ASCII = /[^\x00-\x7f]/;

/** What a request target cannot hold: a space or a control byte (Node's client refuses them too). */
const NOT_TARGET = /[^\x21-\xff]/;
const QUERY_NOT_UTF8 = jsonLine(
  RpcCode.InvalidRequest,
  'the query string holds bytes that are not UTF-8, which api-auth cannot forward unchanged; percent-encode them',
);
const TARGET_UNWRITABLE = jsonLine(RpcCode.InvalidRequest, 'the request cannot be forwarded: its target holds a space or a control byte');
const TWO_LENGTHS = jsonLine(RpcCode.InvalidRequest, 'the request cannot be forwarded: it has two Content-Length headers');
const TWO_CODINGS = jsonLine(RpcCode.InvalidRequest, 'the request cannot be forwarded: it has two Transfer-Encoding headers');
const NOT_CHUNKED = jsonLine(
  RpcCode.InvalidRequest,
  'the request cannot be forwarded: its Transfer-Encoding is not "chunked", the one coding api-auth reads',
);

/**
 * The request target to send upstream: `path` as the gate checked it and `query` (undefined
 * for none) byte for byte; or the 400 body of a target that cannot be sent unchanged.
 */
export function upstreamTarget(path: string, query: string | undefined): string | Uint8Array {
  let target = path;
  if (query !== undefined) {
    const raw = BEYOND_ASCII.test(query) ? utf8Bytes(query) : query;
    if (raw === null) return QUERY_NOT_UTF8;
    target = `${path}?${raw}`;
  }
  return NOT_TARGET.test(target) ? TARGET_UNWRITABLE : target;
}

/** A 400 for a request that is not forwarded; the connection closes, as its body may be unread. */
export function refuse(res: HttpResponse, body: Uint8Array): void {
  res.writeStatus('400 Bad Request').writeHeader('Content-Type', 'application/json').end(body, true);
}

/**
 * Text uWS decoded from UTF-8, as its bytes again (one Latin-1 character per byte, each
 * written as that byte); null when the text holds U+FFFD, which stands for bytes that
 * were not UTF-8 and cannot be told apart from an encoded U+FFFD.
 */
function utf8Bytes(text: string): string | null {
  return text.includes('\ufffd') ? null : Buffer.from(text, 'utf8').toString('latin1');
}

/**
 * A request's header lines as received, read in one pass over uWS's (req.forEach, one
 * crossing into JavaScript a line), with what the proxy decides on before it builds the
 * lines it sends: the framing's fields and Host. Every line is kept before any is removed:
 * the framing is judged on these (a Connection line may name Content-Length, and the
 * removal would hide the second one), and each Connection line names fields to drop, not
 * only the first (getHeader's). One is made per proxy and read again for each request,
 * within its uWS handler.
 */
export class ReceivedHeaders {
  /** The lines as a flat [name, value, ...] list, names lower-case, values as uWS decoded them: its first `count` entries. */
  readonly lines: string[] = [];
  /** Entries of `lines` this request's (the array is kept, and written over, from one request to the next). */
  count = 0;
  /** The first Content-Length's value, as getHeader gives it; '' for none. */
  contentLength = '';
  lengths = 0;
  codings = 0;
  /** The last Transfer-Encoding's value. */
  coding = '';
  /** The Connection lines' values, joined by commas. */
  connection = '';
  /** The first Host's value, as getHeader gives it (its bytes as Latin-1); '' for none. */
  host = '';

  read(req: HttpRequest): this {
    const lines = this.lines;
    this.count = 0;
    this.contentLength = '';
    this.lengths = 0;
    this.codings = 0;
    this.coding = '';
    this.connection = '';
    let host: string | null = null;
    req.forEach((name, text) => {
      if (name === 'content-length') {
        if (this.lengths++ === 0) this.contentLength = text;
      } else if (name === 'transfer-encoding') {
        this.codings++;
        this.coding = text;
      } else if (name === 'connection') {
        this.connection = this.connection === '' ? text : `${this.connection},${text}`;
      } else if (name === 'host' && host === null) {
        host = text;
      }
      lines[this.count++] = name;
      lines[this.count++] = text;
    });
    // forEach's text is decoded from UTF-8, getHeader's is the bytes: the same for ASCII.
    this.host = host === null ? '' : BEYOND_ASCII.test(host) ? req.getHeader('host') : host;
    if (BEYOND_ASCII.test(this.contentLength)) this.contentLength = req.getHeader('content-length');
    return this;
  }
}

/**
 * The headers to send upstream, as a flat [name, value, ...] list; or, for a request
 * whose framing is ambiguous or a header that cannot be forwarded unchanged, the 400 body
 * that says so. `received`: the request's lines, read (ReceivedHeaders.read) in its uWS
 * handler; `peer` is the connection's far end, `fromProxy` whether it is a trusted proxy.
 */
export function upstreamHeaders(
  received: ReceivedHeaders,
  peer: string,
  fromProxy: boolean,
  scheme: 'http' | 'https',
): string[] | Uint8Array {
  const { lengths, codings, coding, connection } = received;
  const framing = framingProblem(lengths, codings, coding);
  if (framing !== null) return framing;
  const listed = connectionTokens(connection, REQUEST_DROPPED);
  const lines = received.lines;
  const headers: string[] = [];
  let chain = '';
  let forwardedHost = false;
  let forwardedProto = false;
  for (let i = 0, end = received.count; i < end; i += 2) {
    const name = lines[i];
    if (REQUEST_DROPPED.has(name) || listed?.has(name) || (name.includes('_') && spoofsWithUnderscores(name))) continue;
    if (name.startsWith('x-forwarded-') || FORWARDING.has(name)) {
      if (!fromProxy) continue;
      if (name === 'x-forwarded-host') forwardedHost = true;
      else if (name === 'x-forwarded-proto') forwardedProto = true;
      else if (name !== 'x-forwarded-for') continue;
    }
    const text = lines[i + 1];
    const value = BEYOND_ASCII.test(text) ? utf8Bytes(text) : text;
    if (value === null) {
      return jsonLine(
        RpcCode.InvalidRequest,
        `the value of header ${name} holds bytes that are not UTF-8, which api-auth cannot forward unchanged`,
      );
    }
    if (name === 'x-forwarded-for') chain = chain === '' ? value : `${chain}, ${value}`;
    else headers.push(name, value);
  }
  headers.push('x-forwarded-for', chain === '' ? peer : `${chain}, ${peer}`);
  // Host byte for byte (as Latin-1), as getHeader gives it.
  if (!forwardedHost && received.host !== '') headers.push('x-forwarded-host', received.host);
  if (!forwardedProto) headers.push('x-forwarded-proto', scheme);
  return headers;
}

/**
 * Why a request's body framing cannot be forwarded, as a 400 body; null when it can. uWS
 * frames the body by the first Content-Length, and reads any Transfer-Encoding as
 * chunked: a proxy in front that took the second length, or a coding it reads otherwise,
 * would see another body, and the next request in it. (Both headers at once uWS refuses
 * itself, with a 400 of its own.)
 */
function framingProblem(lengths: number, codings: number, coding: string): Uint8Array | null {
  if (lengths > 1) return TWO_LENGTHS;
  if (codings === 0) return null;
  if (codings > 1) return TWO_CODINGS;
  return coding.trim().toLowerCase() === 'chunked' ? null : NOT_CHUNKED;
}

/**
 * Whether `name`, which holds "_", spells a forwarding header or a credential with "_" for
 * "-": a CGI or WSGI upstream reads X_Forwarded_For as X-Forwarded-For (both are
 * HTTP_X_FORWARDED_FOR to it), so the client would write the header api-auth writes.
 */
function spoofsWithUnderscores(name: string): boolean {
  const dashed = name.replaceAll('_', '-');
  return CREDENTIALS.has(dashed) || dashed.startsWith('x-forwarded-') || FORWARDING.has(dashed);
}

/**
 * The field names a Connection header lists, lower-cased, but for those `dropped` holds
 * anyway; null when that leaves none. The usual "keep-alive" costs no Set.
 */
export function connectionTokens(value: string | string[] | undefined, dropped: ReadonlySet<string>): Set<string> | null {
  if (value === undefined || value === '') return null;
  if (typeof value === 'string' && !value.includes(',')) {
    const name = value.trim().toLowerCase();
    return name === '' || dropped.has(name) ? null : new Set([name]);
  }
  const names = (Array.isArray(value) ? value.join(',') : value)
    .split(',')
    .map((n) => n.trim().toLowerCase())
    .filter((n) => n !== '' && !dropped.has(n));
  return names.length === 0 ? null : new Set(names);
}

// The system's codes, which the WebSocket relay's client passes on, by the kind of
// failure they are; the HTTP client's own errors (upstream/errors.ts) say their kind.
const RESET_CODES = new Set(['ECONNRESET', 'EPIPE']);

export function classify(error: Error): UpstreamErrorKind {
  if (error instanceof UpstreamError) return error.kind === 'timeout' ? 'timeout' : error.kind === 'closed' ? 'reset' : 'other';
  const code = (error as NodeJS.ErrnoException).code ?? '';
  if (code === 'ETIMEDOUT') return 'timeout';
  if (code === 'ECONNREFUSED') return 'refused';
  if (RESET_CODES.has(code)) return 'reset';
  return 'other';
}

/**
 * Whether the upstream answered the last exchange, kept so that a change is logged once
 * (one warning when it starts failing, one line when it answers again), also when
 * several threads proxy to it.
 */
export interface UpstreamHealth {
  /** Records an answer; true when the upstream was failing until now. */
  answered(): boolean;
  /** Records a failure; true when the upstream was answering until now. */
  failed(): boolean;
}

function ownHealth(): UpstreamHealth {
  let healthy = true;
  return {
    answered() {
      if (healthy) return false;
      healthy = true;
      return true;
    },
    failed() {
      if (!healthy) return false;
      healthy = false;
      return true;
    },
  };
}

/** What the client gets when the upstream did not answer: the status and body for each kind of failure. */
type UpstreamFailures = Readonly<
  Record<
    UpstreamErrorKind,
    {
      readonly status: string;
      readonly body: Uint8Array;
      readonly code: RpcCode;
      readonly message: string;
    }
  >
>;

/** The answers to upstream failures, encoded once (with id null); `timeoutMs` is --upstream-timeout. */
function upstreamFailures(timeoutMs: number): UpstreamFailures {
  const answer = (rpcCode: RpcCode, message: string) => ({
    status: tableStatus(RPC_ERRORS[rpcCode].httpStatus),
    body: jsonLine(rpcCode, message),
    code: rpcCode,
    message,
  });
  return {
    refused: answer(RpcCode.UpstreamUnavailable, 'the upstream node refused the connection'),
    reset: answer(RpcCode.UpstreamUnavailable, 'the upstream node closed the connection'),
    other: answer(RpcCode.UpstreamUnavailable, 'the upstream node could not be reached'),
    timeout: answer(RpcCode.UpstreamTimeout, `the upstream node did not answer within ${timeoutMs / 1000} s`),
  };
}

/** The metrics' reason of an answer for each kind of upstream failure. */
const UPSTREAM_REASONS = Object.fromEntries(UPSTREAM_ERROR_KINDS.map((kind) => [kind, responseReason(`upstream ${kind}`)])) as Readonly<
  Record<UpstreamErrorKind, ResponseReason>
>;

/**
 * The upstream's failures as the client, the metrics and the log see them, for every
 * exchange and handshake of one thread: each failure counted by kind, and logged as a
 * warning only when the upstream starts failing (one line, not one per request while it
 * is down), and one line when it answers again.
 */
export class UpstreamWatch {
  private readonly failures: UpstreamFailures;
  private readonly health: UpstreamHealth;

  /** `health`: shared by every thread's watch (threads/upstream-health.ts), or this one's own. */
  constructor(
    private readonly url: URL,
    timeoutMs: number,
    health: UpstreamHealth | undefined,
    private readonly metrics: Metrics,
    private readonly log: Logger,
  ) {
    this.failures = upstreamFailures(timeoutMs);
    this.health = health ?? ownHealth();
  }

  /**
   * The status and body that tell the client why the upstream did not answer; `res`, the
   * answer they go on, is counted so. `id`: the source text of the request's one call's id,
   * echoed (web3.js shows an empty message for an answer with another id); null for none
   * (a batch, a body not read), as JSON-RPC says.
   */
  answer(error: Error, res: HttpResponse, id: string | null = null): { readonly status: string; readonly body: Uint8Array } {
    const kind = classify(error);
    refusedFor(res, UPSTREAM_REASONS[kind]);
    const failure = this.failures[kind];
    if (id === null) return failure;
    return { status: failure.status, body: new TextEncoder().encode(errorWithId(failure.code, failure.message, id) + '\n') };
  }

  /** The upstream did not answer: counted, and logged. */
  failed(error: Error): void {
    const kind = classify(error);
    this.metrics.upstreamError(kind);
    const fields = { upstream: this.url.origin, kind, error: error.message, code: (error as NodeJS.ErrnoException).code };
    if (this.health.failed()) this.log.warn('the upstream node did not answer', fields);
    else this.log.debug('the upstream node did not answer', fields);
  }

  /** The upstream answered: logged when it was failing until now. */
  answered(): void {
    if (this.health.answered()) this.log.info('the upstream node answers again', { upstream: this.url.origin });
  }
}
