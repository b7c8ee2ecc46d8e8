// The proxies operators already run, for real, in front of api-auth and an upstream:
// Debian's nginx (nginx-light, with auth_request) and Caddy (forward_auth). Each runs
// from a temporary folder with the configuration the README shows, in the foreground,
// and is killed when its test ends.
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, watch, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Test } from 'tap';
import { tempDir } from './server.js';
import { closedPort } from './upstream.js';

export interface FrontProxy {
  url: string;
  /** What the proxy wrote to stderr (its errors). */
  stderr(): string;
}

/** nginx.conf as the README shows it: auth_request to /ext/auth/check, the token service passed through. */
export function nginxConfig(port: number, apiAuth: number, upstream: number): string {
  return `    listen 127.0.0.1:${port};
    # nginx speaks HTTP/1.0 to what it proxies by default, which api-auth (uWebSockets.js) refuses with 505.
    proxy_http_version 1.1;
    location = /ext/auth {
        proxy_pass http://127.0.0.1:${apiAuth};
    }
    location / {
        auth_request /api-auth-check;
        # The node never sees the token.
        proxy_set_header Authorization "";
        proxy_pass http://127.0.0.1:${upstream};
    }
    location = /api-auth-check {
        internal;
        proxy_pass http://127.0.0.1:${apiAuth}/ext/auth/check;
        proxy_pass_request_body off;
        proxy_set_header Content-Length "";
        proxy_set_header X-Original-URI $request_uri;
        proxy_set_header X-Original-Method $request_method;
    }`;
}

/** The Caddyfile's site as the README shows it: forward_auth to /ext/auth/check. */
export function caddySite(port: number, apiAuth: number, upstream: number): string {
  return `http://127.0.0.1:${port} {
	handle /ext/auth {
		reverse_proxy 127.0.0.1:${apiAuth}
	}
	handle {
		forward_auth 127.0.0.1:${apiAuth} {
			uri /ext/auth/check
		}
		# The node never sees the token.
		reverse_proxy 127.0.0.1:${upstream} {
			header_up -Authorization
		}
	}
}`;
}

/** nginx in front: api-auth at `apiAuth`, the node at `upstream` (ports on 127.0.0.1). */
export async function startNginx(t: Test, apiAuth: number, upstream: number): Promise<FrontProxy> {
  const dir = tempDir(t);
  // nginx's workers drop to "nobody" when started as root: they must be able to read here.
  chmodSync(dir, 0o755);
  const port = await closedPort();
  writeFileSync(join(dir, 'nginx.conf'), `worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 64; }
http {
    access_log off;
    client_body_temp_path ${dir}/client_body;
    proxy_temp_path ${dir}/proxy;
    fastcgi_temp_path ${dir}/fastcgi;
    uwsgi_temp_path ${dir}/uwsgi;
    scgi_temp_path ${dir}/scgi;
    server {
${nginxConfig(port, apiAuth, upstream)}
    }
}
`);
  // nginx listens before it writes its pid file: once the file is there, connections are taken.
  const pidFile = join(dir, 'nginx.pid');
  const written = new Promise<void>((resolve) => {
    const watcher = watch(dir, () => {
      if (existsSync(pidFile)) {
        watcher.close();
        resolve();
      }
    });
    t.teardown(() => watcher.close());
  });
  const child = run(t, 'nginx', ['-p', dir, '-c', join(dir, 'nginx.conf'), '-e', join(dir, 'error.log'), '-g', 'daemon off;']);
  await Promise.race([written, child.failed]);
  return { url: `http://127.0.0.1:${port}`, stderr: child.stderr };
}

/** Caddy in front: api-auth at `apiAuth`, the node at `upstream` (ports on 127.0.0.1). */
export async function startCaddy(t: Test, apiAuth: number, upstream: number): Promise<FrontProxy> {
  const dir = tempDir(t);
  const port = await closedPort();
  const file = join(dir, 'Caddyfile');
  writeFileSync(file, `{
	admin off
	auto_https off
}

${caddySite(port, apiAuth, upstream)}
`);
  const child = run(t, 'caddy', ['run', '--config', file, '--adapter', 'caddyfile'], { XDG_DATA_HOME: dir, XDG_CONFIG_HOME: dir, HOME: dir });
  await Promise.race([child.line(/serving initial configuration/), child.failed]);
  return { url: `http://127.0.0.1:${port}`, stderr: child.stderr };
}

interface Child {
  process: ChildProcess;
  stderr(): string;
  /** Rejects if the program exits (it should run until the test ends). */
  failed: Promise<never>;
  /** Resolves once stderr has had a line matching. */
  line(match: RegExp): Promise<void>;
}

function run(t: Test, command: string, args: readonly string[], env: NodeJS.ProcessEnv = {}): Child {
  const child = spawn(command, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  const seen = new Set<() => void>();
  child.stderr!.setEncoding('utf8');
  child.stderr!.on('data', (chunk: string) => {
    err += chunk;
    for (const check of [...seen]) check();
  });
  const failed = new Promise<never>((_, reject) => {
    child.once('exit', (code, signal) => reject(new Error(`${command} exited (${code ?? signal}); stderr:\n${err}`)));
    child.once('error', (error) => reject(new Error(`${command} could not start: ${error.message}`)));
  });
  failed.catch(() => undefined);
  t.teardown(async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    // SIGTERM: nginx's master then ends its workers, which a SIGKILL would leave behind.
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(timer);
  });
  return {
    process: child,
    stderr: () => err,
    failed,
    line: (match) => new Promise((resolve) => {
      const check = (): void => {
        if (match.test(err)) {
          seen.delete(check);
          resolve();
        }
      };
      seen.add(check);
      check();
    }),
  };
}
