// CORS for browser dapps, with the node's flag and default (--http-allowed-origins "*").
// A browser asks before a request it may not send unasked (a preflight: OPTIONS with
// Access-Control-Request-Method), and a preflight never carries a token, so api-auth
// answers it itself for an allowed origin. Real requests are gated like any other, and
// their answers, refusals included, carry the headers their origin needs to read them.
// An origin that is not allowed gets no CORS header at all, and its browser keeps the
// page from the answer.
import type { HttpResponse } from 'uWebSockets.js';
import type { AllowedOrigins } from '../origins.js';

/** What a browser may send beside the simple headers: the token, and a JSON body's type. */
export const ALLOWED_HEADERS = 'Authorization, Content-Type';
/** The methods of a node's APIs. */
export const ALLOWED_METHODS = 'GET, HEAD, POST';
/** So that a page can read why it was refused, and how long to wait. */
const EXPOSED_HEADERS = 'WWW-Authenticate, Retry-After';
/** Seconds a browser may keep a preflight's answer. */
const MAX_AGE = '600';

export class Cors {
  constructor(private readonly origins: AllowedOrigins) {}

  /**
   * The Access-Control-Allow-Origin for a request's Origin header: "*" when every
   * origin is allowed, the origin itself when it is listed, "" (no CORS headers) when it
   * is not or there is none.
   */
  allow(origin: string): string {
    if (origin === '') return '';
    const { any, exact, patterns } = this.origins;
    if (any) return '*';
    const lower = origin.toLowerCase();
    if (exact.has(lower)) return origin;
    for (const { prefix, suffix } of patterns) {
      if (lower.length > prefix.length + suffix.length && lower.startsWith(prefix) && lower.endsWith(suffix)) return origin;
    }
    return '';
  }
}

/** The CORS headers of an answer to an allowed origin (`allow` from Cors.allow, not ""); call it after writeStatus. */
export function writeCorsHeaders(res: HttpResponse, allow: string): void {
  res.writeHeader('Access-Control-Allow-Origin', allow).writeHeader('Access-Control-Expose-Headers', EXPOSED_HEADERS);
  // An answer that names one origin differs by origin: caches must not hand it to another.
  if (allow !== '*') res.writeHeader('Vary', 'Origin');
}

/** The answer to a preflight from an allowed origin: 204, and what the browser may send. */
export function writePreflight(res: HttpResponse, allow: string): void {
  res
    .writeStatus('204 No Content')
    .writeHeader('Access-Control-Allow-Origin', allow)
    .writeHeader('Access-Control-Allow-Methods', ALLOWED_METHODS)
    .writeHeader('Access-Control-Allow-Headers', ALLOWED_HEADERS)
    .writeHeader('Access-Control-Max-Age', MAX_AGE);
  if (allow !== '*') res.writeHeader('Vary', 'Origin');
  res.endWithoutBody();
}
