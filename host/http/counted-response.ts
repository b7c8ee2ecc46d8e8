// Every answer the HTTP side writes, counted once by its status and, for a refusal, why:
// the request is answered through a CountedResponse, the uWS response with its status
// noted as it is written. Each call goes on to uWS exactly as made (the arguments given,
// no more, in the same order), so wrapping changes nothing of the answer; the count is
// made once the answer is whole (ended, cut, upgraded, or its client gone: 499, as
// nginx logs it). The writers of refusals say why (refusedFor); the access log's response
// (access-log.ts) is a CountedResponse too, so a logged request is wrapped once.
import type { HttpResponse, RecognizedString, us_socket_context_t } from 'uWebSockets.js';
import { NOT_REFUSED } from '../ops/metric-labels.js';
import type { ResponseReason } from '../ops/metric-labels.js';
import type { Metrics } from '../ops/metrics.js';

/** The status of an answer its client did not wait for (nginx's "client closed request"). */
export const CLIENT_GONE = 499;

const latin1 = new TextDecoder('latin1');

export class CountedResponse implements HttpResponse {
  [key: string]: unknown;
  /** The status written so far: 200 until writeStatus, as uWS sends it. */
  protected status = 200;
  /** Why api-auth refused the request; NOT_REFUSED for any other answer. */
  reason: ResponseReason = NOT_REFUSED;
  /** Counted already: the answer is whole. */
  protected counted = false;

  constructor(
    protected readonly res: HttpResponse,
    private readonly metrics: Metrics,
  ) {}

  /** The answer is whole: counted, once. */
  protected answered(): void {
    if (this.counted) return;
    this.counted = true;
    this.metrics.response(this.status, this.reason);
  }

  writeStatus(status: RecognizedString): HttpResponse {
    this.status = parseInt(typeof status === 'string' ? status : latin1.decode(status).slice(0, 3), 10);
    this.res.writeStatus(status);
    return this;
  }

  write(chunk: RecognizedString): boolean {
    return this.res.write(chunk);
  }

  // uWS takes an argument passed as undefined for one given (endWithoutBody(undefined,
  // undefined) never ends the response): only the arguments the caller gave go on.

  end(body?: RecognizedString, closeConnection?: boolean): HttpResponse {
    if (closeConnection !== undefined) this.res.end(body, closeConnection);
    else if (body !== undefined) this.res.end(body);
    else this.res.end();
    this.answered();
    return this;
  }

  endWithoutBody(reportedContentLength?: number, closeConnection?: boolean): HttpResponse {
    if (closeConnection !== undefined) this.res.endWithoutBody(reportedContentLength, closeConnection);
    else if (reportedContentLength !== undefined) this.res.endWithoutBody(reportedContentLength);
    else this.res.endWithoutBody();
    this.answered();
    return this;
  }

  tryEnd(fullBodyOrChunk: RecognizedString, totalSize: number): [boolean, boolean] {
    const result = this.res.tryEnd(fullBodyOrChunk, totalSize);
    if (result[1]) this.answered();
    return result;
  }

  close(): HttpResponse {
    this.res.close();
    this.answered();
    return this;
  }

  onAborted(handler: () => void): HttpResponse {
    this.res.onAborted(() => {
      if (!this.counted) {
        this.status = CLIENT_GONE;
        this.answered();
      }
      handler();
    });
    return this;
  }

  onData(handler: (chunk: ArrayBuffer, isLast: boolean) => void): HttpResponse {
    this.res.onData(handler);
    return this;
  }

  upgrade<UserData>(
    userData: UserData,
    secWebSocketKey: RecognizedString,
    secWebSocketProtocol: RecognizedString,
    secWebSocketExtensions: RecognizedString,
    context: us_socket_context_t,
  ): void {
    this.status = 101;
    this.answered();
    this.res.upgrade(userData, secWebSocketKey, secWebSocketProtocol, secWebSocketExtensions, context);
  }

  writeHeader(key: RecognizedString, value: RecognizedString): HttpResponse {
    this.res.writeHeader(key, value);
    return this;
  }

  cork(cb: () => void): HttpResponse {
    this.res.cork(cb);
    return this;
  }

  onWritable(handler: (offset: number) => boolean): HttpResponse {
    this.res.onWritable(handler);
    return this;
  }

  pause(): void {
    this.res.pause();
  }

  resume(): void {
    this.res.resume();
  }

  getWriteOffset(): number {
    return this.res.getWriteOffset();
  }

  getRemoteAddress(): ArrayBuffer {
    return this.res.getRemoteAddress();
  }

  getRemoteAddressAsText(): ArrayBuffer {
    return this.res.getRemoteAddressAsText();
  }

  getProxiedRemoteAddress(): ArrayBuffer {
    return this.res.getProxiedRemoteAddress();
  }

  getProxiedRemoteAddressAsText(): ArrayBuffer {
    return this.res.getProxiedRemoteAddressAsText();
  }
}

/** `res`'s request is refused for `reason` (the metrics' label): call it before the refusal is ended. */
export function refusedFor(res: HttpResponse, reason: ResponseReason): void {
  if (res instanceof CountedResponse) res.reason = reason;
}
