// --access-log: one JSON line per request the gate decided, made on the thread that
// served it and handed to a buffered writer (ops/line-writer.ts), never to the JSON log.
//
// A request to log is answered through a LoggedResponse: the uWS response, with what the
// line needs noted as the answer is written (its status, the bytes of the request body
// read and of the answer's body sent) and the line made once it is whole: ended, cut, or
// its client gone (499, as nginx logs it). So the routes, the proxy and the relay answer
// as they always do, and the log costs nothing with the option off. They say only what
// the response cannot show: the gate's judgement (judged: whose token it was) and the
// upstream's status (upstreamAnswered). A WebSocket session is one line, at its end,
// with its messages and their payload bytes each way (sessionEnded).
//
// What a line never holds: the token (only its id, and only for a token whose tag the
// core checked), and the query (access_token with --api-auth-query-token, or a key of
// the node's own). The path is the raw one uWS gives, escaped by JSON.stringify like
// every field (quotes, controls, lone surrogates).
import { systemTimer } from '../clock.js';
import type { HttpRequest, HttpResponse, RecognizedString, us_socket_context_t } from 'uWebSockets.js';
import type { Clock } from '../clock.js';
import { Outcome } from '../core/abi.js';
import type { LineWriter } from '../ops/line-writer.js';
import type { Metrics } from '../ops/metrics.js';
import { readCalls } from '../rpc/reading.js';
import type { Reading } from '../rpc/reading.js';
import { Decision } from './admission.js';
import type { Admission } from './admission.js';
import { clientAddress } from './client-address.js';
import { CountedResponse } from './counted-response.js';
import type { TrustedProxies } from '../addresses.js';
import { HEALTH_PATH, LIVE_PATH } from '../own-endpoints.js';

/** Load balancers ask these every few seconds: no line for them. */
const NOT_LOGGED = new Set(['/ext/health', HEALTH_PATH, LIVE_PATH]);
/** Methods a line names at most for a batch; `calls` counts them all. */
export const MAX_METHODS = 16;
/** Characters of a method name a line keeps. */
const METHOD_SHOWN = 128;
/** The largest body whose JSON-RPC methods are read: the local endpoints' limit. */
const MAX_READ = 65536;
/** Outcomes of a token whose tag the core checked, refused for its standing or its grant: its id names who tried. */
const GENUINE = new Set<Outcome>([Outcome.Expired, Outcome.Revoked, Outcome.EarlierGeneration, Outcome.NotGranted]);
/** `Bearer ` (any case), as the core reads it. */
const BEARER_LENGTH = 7;
/** A token's text: 76 characters of base64url, its serial in bytes 5 to 13 (README, Tokens), which the first 20 characters hold. */
const TOKEN_LENGTH = 76;
const SERIAL_CHARACTERS = 20;

/** One thread's access log. */
export class AccessLog {
  /** Requests answered, whose lines are made once the handler that answered them has returned. */
  private readonly finished: LoggedResponse[] = [];
  private readonly format = (): void => {
    const finished = this.finished;
    for (let i = 0; i < finished.length; i++) this.writer.line(finished[i].line());
    finished.length = 0;
  };

  /**
   * `open`: whether a path needs no token (the gate's), null when no token is ever
   * checked. `clock`: the lines' time.
   */
  constructor(
    private readonly writer: LineWriter,
    private readonly trusted: TrustedProxies,
    private readonly clock: Clock,
    readonly open: ((path: string) => boolean) | null,
    private readonly metrics: Metrics,
  ) {}

  /** The response to answer `req` through, counted (counted-response.ts), and logged but for a path not logged. Call it first in the uWS handler. */
  watch(res: HttpResponse, req: HttpRequest, method: string, path: string): HttpResponse {
    if (NOT_LOGGED.has(path)) return new CountedResponse(res, this.metrics);
    const logged = new LoggedResponse(this, res, this.metrics, method, path, this.clock());
    // Through the logged response, whose peer address the proxy's headers then reuse.
    logged.client = clientAddress(logged, req, this.trusted);
    return logged;
  }

  /**
   * A request is answered. Its line is made in a microtask, once the handler has
   * returned: a refusal is written within the admission step, before the step's caller
   * hands over the judgement (judged) that names the token.
   */
  write(entry: LoggedResponse): void {
    if (this.finished.push(entry) === 1) queueMicrotask(this.format);
  }
}

/** What a WebSocket session relayed, each way. */
export interface SessionCounts {
  readonly messagesIn: number;
  readonly messagesOut: number;
  readonly bytesIn: number;
  readonly bytesOut: number;
}

/** A response whose request is logged once answered, and counted as every response is (counted-response.ts). */
export class LoggedResponse extends CountedResponse {
  private readonly start = systemTimer();
  private duration = 0;
  private upstream: number | null = null;
  private token: string | null = null;
  private methods: string[] | null = null;
  /** Whether this line reads the body's calls itself: when no admission reads them. */
  private readsBody = true;
  private calls: number | null = null;
  private bytesIn = 0;
  private bytesOut = 0;
  private session: SessionCounts | null = null;
  private done = false;
  /** The connection's far end, asked of uWS once (a getpeername(2)): the client's address, and the proxy's X-Forwarded-For. */
  private peer: ArrayBuffer | null = null;
  /** The client's address, set right after the response is made. */
  client = '';

  constructor(
    private readonly log: AccessLog,
    res: HttpResponse,
    metrics: Metrics,
    private readonly method: string,
    private readonly path: string,
    private readonly time: number,
  ) {
    super(res, metrics);
  }

  /**
   * The line, its fields in their order. Written out rather than an object given to
   * JSON.stringify, which costs a third more: only the text a client chose (the method,
   * the path, the methods of its body) can hold what JSON must escape. The client is an
   * address in its canonical form, and the token's id `t` and digits.
   */
  line(): string {
    const token = this.token === null ? 'null' : `"${this.token}"`;
    const rpc = this.methods === null ? 'null' : JSON.stringify(this.methods);
    let text =
      `{"time":"${isoTime(this.time)}","client":"${this.client}","token":${token},"method":${JSON.stringify(this.method)},` +
      `"path":${JSON.stringify(this.path)},"rpc":${rpc},"calls":${this.calls},"status":${this.status},"upstreamStatus":${this.upstream},` +
      `"durationUs":${this.duration},"bytesIn":${this.bytesIn},"bytesOut":${this.bytesOut}`;
    const session = this.session;
    if (session !== null) text += `,"messagesIn":${session.messagesIn},"messagesOut":${session.messagesOut}`;
    return `${text}}\n`;
  }

  /** The gate's verdict on the token `req` carried for `path` (the original request's, for a check). */
  judged(req: HttpRequest, admission: Admission, decision: Decision, path: string): void {
    this.token = null;
    // A request with a ticket has its body read by the admission, which hands the reading over (bodyRead).
    this.readsBody = admission.ticket === null;
    const open = this.log.open;
    if (open === null) return;
    let text: string | null = null;
    if (decision === Decision.Admitted) {
      if (open(path)) return;
      // A WebSocket's token may have come in its query; the admission keeps it.
      text = admission.token ?? req.getHeader('authorization').slice(BEARER_LENGTH);
    } else if (decision === Decision.Refused && GENUINE.has(admission.outcome as Outcome)) {
      text = req.getHeader('authorization').slice(BEARER_LENGTH);
    }
    if (text !== null && text.length === TOKEN_LENGTH) {
      this.token = `t${Buffer.from(text.slice(0, SERIAL_CHARACTERS), 'base64url').readBigUInt64BE(5)}`;
    }
  }

  upstreamAnswered(status: number): void {
    this.upstream = status;
  }

  /** A WebSocket session opened by this upgrade has ended: its line, timed from the upgrade request. */
  sessionEnded(counts: SessionCounts): void {
    this.session = counts;
    this.bytesIn = counts.bytesIn;
    this.bytesOut = counts.bytesOut;
    this.finish();
  }

  private finish(): void {
    if (this.done) return;
    this.done = true;
    this.duration = Math.round((systemTimer() - this.start) * 1000);
    this.log.write(this);
  }

  private sent(body: RecognizedString | undefined): void {
    if (body === undefined) return;
    this.bytesOut += typeof body === 'string' ? Buffer.byteLength(body) : body.byteLength;
  }

  // HttpResponse, noting what the line needs.

  override write(chunk: RecognizedString): boolean {
    this.sent(chunk);
    return super.write(chunk);
  }

  override end(body?: RecognizedString, closeConnection?: boolean): HttpResponse {
    this.sent(body);
    super.end(body, closeConnection);
    this.finish();
    return this;
  }

  override endWithoutBody(reportedContentLength?: number, closeConnection?: boolean): HttpResponse {
    super.endWithoutBody(reportedContentLength, closeConnection);
    this.finish();
    return this;
  }

  override tryEnd(fullBodyOrChunk: RecognizedString, totalSize: number): [boolean, boolean] {
    const result = super.tryEnd(fullBodyOrChunk, totalSize);
    if (result[1]) {
      this.bytesOut = totalSize;
      this.finish();
    }
    return result;
  }

  override close(): HttpResponse {
    // Cut: what went of the body is what uWS wrote of it.
    if (!this.done) this.bytesOut = this.res.getWriteOffset();
    super.close();
    this.finish();
    return this;
  }

  override onAborted(handler: () => void): HttpResponse {
    // The status is CLIENT_GONE by then (counted-response.ts), unless the answer was whole.
    super.onAborted(() => {
      if (!this.done && this.session === null) this.finish();
      handler();
    });
    return this;
  }

  override onData(handler: (chunk: ArrayBuffer, isLast: boolean) => void): HttpResponse {
    super.onData((chunk, isLast) => {
      // A body in one piece that nothing else reads (its token has neither limits nor a
      // scope): its methods, for the line, by the same reading as the admission's.
      if (this.readsBody && this.bytesIn === 0 && isLast && chunk.byteLength <= MAX_READ) this.bodyRead(readCalls(new Uint8Array(chunk)));
      this.bytesIn += chunk.byteLength;
      handler(chunk, isLast);
    });
    return this;
  }

  override upgrade<UserData>(
    userData: UserData,
    secWebSocketKey: RecognizedString,
    secWebSocketProtocol: RecognizedString,
    secWebSocketExtensions: RecognizedString,
    context: us_socket_context_t,
  ): void {
    // The upstream accepted (the relay upgrades only then): the line waits for the session's end.
    this.upstream = 101;
    this.session = { messagesIn: 0, messagesOut: 0, bytesIn: 0, bytesOut: 0 };
    super.upgrade(userData, secWebSocketKey, secWebSocketProtocol, secWebSocketExtensions, context);
  }

  /** Read only, by every caller (client-address.ts): the same buffer serves them all. */
  override getRemoteAddress(): ArrayBuffer {
    this.peer ??= super.getRemoteAddress();
    return this.peer;
  }

  /** The reading of the request's body (rpc/reading.ts): its calls and their methods, when it could be read. */
  bodyRead(reading: Reading): void {
    if (!reading.ok) return;
    const calls = reading.calls;
    this.calls = calls.length;
    this.methods = calls.slice(0, MAX_METHODS).map((call) => call.method.slice(0, METHOD_SHOWN));
  }
}

/** The second `isoTime` last formatted, and its text up to the milliseconds: most lines share their second with the one before. */
let second = -1;
let secondText = '';

/** `ms` since the epoch in RFC 3339, UTC, with milliseconds, as Date's toISOString() writes it. */
function isoTime(ms: number): string {
  const whole = Math.floor(ms);
  const s = Math.floor(whole / 1000);
  if (s !== second) {
    second = s;
    secondText = new Date(s * 1000).toISOString().slice(0, 20);
  }
  const milliseconds = whole - s * 1000;
  return `${secondText}${milliseconds < 10 ? '00' : milliseconds < 100 ? '0' : ''}${milliseconds}Z`;
}

/** After an admission step on `res`: the token's id for its line, when `res` is logged. */
export function judged(res: HttpResponse, req: HttpRequest, admission: Admission, decision: Decision, path: string): void {
  if (res instanceof LoggedResponse) res.judged(req, admission, decision, path);
}

/** The admission read the calls of `res`'s request: for its line, when `res` is logged. */
export function bodyRead(res: HttpResponse, reading: Reading): void {
  if (res instanceof LoggedResponse) res.bodyRead(reading);
}

/** The upstream answered `res`'s request with `status`: for its line, when `res` is logged. */
export function upstreamAnswered(res: HttpResponse, status: number): void {
  if (res instanceof LoggedResponse) res.upstreamAnswered(status);
}

/** The logged upgrade `res` opened a session: its line waits for sessionEnded; null when not logged. */
export function loggedSession(res: HttpResponse): LoggedResponse | null {
  return res instanceof LoggedResponse ? res : null;
}
