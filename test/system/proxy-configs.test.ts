// The proxy guide's nginx configuration is one an operator can install as it is shown
// (it once had `listen 443 ssl` without a certificate, which `nginx -t` refuses).
// test/http/auth-check.test.ts runs it over plain HTTP, its certificate lines dropped;
// here `nginx -t` checks the block itself, with a certificate at the paths it names.
import t from 'tap';
import { execFile, execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { NGINX_CERTIFICATE, guideBlock, substitute } from '../helpers/front-proxy.js';
import { IS_ROOT } from '../helpers/root.js';
import { tempDir } from '../helpers/server.js';

const run = promisify(execFile);

// `nginx -t` binds what the block listens on (443). It runs in a network namespace of its
// own, so that neither another program on this machine's 443 nor a user's lack of the right
// to bind a port below 1024 decides the verdict: root enters one, any other user enters a
// user namespace first, as its root (where the kernel lets users make one).
const NETNS = IS_ROOT ? ['--net'] : ['--user', '--map-root-user', '--net'];
const netns = spawnSync('unshare', [...NETNS, 'true'], { encoding: 'utf8' });
const ownNetwork =
  netns.status === 0
    ? { skip: false as const }
    : {
        skip: `needs root, or user namespaces open to users: unshare ${NETNS.join(' ')} failed (${(netns.stderr ?? netns.error?.message ?? '').trim()})`,
      };

t.test("the guide's nginx server block passes nginx -t as shown, with its certificate in place", ownNetwork, async (t) => {
  const dir = tempDir(t);
  chmodSync(dir, 0o755);
  const certs = join(dir, 'live');
  mkdirSync(certs);
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-days',
      '1',
      '-subj',
      '/CN=node.example',
      '-keyout',
      join(certs, 'privkey.pem'),
      '-out',
      join(certs, 'fullchain.pem'),
    ],
    { stdio: 'ignore' },
  );
  // Only the certificate's folder is the test's; every other line is the guide's.
  let server = guideBlock('nginx');
  server = substitute(server, NGINX_CERTIFICATE.cert, NGINX_CERTIFICATE.cert.replace('/etc/letsencrypt/live/node.example', certs));
  server = substitute(server, NGINX_CERTIFICATE.key, NGINX_CERTIFICATE.key.replace('/etc/letsencrypt/live/node.example', certs));
  const temp = ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((name) => `    ${name}_temp_path ${dir}/${name};`).join('\n');
  // As root, nginx -t gives its temp folders to the workers' user: root's own here, the one
  // user a user namespace maps.
  writeFileSync(
    join(dir, 'nginx.conf'),
    `user root root;
pid ${dir}/nginx.pid;
events { }
http {
    access_log off;
${temp}
${server}}
`,
  );
  const checked = await run('unshare', [
    ...NETNS,
    'nginx',
    '-t',
    '-p',
    dir,
    '-c',
    join(dir, 'nginx.conf'),
    '-e',
    join(dir, 'error.log'),
  ]).then(
    ({ stderr }) => ({ ok: true, stderr }),
    (error: { stderr: string }) => ({ ok: false, stderr: error.stderr }),
  );
  t.ok(checked.ok, `nginx -t accepts it ${checked.stderr}`);
  t.match(checked.stderr, /syntax is ok/, 'nginx says its syntax is ok');
});
