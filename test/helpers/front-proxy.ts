// The proxies operators already run, for real, in front of api-auth and an upstream:
// Debian's nginx (nginx-light, with auth_request) and Caddy (forward_auth). Each runs
// from a temporary folder with the configuration the proxy guide shows
// (docs/guides/behind-a-proxy.md, read from it, so the two cannot drift), in the
// foreground, and is killed when its test ends.
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, readFileSync, watch, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Test } from 'tap';
import { ROOT, tempDir } from './server.js';
import { closedPort } from './upstream.js';

export interface FrontProxy {
  url: string;
  /** What the proxy wrote to stderr (its errors). */
  stderr(): string;
}

/** The proxy guide, where the configurations are shown. */
export const PROXY_GUIDE = 'docs/guides/behind-a-proxy.md';

/** The proxy guide's block fenced as `lang` (the only one). */
export function guideBlock(lang: string): string {
  const blocks = [...readFileSync(join(ROOT, PROXY_GUIDE), 'utf8').matchAll(new RegExp('^```' + lang + '\\n([\\s\\S]*?)^```$', 'gm'))];
  if (blocks.length !== 1) throw new Error(`${PROXY_GUIDE} should have one ${lang} block, not ${blocks.length}`);
  return blocks[0][1];
}

/**
 * Replaces `from` in the guide's configuration with `to`, every time; throws when the
 * guide no longer says `from`, so a change there cannot pass here unseen.
 */
export function substitute(text: string, from: string, to: string): string {
  if (!text.includes(from))
    throw new Error(`the guide's configuration no longer has ${JSON.stringify(from)}: update test/helpers/front-proxy.ts`);
  return text.split(from).join(to);
}

/** The certificate lines of the guide's nginx block, which the tests' plain HTTP drops. */
export const NGINX_CERTIFICATE = {
  cert: 'ssl_certificate /etc/letsencrypt/live/node.example/fullchain.pem;',
  key: 'ssl_certificate_key /etc/letsencrypt/live/node.example/privkey.pem;',
};

/**
 * The server block of nginx.conf as the guide shows it (auth_request to /ext/auth/check,
 * the token service passed through), its contents only: the ports are the test's, and it
 * listens on plain HTTP on loopback instead of the guide's `listen 443 ssl;` and its
 * certificate.
 */
export function nginxConfig(port: number, apiAuth: number, upstream: number): string {
  let text = guideBlock('nginx');
  text = substitute(text, 'listen 443 ssl;', `listen 127.0.0.1:${port};`);
  text = substitute(text, `    ${NGINX_CERTIFICATE.cert}\n`, '');
  text = substitute(text, `    ${NGINX_CERTIFICATE.key}\n`, '');
  text = substitute(text, '127.0.0.1:9650', `127.0.0.1:${apiAuth}`);
  text = substitute(text, '127.0.0.1:9652', `127.0.0.1:${upstream}`);
  const body = /^server \{\n([\s\S]*)\n\}\n$/.exec(text);
  if (body === null) throw new Error("the guide's nginx block should be one server { ... }");
  return body[1];
}

/**
 * The Caddyfile's site as the guide shows it (forward_auth to /ext/auth/check): the ports
 * are the test's, and the site is plain HTTP on loopback instead of `node.example`.
 */
export function caddySite(port: number, apiAuth: number, upstream: number): string {
  let text = guideBlock('caddyfile');
  text = substitute(text, 'node.example {', `http://127.0.0.1:${port} {`);
  text = substitute(text, '127.0.0.1:9650', `127.0.0.1:${apiAuth}`);
  text = substitute(text, '127.0.0.1:9652', `127.0.0.1:${upstream}`);
  return text.replace(/\n$/, '');
}

/** nginx in front: api-auth at `apiAuth`, the node at `upstream` (ports on 127.0.0.1). */
export async function startNginx(t: Test, apiAuth: number, upstream: number): Promise<FrontProxy> {
  const dir = tempDir(t);
  // nginx's workers drop to "nobody" when started as root: they must be able to read here.
  chmodSync(dir, 0o755);
  const port = await closedPort();
  writeFileSync(
    join(dir, 'nginx.conf'),
    `worker_processes 1;
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
`,
  );
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
  writeFileSync(
    file,
    `{
	admin off
	auto_https off
}

${caddySite(port, apiAuth, upstream)}
`,
  );
  const child = run(t, 'caddy', ['run', '--config', file, '--adapter', 'caddyfile'], {
    XDG_DATA_HOME: dir,
    XDG_CONFIG_HOME: dir,
    HOME: dir,
  });
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
    line: (match) =>
      new Promise((resolve) => {
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
