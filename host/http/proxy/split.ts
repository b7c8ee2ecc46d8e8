// A batch of which only some calls went upstream (scope.ts): the upstream's answer to
// them is read whole, at most SPLIT_ANSWER_MAX bytes, then written once, merged with the
// refused calls' errors in the calls' order.
import { ScopeRefusedError } from '../../errors.js';
import { equalsIgnoringCase, FIELD } from '../upstream/response-head.js';
import type { ResponseParser } from '../upstream/parser.js';
import { statusLine } from './answer-head.js';
import { Exchange } from './exchange.js';
import type { Relay } from './exchange.js';
import type { HttpResponse } from 'uWebSockets.js';

/** The largest answer to a split batch's allowed calls that is merged with the refusals. */
export const SPLIT_ANSWER_MAX = 16 * 1024 * 1024;

const CONTENT_TYPE = Buffer.from('content-type');
const CONTENT_ENCODING = Buffer.from('content-encoding');

/** What merges the upstream's answer to the allowed calls with the refusals (scope.ts's ScopeSplit). */
export interface Merge {
  /** The merged batch's text; undefined when the answer is not a batch of the allowed calls' answers. */
  merge(answer: string): string | undefined;
}

export class SplitExchange extends Exchange {
  private status = 0;
  private type = '';
  private encoding = '';
  private parts: Buffer[] = [];
  private size = 0;

  constructor(
    relay: Relay,
    res: HttpResponse,
    head: boolean,
    idempotent: boolean,
    allowOrigin: string,
    private readonly split: Merge,
  ) {
    super(relay, res, head, idempotent, allowOrigin);
  }

  onHead(parser: ResponseParser, bytes: Buffer): void {
    if (this.closed) return;
    this.answered(parser);
    this.status = parser.status;
    const fields = parser.fields;
    for (let i = 0, end = parser.fieldCount * FIELD; i < end; i += FIELD) {
      const value = (): string => bytes.toString('latin1', fields[i + 2], fields[i + 3]);
      if (equalsIgnoringCase(bytes, fields[i], fields[i + 1], CONTENT_TYPE)) this.type = value();
      else if (equalsIgnoringCase(bytes, fields[i], fields[i + 1], CONTENT_ENCODING)) this.encoding = value();
    }
  }

  onBody(bytes: Buffer, start: number, end: number): void {
    if (this.closed) return;
    this.size += end - start;
    if (this.size > SPLIT_ANSWER_MAX) {
      this.abandonUpstream();
      this.closed = true;
      this.parts = [];
      const res = this.res;
      res.cork(() => {
        res.writeStatus(statusLine(502, undefined)).writeHeader('Content-Type', 'application/json');
        if (this.allowOrigin !== '') this.relay.cors(res, this.allowOrigin);
        res.end(this.relay.splitTooLarge);
      });
      this.relay.settle(new ScopeRefusedError('method not allowed'));
      return;
    }
    // The read buffer is reused once the read is parsed.
    this.parts.push(Buffer.from(bytes.subarray(start, end)));
  }

  onReadEnd(): void {
    // Nothing is written before the answer's end.
  }

  onEnd(): void {
    if (this.closed) return;
    this.resumeUpstream();
    this.connection = null;
    this.res.cork(() => this.writeAnswer());
    this.complete();
  }

  protected relayed(): boolean {
    return false;
  }

  /**
   * The answer to a split batch: the node's answers and the refusals in the calls' order,
   * in a 200; or, when the node did not answer the batch with a batch (an error status,
   * an error object, a body that is not JSON), the node's answer as it is. Call it corked.
   */
  private writeAnswer(): void {
    const res = this.res;
    const body = Buffer.concat(this.parts, this.size);
    this.parts = [];
    const encoding = this.encoding.trim().toLowerCase();
    const ok = this.status >= 200 && this.status < 300 && (encoding === '' || encoding === 'identity');
    const merged = ok ? this.split.merge(body.toString('utf8')) : undefined;
    res.writeStatus(statusLine(merged === undefined ? this.status : 200, undefined));
    if (merged !== undefined || this.type !== '') res.writeHeader('Content-Type', merged === undefined ? this.type : 'application/json');
    if (merged === undefined && this.encoding !== '') res.writeHeader('Content-Encoding', this.encoding);
    if (this.allowOrigin !== '') this.relay.cors(res, this.allowOrigin);
    res.end(merged === undefined ? body : `${merged}\n`);
  }
}
