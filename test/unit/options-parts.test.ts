// The options' folder, piece by piece: the parsers, the formats and the
// resolver through their own modules, beside the end-to-end tests of the flags and the
// library (options.test.ts, cli/options-sources.test.ts), and the neutral modules the
// parsers share with the HTTP side. The folder imports nothing from http/, so the
// options can be read, and tested, without the per-request code.
import t from 'tap';
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { formatAddress, trustedProxies } from '../../build/host/addresses.js';
import { NEVER_SECONDS } from '../../build/host/duration.js';
import { formatBytes, formatSeconds, show } from '../../build/host/options/format.js';
import { ceiling, count, duration, etcdUrls, origins, paths, proxies, size, upstream } from '../../build/host/options/parsers.js';
import { resolveServerOptions } from '../../build/host/options/resolve.js';
import { LIMITS, MAX_SESSIONS, SCHEMA } from '../../build/host/options/schema.js';
import { allowedOrigins } from '../../build/host/origins.js';
import { AUTH_PATH, MAX_BODY_BYTES, OWN_PATHS } from '../../build/host/own-endpoints.js';
import { sessionBytes } from '../../build/host/session-memory.js';
import { ROOT } from '../helpers/server.js';

const MIB = 1024 * 1024;

t.test('options/ imports nothing from http/: its arrows go to neutral modules only', async (t) => {
  const dir = join(ROOT, 'host', 'options');
  const files = readdirSync(dir).filter((name) => name.endsWith('.ts'));
  t.ok(files.length >= 4, `the folder holds its pieces (${files.join(', ')})`);
  for (const name of files) {
    const source = readFileSync(join(dir, name), 'utf8');
    for (const [, specifier] of source.matchAll(/^(?:import|export)\b[^;]*?from '([^']+)'/gms)) {
      if (!specifier.startsWith('.')) continue;
      const target = resolve(dir, specifier);
      t.notOk(target.startsWith(join(ROOT, 'host', 'http')), `${name} -> ${specifier} is not into http/`);
    }
  }
});

t.test('the parsers take what their option takes and name what they refuse', async (t) => {
  t.equal(size('1MiB', 'upstreamMaxBody', { min: 1, max: 1024 * MIB }), MIB, 'a size in MiB');
  t.throws(
    () => size('1 MiB', 'upstreamMaxBody', { min: 1, max: 1024 * MIB }),
    { code: 'API_AUTH_BAD_OPTION', option: 'upstreamMaxBody', message: /^upstreamMaxBody must be a size from 1 byte to 1024MiB/ },
    'a space in a size',
  );
  t.equal(duration('30s')('2m', 'upstreamTimeout', { min: 1, max: 3600 }), 120, 'a duration in minutes, in seconds');
  t.throws(
    () => duration('30s')(1.5, 'upstreamTimeout', { min: 1, max: 3600 }),
    { option: 'upstreamTimeout', message: 'upstreamTimeout must be a whole number of seconds, not 1.5' },
    'a fraction of a second',
  );
  t.equal(ceiling('never', 'maxTokenLifetime', { min: 1, max: 3600 }), NEVER_SECONDS, 'a ceiling of never');
  t.equal(ceiling('2h', 'maxTokenLifetime', { min: 1, max: 8760 * 3600 }), 7200, 'a ceiling of a duration');
  t.equal(count('threads')('8', 'httpThreads', { min: 1, max: 256 }), 8, 'a count from its text');
  t.throws(
    () => count('threads')('257', 'httpThreads', { min: 1, max: 256 }),
    { message: 'httpThreads must be a whole number from 1 to 256 (threads), not "257"' },
    'a count past its limit',
  );
  t.equal(upstream('http://127.0.0.1:9652').href, 'http://127.0.0.1:9652/', 'an upstream origin');
  t.throws(
    () => upstream('http://127.0.0.1'),
    { option: 'upstream', message: /must name the node's port.*write :80/ },
    'an upstream without its port',
  );
  t.throws(
    () => upstream('http://user:secret@127.0.0.1:9652'),
    { message: /not "http:\/\/…@127\.0\.0\.1:9652"$/ },
    'an upstream with a password, which the message leaves out',
  );
  t.same(paths(['/ext/health', '/ext/health'], 'publicEndpoints'), ['/ext/health'], 'paths without duplicates');
  t.throws(() => paths([AUTH_PATH], 'publicEndpoints'), { message: /\/ext\/auth needs no token already/ }, "the token service's own path");
  t.same(
    etcdUrls('http://10.0.0.1:2379, http://10.0.0.2:2379', 'clusterEtcd').map((url) => url.origin),
    ['http://10.0.0.1:2379', 'http://10.0.0.2:2379'],
    'etcd URLs from one string',
  );
  t.throws(
    () => etcdUrls('http://10.0.0.1:2379,https://10.0.0.2:2379', 'clusterEtcd'),
    { message: /mixes http:\/\/ and https:\/\// },
    'etcd URLs of both schemes',
  );
  t.ok(proxies(['10.0.0.0/8']).has('10.1.2.3'), 'trusted proxies as a matcher');
  t.throws(
    () => proxies(['10.0.0.0/33']),
    { option: 'trustedProxies', message: /"10\.0\.0\.0\/33" is not an address or a CIDR range/ },
    "a range past its family's bits",
  );
  t.same([...origins('https://a.example, https://*.b.example').exact], ['https://a.example'], 'origins from one string');
  t.throws(() => origins('https://*example'), { option: 'allowedOrigins', message: /is not an origin/ }, 'a "*" that is not a whole label');
});

t.test("the formats write values as the docs do, and never a URL's password", async (t) => {
  t.equal(formatSeconds(8760 * 3600), '8760h');
  t.equal(formatSeconds(90), '90s');
  t.equal(formatBytes(16 * MIB), '16MiB');
  t.equal(formatBytes(64 * 1024), '64KiB');
  t.equal(formatBytes(1000), '1000');
  t.equal(show('https://u:p@h:1,http://x@y:2'), '"https://…@y:2"', 'from the first "://" to the last "@"');
  t.equal(show(new URL('http://a:b@h:1')), '"http://…@h:1/"', 'a URL object');
});

t.test('the schema, the resolver and the neutral modules agree', async (t) => {
  t.equal(LIMITS.rpcBody, MAX_BODY_BYTES, 'LIMITS.rpcBody is the body own endpoints read');
  t.equal(MAX_BODY_BYTES, 65536);
  t.ok(OWN_PATHS.includes(AUTH_PATH), "the token service's path is one of api-auth's own");
  t.equal(SCHEMA.upstreamTimeout.within, 'upstream', 'an entry says the option it is within');
  t.equal(sessionBytes(16 * MIB), 98 * MIB, 'a session at the default message size may hold 98MiB');
  const upstreamAt = { upstream: 'http://127.0.0.1:9652' };
  t.equal(
    resolveServerOptions(upstreamAt).wsMaxSessions,
    Math.min(MAX_SESSIONS, Math.floor(4096 / 98)),
    'left out, the sessions are what the budget holds',
  );
  t.equal(
    resolveServerOptions({ ...upstreamAt, wsMaxMessage: '1MiB', wsMemoryBudget: '102400MiB' }).wsMaxSessions,
    MAX_SESSIONS,
    'or MAX_SESSIONS when it holds more',
  );
  t.same(
    resolveServerOptions({ trustedProxies: ['::ffff:10.0.0.1'] }).trustedProxies.entries,
    ['::ffff:10.0.0.1'],
    'the trusted proxies as given, for the threads',
  );
  t.ok(trustedProxies(['::ffff:10.0.0.0/104']).has('10.9.9.9'), 'an IPv4 range written as IPv4-mapped matches IPv4 peers');
  t.equal(formatAddress(new Uint8Array([0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1])), '2001:db8::1', 'RFC 5952 text');
  t.same(allowedOrigins(['*']).any, true, '"*" allows every origin');
});
