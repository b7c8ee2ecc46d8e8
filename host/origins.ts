// The origins whose browser pages may call (--http-allowed-origins): compiled once, at
// start, by the options' parsers, and matched per request by the HTTP layer (http/cors.ts).

/** The origins allowed, compiled once. */
export interface AllowedOrigins {
  /** Every origin ("*" was given). */
  readonly any: boolean;
  /** Exact origins, in lower case. */
  readonly exact: ReadonlySet<string>;
  /** Origins with one "*": what comes before and after it. */
  readonly patterns: readonly { readonly prefix: string; readonly suffix: string }[];
}

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
      throw new Error(
        `${JSON.stringify(entry)} is not an origin: give scheme://host[:port] such as https://wallet.example, ` +
          'scheme://*.domain[:port] for its subdomains (https://*.wallet.example), or "*" for every origin',
      );
    }
    if (at === -1) exact.add(origin);
    else patterns.push({ prefix: origin.slice(0, at), suffix: origin.slice(at + 1) });
  }
  return { any, exact, patterns };
}
