// The parsers of the options' schema: each checks a value given for one option (from the
// library, a flag, the environment or a config file) and returns what the service runs
// with, or throws OptionError naming the option, what it takes and the value refused.
import { resolve } from 'node:path';
import { trustedProxies } from '../addresses.js';
import type { TrustedProxies } from '../addresses.js';
import { NEVER, NEVER_SECONDS, parseDuration } from '../duration.js';
import { badOption } from '../errors.js';
import { STDOUT } from '../ops/line-target.js';
import { LEVELS } from '../ops/log.js';
import type { Level } from '../ops/log.js';
import { allowedOrigins } from '../origins.js';
import type { AllowedOrigins } from '../origins.js';
import { AUTH_PATH, OWN_PATHS } from '../own-endpoints.js';
import { formatSeconds, show } from './format.js';
import type { Limits, OptionParser } from './spec.js';

/** A ceiling of token lifetimes: a duration within the option's limits, or "never" (NEVER_SECONDS). */
export function ceiling(value: unknown, option: string, limits: Limits | undefined): number {
  if (value === NEVER) return NEVER_SECONDS;
  return duration(`12h, 720h or 8760h, or ${NEVER}`)(value, option, limits);
}

export function flag(value: unknown, option: string): boolean {
  if (typeof value !== 'boolean') throw badOption(option, ` must be true or false (or yes/no, on/off, 1/0), not ${show(value)}`);
  return value;
}

export function host(value: unknown): string {
  if (typeof value !== 'string' || value.trim() === '') {
    throw badOption(
      'host',
      value === ''
        ? ' must not be empty; give an address such as 127.0.0.1 or 0.0.0.0'
        : ` must be an address such as 127.0.0.1 or 0.0.0.0, not ${show(value)}`,
    );
  }
  return value;
}

export function port(value: unknown): number {
  const port = typeof value === 'number' ? value : typeof value === 'string' && /^\d{1,5}$/.test(value) ? Number(value) : NaN;
  if (!(Number.isInteger(port) && port >= 0 && port <= 65535)) {
    throw badOption('port', ` must be a whole number from 0 to 65535 (0 picks a free port), not ${show(value)}`);
  }
  return port;
}

/** Text that must not be empty; `what` says what it names. */
export function text(what: string): OptionParser<string> {
  return (value, option) => nonEmpty(option, value, what);
}

/** A path, made absolute; `what` says what it names. */
export function file(what: string): OptionParser<string> {
  return (value, option) => resolve(nonEmpty(option, value, what));
}

export function nonEmpty(option: string, value: unknown, what: string): string {
  if (typeof value !== 'string') throw badOption(option, ` must be ${what}, not ${show(value)}`);
  if (value.trim() === '') throw badOption(option, ` must not be empty; give ${what}`);
  return value;
}

/** A duration in whole seconds within the option's limits, from a number of seconds or a duration's text; `examples` fit the option. */
export function duration(examples: string): OptionParser<number> {
  return (value, option, limits) => {
    const { min, max } = limits!;
    const what = `a duration in whole seconds from ${formatSeconds(min)} to ${formatSeconds(max)}, such as ${examples}`;
    const seconds = typeof value === 'number' ? value : typeof value === 'string' ? parseDuration(value) : null;
    if (typeof value === 'number' && !Number.isInteger(value))
      throw badOption(option, ` must be a whole number of seconds, not ${show(value)}`);
    if (seconds === null || !Number.isInteger(seconds) || seconds < min || seconds > max)
      throw badOption(option, ` must be ${what}, not ${show(value)}`);
    return seconds;
  };
}

const SIZE_UNITS: Record<string, number> = { '': 1, KiB: 1024, MiB: 1024 * 1024 };

export function size(value: unknown, option: string, limits: Limits | undefined): number {
  const { min, max } = limits!;
  const m = typeof value === 'string' ? /^(\d{1,10})(KiB|MiB)?$/.exec(value) : null;
  const bytes = typeof value === 'number' ? value : m === null ? NaN : Number(m[1]) * SIZE_UNITS[m[2] ?? ''];
  if (!(Number.isInteger(bytes) && bytes >= min && bytes <= max)) {
    throw badOption(
      option,
      ` must be a size from ${min} byte to ${max / (1024 * 1024)}MiB: a number of bytes, or a number followed by ` +
        `KiB or MiB (such as 1MiB), not ${show(value)}`,
    );
  }
  return bytes;
}

/**
 * The node to proxy to: an http or https origin. A path would be ambiguous (the request's
 * path is sent as it came), so none is taken.
 */
export function upstream(value: unknown): URL {
  const notUrl = () => badOption('upstream', ` must be a URL such as http://127.0.0.1:9652, not ${show(value)}`);
  if (typeof value !== 'string' && !(value instanceof URL)) throw notUrl();
  let url: URL;
  try {
    url = new URL(String(value));
  } catch {
    throw notUrl();
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw badOption('upstream', ` must be an http:// or https:// URL, not ${show(value)}`);
  if (url.username !== '' || url.password !== '' || url.pathname !== '/' || url.search !== '' || url.hash !== '') {
    throw badOption(
      'upstream',
      ' must be just scheme, host and port, such as http://127.0.0.1:9652 (requests keep their own path), ' + `not ${show(value)}`,
    );
  }
  // A node listens on a port of its own (9650 by default), never on the scheme's. A URL
  // without one would go to port 80 or 443: most likely a forgotten port. The URL parser
  // drops a port equal to the scheme's default, so the text says whether one was written.
  if (!/^[a-z][a-z0-9+.-]*:\/\/(\[[^\]]*\]|[^/?#:]*):\d+(?:[/?#]|$)/i.test(String(value))) {
    throw badOption(
      'upstream',
      ` must name the node's port, such as http://127.0.0.1:9652 (write :${url.protocol === 'https:' ? 443 : 80} ` +
        `if that port is really meant), not ${show(value)}`,
    );
  }
  return url;
}

/**
 * A list of exact request paths, without duplicates. The path rules themselves (dot
 * segments, encodings) are the core's: servedPaths. The token service's own path needs no
 * token already, so naming it as public would change nothing: a mistake, refused.
 */
export function paths(value: unknown, option: string): string[] {
  if (!Array.isArray(value)) throw badOption(option, ` must be an array of exact paths such as ["/ext/health"], not ${show(value)}`);
  const list = [...new Set(value.map((entry: unknown) => path(option, entry, '/ext/health')))];
  const own = list.find((path) => OWN_PATHS.includes(path));
  if (own !== undefined) {
    throw badOption(
      option,
      `: ${own} needs no token already (${
        own === AUTH_PATH ? 'it is where tokens are had, behind the password' : "it is api-auth's own"
      }); leave it out`,
    );
  }
  return list;
}

/** An exact absolute path; `example` is one that fits the option. */
function path(option: string, value: unknown, example: string): string {
  if (typeof value !== 'string' || !value.startsWith('/') || value.includes('*') || value.includes('?')) {
    throw badOption(option, ` takes exact absolute paths such as ${example} (no "*", no query), not ${show(value)}`);
  }
  return value;
}

/** Where the metrics are served: an exact path, not one of api-auth's own. */
export function metricsPath(value: unknown, option: string): string {
  const metrics = path(option, value, '/ext/metrics');
  if (OWN_PATHS.includes(metrics)) throw badOption(option, ` must not be ${metrics}`);
  return metrics;
}

/**
 * The access log's file, made absolute, or STDOUT. "-" is refused rather than taken as a
 * file of that name, or as standard output, which a reader of the command might assume.
 */
export function accessLog(value: unknown, option: string): string {
  if (value === STDOUT) return STDOUT;
  if (value === '-') throw badOption(option, ' must be a file\'s path, or "stdout" for standard output, not "-"');
  return file('a file\'s path, or "stdout" for standard output')(value, option, undefined);
}

export function proxies(value: unknown): TrustedProxies {
  if (!Array.isArray(value)) throw badOption('trustedProxies', ' must be an array of addresses and CIDR ranges, such as ["10.0.0.0/8"]');
  try {
    return trustedProxies(value);
  } catch (error) {
    throw badOption('trustedProxies', `: ${(error as Error).message}`);
  }
}

/** A whole number within the option's limits; `what` says what it counts. */
export function count(what: string): OptionParser<number> {
  return (value, option, limits) => {
    const { min, max } = limits!;
    const n = typeof value === 'number' ? value : typeof value === 'string' && /^\d{1,10}$/.test(value) ? Number(value) : NaN;
    if (!(Number.isInteger(n) && n >= min && n <= max)) {
      throw badOption(option, ` must be a whole number from ${min} to ${max} (${what}), not ${show(value)}`);
    }
    return n;
  };
}

/** etcd's client URLs: a list, or one string separated by commas; all http:// or all https://. */
export function etcdUrls(value: unknown, option: string): URL[] {
  const list = typeof value === 'string' ? value.split(',') : Array.isArray(value) ? value : null;
  if (list === null || list.length === 0)
    throw badOption(option, ` must be etcd client URLs such as http://127.0.0.1:2379, not ${show(value)}`);
  const urls = list.map((entry: unknown) => {
    const text = typeof entry === 'string' ? entry.trim() : '';
    let url: URL | undefined;
    try {
      url = new URL(text);
    } catch {
      url = undefined;
    }
    if (
      url === undefined ||
      (url.protocol !== 'http:' && url.protocol !== 'https:') ||
      url.port === '' ||
      url.pathname !== '/' ||
      url.username !== '' ||
      url.password !== '' ||
      url.search !== '' ||
      url.hash !== ''
    ) {
      // The whole value, not the entry: a password with a comma in it would leave part of itself in an entry.
      throw badOption(
        option,
        ` must be etcd client URLs, http:// or https:// with host and port, no user or password ` +
          `(--cluster-etcd-user and --cluster-etcd-password-file), such as http://127.0.0.1:2379, separated by commas; ${show(value)} is not`,
      );
    }
    return url;
  });
  const secure = urls[0].protocol === 'https:';
  if (urls.some((url) => (url.protocol === 'https:') !== secure)) {
    throw badOption(
      option,
      ` mixes http:// and https:// URLs (${show(value)}); an etcd cluster serves its clients one way: ` +
        'give them all with https:// (TLS) or all with http://',
    );
  }
  return urls;
}

export function clusterName(value: unknown, option: string): string {
  if (typeof value !== 'string' || !/^[A-Za-z0-9._-]{1,64}$/.test(value)) {
    throw badOption(option, ` must be 1 to 64 letters, digits, ".", "_" or "-", not ${show(value)}`);
  }
  return value;
}

export function origins(value: unknown): AllowedOrigins {
  const list = typeof value === 'string' ? value.split(/[\s,]+/).filter((entry) => entry !== '') : value;
  if (!Array.isArray(list) || !list.every((entry) => typeof entry === 'string')) {
    throw badOption('allowedOrigins', ` must be origins such as "https://wallet.example https://*.example", or "*", not ${show(value)}`);
  }
  try {
    return allowedOrigins(list);
  } catch (error) {
    throw badOption('allowedOrigins', `: ${(error as Error).message}`);
  }
}

export function level(value: unknown): Level {
  if (!(LEVELS as readonly unknown[]).includes(value))
    throw badOption('logLevel', ` must be one of ${LEVELS.join(', ')}, not ${show(value)}`);
  return value as Level;
}
