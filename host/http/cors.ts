// CORS for browser dapps, with the node's flag and default (--http-allowed-origins "*").
// A browser asks before a request it may not send unasked (a preflight: OPTIONS with
// Access-Control-Request-Method), and a preflight never carries a token, so api-auth
// answers it itself for an allowed origin. Real requests are gated like any other, and
// their answers, refusals included, carry the headers their origin needs to read them.
// An origin that is not allowed gets no CORS header at all, and its browser keeps the
// page from the answer.
import type { HttpResponse } from 'uWebSockets.js';

/** The origins allowed, compiled once. */
export interface AllowedOrigins {
  /** Every origin ("*" was given). */
  readonly any: boolean;
  /** Exact origins, in lower case. */
  readonly exact: ReadonlySet<string>;
  /** Origins with one "*": what comes before and after it. */
  readonly patterns: readonly { readonly prefix: string; readonly suffix: string }[];
}

/** What a browser may send beside the simple headers: the token, and a JSON body's type. */
export const ALLOWED_HEADERS = 'Authorization, Content-Type';
/** The methods of a node's APIs. */
export const ALLOWED_METHODS = 'GET, HEAD, POST';
/** So that a page can read why it was refused, and how long to wait. */
const EXPOSED_HEADERS = 'WWW-Authenticate, Retry-After';
/** Seconds a browser may keep a preflight's answer. */
const MAX_AGE = '600';

// scheme://host[:port], in which "*" may stand for part of the host.
const ORIGIN = /^[a-z][a-z0-9+.-]*:\/\/[a-z0-9*.[\]:-]+$/;

/** Compiles origins as given (exact, one "*" inside, or "*" alone); throws an Error naming the bad one. */
export function allowedOrigins(list: readonly string[]): AllowedOrigins {
  const exact = new Set<string>();
  const patterns: { prefix: string; suffix: string }[] = [];
  let any = false;
  for (const entry of list) {
    const origin = entry.trim().toLowerCase();
    if (origin === '*') {
      any = true;
      continue;
    }
    const at = origin.indexOf('*');
    // A "*" stands for whole labels in front of a domain: "https://*example" would match
    // https://evilexample, a host anyone may register.
    if (!ORIGIN.test(origin) || (at !== -1 && (!origin.startsWith('://*.', at - 3) || origin.includes('*', at + 1)))) {
      throw new Error(`${JSON.stringify(entry)} is not an origin: give scheme://host[:port] such as https://wallet.example, ` +
        'scheme://*.domain[:port] for its subdomains (https://*.wallet.example), or "*" for every origin');
    }
    if (at === -1) exact.add(origin);
    else patterns.push({ prefix: origin.slice(0, at), suffix: origin.slice(at + 1) });
  }
  return { any, exact, patterns };
}

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
  res.writeStatus('204 No Content').writeHeader('Access-Control-Allow-Origin', allow)
    .writeHeader('Access-Control-Allow-Methods', ALLOWED_METHODS).writeHeader('Access-Control-Allow-Headers', ALLOWED_HEADERS)
    .writeHeader('Access-Control-Max-Age', MAX_AGE);
  if (allow !== '*') res.writeHeader('Vary', 'Origin');
  res.endWithoutBody();
}
