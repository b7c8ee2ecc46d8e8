// Debian's nginx in its two roles: the upstream node every gateway sits in front of (a
// fixed JSON-RPC result of a chosen size for a POST), and the no-auth reverse proxy that
// is the gateways' ceiling. Each runs from its own temporary directory (config, pid file,
// error log, temp paths), in the foreground, stopped by its master's pid.
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, startOnPort } from '../lib/proc.js';
import { RPC_PATH, rpcResult } from './rpc.js';

/** What both roles share: where nginx writes, and how long it keeps a client connection. */
function common(dir, workers) {
  return `worker_processes ${workers};
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 8192; }
http {
  access_log off;
  client_body_temp_path ${dir}/client_body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  # nginx closes a client connection after 1000 requests by default; wrk and the gateways
  # would then reconnect, which no other server here makes them do.
  keepalive_requests 1000000;
  keepalive_timeout 75s;
`;
}

async function start(name, config, workers, cpus, files = {}) {
  // nginx's workers drop to "nobody" when started as root: they must be able to read here.
  const dir = mkdtempSync(join(tmpdir(), 'api-auth-bench-nginx-'));
  chmodSync(dir, 0o755);
  try {
    const port = await freePort();
    for (const [file, content] of Object.entries(files)) writeFileSync(join(dir, file), content, { mode: 0o644 });
    writeFileSync(join(dir, 'nginx.conf'), config(dir, port), { mode: 0o644 });
    const server = await startOnPort(
      name,
      'nginx',
      ['-p', dir, '-c', join(dir, 'nginx.conf'), '-e', join(dir, 'error.log'), '-g', 'daemon off;'],
      port,
      { cpus },
    );
    return {
      ...server,
      workers,
      stop: async () => {
        await server.stop();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
}

/**
 * Answers up to this size are written into the config (`return 200 '...'`): nginx reads a
 * config token into a buffer of 4096 bytes, so a longer one does not load.
 */
export const INLINE_RESULT_BYTES = 4000;

/**
 * The upstream node: POST (or GET) `RPC_PATH` answers 200 with a JSON-RPC result of
 * `bytes` bytes, as cheaply as nginx can, because the upstream shares the load's cores
 * with wrk and every microsecond it spends is one wrk cannot. Up to INLINE_RESULT_BYTES,
 * `return 200` from memory (nginx discards the request body); larger, a static file
 * (nginx's static files refuse POST with 405, and `error_page 405 =200 $uri` redirects
 * internally to the same file as a GET after reading the body) whose descriptor stays
 * open between requests (`open_file_cache`: no open, fstat and close per request).
 * Measured with wrk alone against it on a core of its own (2-core EPYC): 100 B from
 * memory 7.7-8.1 µs of nginx CPU per request against 17.8-18.2 µs from the file
 * uncached; 10 kB cached 12.8-14.6 µs against 20.0-23.4 µs.
 */
export function startUpstream({ bytes, workers = 1, cpus = null }) {
  const body = rpcResult(bytes);
  const answer = (dir) =>
    bytes <= INLINE_RESULT_BYTES
      ? // The result is hex digits and JSON punctuation: nothing to escape but the newline.
        `return 200 '${body.toString('latin1').replace(/\n/g, '\\n')}';`
      : `alias ${dir}/result.json;
      error_page 405 =200 $uri;
      open_file_cache max=16 inactive=1h;
      open_file_cache_valid 1h;`;
  const config = (dir, port) => `${common(dir, workers)}
  default_type application/json;
  etag off;
  server {
    listen 127.0.0.1:${port} reuseport;
    location = ${RPC_PATH} {
      ${answer(dir)}
    }
  }
}
`;
  return start(`nginx upstream (${bytes} B)`, config, workers, cpus, { 'result.json': body }).then((server) => ({ ...server, body }));
}

/**
 * nginx as a reverse proxy with no auth at all, keeping connections to the upstream open;
 * serving HTTPS when `tls` (lib/certificate.js's pair) is given.
 */
export function startNginxProxy({ upstreamPort, workers = 1, cpus = null, tls }) {
  const config = (dir, port) => `${common(dir, workers)}
  upstream node {
    server 127.0.0.1:${upstreamPort};
    keepalive 256;
  }
  server {
    listen 127.0.0.1:${port} reuseport${
      tls
        ? ` ssl;
    ssl_certificate ${tls.certFile};
    ssl_certificate_key ${tls.keyFile};
    # nginx 1.22 offers TLS 1.3 only when told (its default gained it in 1.23.4); the
    # other gateways negotiate 1.3 by default.
    ssl_protocols TLSv1.2 TLSv1.3`
        : ''
    };
    location / {
      proxy_pass http://node;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      # A large answer streams through the buffers instead of going to a temp file.
      proxy_max_temp_file_size 0;
    }
  }
}
`;
  return start(`nginx proxy (no auth${tls ? ', TLS' : ''})`, config, workers, cpus);
}

/**
 * nginx proxying WebSocket sessions with no auth at all, as its documentation has it:
 * HTTP/1.1 to the upstream with the client's Upgrade and a Connection: upgrade, and no
 * read timeout to cut a quiet session during the run.
 */
export function startNginxWsProxy({ upstreamPort, workers = 1, cpus = null }) {
  const config = (dir, port) => `${common(dir, workers)}
  map $http_upgrade $connection_upgrade {
    default upgrade;
    '' close;
  }
  server {
    listen 127.0.0.1:${port} reuseport;
    location / {
      proxy_pass http://127.0.0.1:${upstreamPort};
      proxy_http_version 1.1;
      proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection $connection_upgrade;
      proxy_read_timeout 3600s;
      proxy_send_timeout 3600s;
    }
  }
}
`;
  return start('nginx WebSocket proxy (no auth)', config, workers, cpus);
}
