// The core in Go (go/, README "Go"): `go test ./...` (the shared vectors on both builds,
// the gate middleware, the follower on a real etcd), then a Go node and an api-auth
// gateway in one fleet on a real etcd: tokens issued, revoked and outdated through the
// gateway hold on the Go node as soon as the call returns, the Go node refuses exactly as
// the gateway does, it fences itself when stopped or cut off, and the key schema
// (docs/fleet-keys.md) is read on the Go side as the gateways write it. Go builds offline
// from the module cache (GOPROXY=off), as CI fills it (.ci/run).
import t from 'tap';
import type { Test } from 'tap';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { Etcd3 } from 'etcd3';
import { authUrl, call, changePassword, newToken, REASONS, refusalBody, revokeToken, REVOKED, tamperLast } from '../helpers/auth.js';
import { enableAuth, makeCertificates, seededEtcd, startEtcd, startGateway } from '../helpers/etcd.js';
import type { Etcd, Gateway } from '../helpers/etcd.js';
import { jsonrpc, post, request } from '../helpers/http.js';
import type { HttpResponse } from '../helpers/http.js';
import { launchProgram, randomPassword, ROOT, sleep, tempDir } from '../helpers/server.js';
import type { Running } from '../helpers/server.js';
import { GO, GO_ENV, GO_MODULE } from '../helpers/go.js';

// On a fresh machine `go test` first compiles the etcd client and gRPC: minutes on two cores.
t.setTimeout(900_000);

const MODULE = GO_MODULE;
const FIXTURE = join(MODULE, 'fleet', 'testdata', 'fleet-keys.json');
const GATEWAY_LEASE = ['--cluster-lease', '3s'];
const NODE_LEASE = '5s';
const INFO = '/ext/info';
const CALL = JSON.stringify({ jsonrpc: '2.0', method: 'info.getNodeVersion', id: 1 });

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function go(args: readonly string[], input?: string): Promise<Run> {
  return new Promise((done, reject) => {
    const child = execFile(GO!, args, { cwd: MODULE, env: GO_ENV, timeout: 600_000, maxBuffer: 64 << 20 }, (error, stdout, stderr) => {
      if (error && typeof error.code !== 'number') reject(new Error(`go ${args.join(' ')}: ${error.message}\n${stderr}`));
      else done({ code: error ? Number(error.code) : 0, stdout, stderr });
    });
    if (input !== undefined) child.stdin!.end(input);
  });
}

let built: Promise<{ node: string; keys: string }> | undefined;
/**
 * The example node and the key decoder, built once into a temporary folder, by one go
 * build. Without a symbol table and DWARF (-s -w): programs to run, not to debug, and
 * their link takes about half the CPU time.
 */
function programs(): Promise<{ node: string; keys: string }> {
  built ??= (async () => {
    const out = mkdtempSync(join(tmpdir(), 'api-auth-go-'));
    t.teardown(() => rmSync(out, { recursive: true, force: true }));
    const result = await go(['build', '-ldflags=-s -w', '-o', `${out}/`, './cmd/api-auth-node', './cmd/fleet-keys']);
    if (result.code !== 0) throw new Error(`go build ./cmd/api-auth-node ./cmd/fleet-keys failed:\n${result.stderr}`);
    return { node: join(out, 'api-auth-node'), keys: join(out, 'fleet-keys') };
  })();
  return built;
}

/** The Go example node in the fleet, guarding `path`; resolves once it listens. */
async function startNode(t: Test, etcd: Etcd, extra: readonly string[] = []): Promise<Running & { url: string }> {
  const { node } = await programs();
  const run = launchProgram(t, [
    node,
    ['--cluster-etcd', etcd.url, '--cluster-lease', NODE_LEASE, '--http-port', '0', '--rpc-path', INFO, ...extra],
  ]);
  const listening = await run.waitForLog((l) => l.msg === 'listening', 60_000);
  return { ...run, url: `http://127.0.0.1:${listening.port}` };
}

/** What a client sees of a refusal: status, content type, challenge and body. */
function seen(r: HttpResponse): { status: number; type?: string; challenge?: string; body: string } {
  return { status: r.status, type: r.headers['content-type'], challenge: r.headers['www-authenticate'], body: r.text };
}

async function waitForStatus(base: string, token: string, status: number): Promise<HttpResponse> {
  for (const started = Date.now(); Date.now() - started < 60_000; ) {
    const r = await call(base, INFO, token);
    if (r.status === status) return r;
    await new Promise((done) => setTimeout(done, 100));
  }
  throw new Error(`no ${status} within 60 s`);
}

/** A fleet of one api-auth gateway and one Go node on a fresh etcd, with a password of its own. */
async function gatewayAndNode(t: Test): Promise<{ etcd: Etcd; password: string; gateway: Gateway; node: Running & { url: string } }> {
  const etcd = await startEtcd(t);
  const password = randomPassword();
  const passwordFile = join(tempDir(t), 'password');
  writeFileSync(passwordFile, password, { mode: 0o600 });
  const gateway = await startGateway(t, etcd, passwordFile, GATEWAY_LEASE);
  const node = await startNode(t, etcd);
  return { etcd, password, gateway, node };
}

/** The fleet's keys in etcd, names without the prefix. */
async function fleetKeys(etcd: Etcd): Promise<Record<string, string>> {
  const client = new Etcd3({ hosts: etcd.url });
  try {
    const all = await client.getAll().prefix('/api-auth/').strings();
    return Object.fromEntries(Object.entries(all).map(([k, v]) => [k.slice('/api-auth/'.length), v]));
  } finally {
    client.close();
  }
}

/**
 * The shape of a key space: each key's name with its numbers as #, and its value's kind
 * (a JSON object's member names, a JSON array, a number, or text). A change of schema on
 * the TypeScript side changes it, and then the Go side must be held to it anew.
 */
function shape(kvs: Record<string, string>): string[] {
  const kinds = new Set<string>();
  for (const [name, value] of Object.entries(kvs)) {
    let kind = 'text';
    try {
      const parsed: unknown = JSON.parse(value);
      kind = Array.isArray(parsed)
        ? 'array'
        : typeof parsed === 'object' && parsed !== null
          ? `{${Object.keys(parsed).sort().join(',')}}`
          : typeof parsed;
    } catch {
      /* text */
    }
    kinds.add(`${name.replace(/[0-9a-f]{6,}$|\d+$/, '#')} ${kind}`);
  }
  return [...kinds].sort();
}

t.test('the core the Go module embeds is the one npm run build made, and its SHA-256 is pinned', async (t) => {
  const source = readFileSync(join(MODULE, 'core', 'wasm.go'), 'utf8');
  for (const [file, constant] of [
    ['core.wasm', 'PlainSHA256'],
    ['core-threads.wasm', 'ThreadsSHA256'],
  ]) {
    const built = readFileSync(join(ROOT, 'build', file));
    const embedded = readFileSync(join(MODULE, 'core', 'wasm', file));
    t.ok(built.equals(embedded), `go/core/wasm/${file} is build/${file} (else: cd go && go generate ./... and update the pin)`);
    const sum = createHash('sha256').update(built).digest('hex');
    t.match(source, new RegExp(`${constant}\\s*=\\s*"${sum}"`), `${constant} pins build/${file}`);
  }
});

// Go is a tool the suite needs, as nginx and etcd are: without it these checks fail, with
// one line saying what to install, rather than quietly not running (.ci/run installs it).
if (GO === undefined) {
  t.fail('Go is not installed: install Go 1.26 (as .ci/run does); go test and the Go fleet test cannot run without it');
} else {
  // The module's own checks, begun now and judged in the last test: they mostly wait (go
  // test's follower tests on their own etcd, with leases), so they run while the fleet
  // tests below do, each with its own etcd on ports of its own.
  const checks = (async () => {
    const gofmt = await new Promise<Run>((done) =>
      execFile(join(dirname(GO!), 'gofmt'), ['-l', '.'], { cwd: MODULE }, (error, stdout, stderr) =>
        done({ code: error ? 1 : 0, stdout, stderr }),
      ),
    );
    const vet = await go(['vet', './...']);
    // staticcheck, pinned as a tool of the module (go.mod's tool directive, go.sum).
    const staticcheck = await go(['tool', 'staticcheck', './...']);
    const test = await go(['test', '-count=1', '-v', './...']);
    return { gofmt, vet, staticcheck, test };
  })();
  // Judged (rejection and all) by the last test; until then, not an unhandled rejection.
  checks.catch(() => undefined);

  t.test(
    'a Go node and an api-auth gateway share a fleet: tokens, refusals, revokes, a password change, SIGSTOP, etcd killed',
    async (t) => {
      const { etcd, password, gateway, node } = await gatewayAndNode(t);

      // A token issued through api-auth works on the Go node, through to its handler.
      const token = await newToken(gateway.url, password, [INFO]);
      const granted = await call(node.url, INFO, token);
      t.equal(granted.status, 200, 'a token of the fleet is served');
      t.same(JSON.parse(granted.text), { jsonrpc: '2.0', result: 'info.getNodeVersion', id: 1 }, "by the node's handler");

      // Every refusal is the gateway's, byte for byte: the same request to both.
      const scoped = (
        await jsonrpc(`${gateway.url}/ext/auth`, 'auth.newToken', { password, endpoints: [INFO], methods: ['info.getNodeID'] })
      ).result.token as string;
      const elsewhere = await newToken(gateway.url, password, ['/ext/bc/X/rpc']);
      const same = async (what: string, path: string, authorization?: string, body?: string): Promise<void> => {
        const [fromGateway, fromNode] = await Promise.all([
          post(gateway.url, path, body ?? CALL, { authorization }),
          post(node.url, path, body ?? CALL, { authorization }),
        ]);
        // A refused call is a JSON-RPC error in a 200; anything else is refused by its status.
        t.ok(fromGateway.status !== 200 || /"error":\{"code":-32047,/.test(fromGateway.text), `${what}: refused by the gateway`);
        t.same(seen(fromNode), seen(fromGateway), `${what}: the Go node answers as the gateway (${fromGateway.status})`);
      };
      await same('no token', INFO);
      await same('not Bearer', INFO, `Basic ${token}`);
      await same('malformed', INFO, 'Bearer abc');
      await same('forged', INFO, `Bearer ${tamperLast(token)}`);
      await same('not granted', INFO, `Bearer ${elsewhere}`);
      await same('a bad path', '/ext/%2e%2e/info', `Bearer ${token}`);
      await same('a method outside the scope', INFO, `Bearer ${scoped}`);
      await same(
        'a batch of refused calls',
        INFO,
        `Bearer ${scoped}`,
        JSON.stringify([
          { jsonrpc: '2.0', method: 'info.peers', id: 1 },
          { jsonrpc: '2.0', method: 'info.getNodeVersion', id: 'b' },
        ]),
      );
      await same('a body that is not JSON', INFO, `Bearer ${scoped}`, '{"method":');
      await same('no body', INFO, `Bearer ${scoped}`, '');
      t.equal(
        (await post(node.url, INFO, JSON.stringify({ jsonrpc: '2.0', method: 'info.getNodeID', id: 1 }), { token: scoped })).status,
        200,
        'a method inside the scope is served',
      );

      // A revoke through api-auth is in force on the Go node as the call returns: fresh connections, no sleeps.
      for (let round = 0; round < 15; round++) {
        const live = await newToken(gateway.url, password, [INFO]);
        t.equal((await call(node.url, INFO, live)).status, 200, `round ${round}: served`);
        t.same(await revokeToken(gateway.url, password, live), REVOKED, `round ${round}: revoked`);
        const after = await call(node.url, INFO, live);
        t.same(
          seen(after),
          { status: 401, type: 'application/json', challenge: 'Bearer', body: refusalBody(REASONS.revoked) },
          `round ${round}: refused at once`,
        );
      }
      const revoked = await newToken(gateway.url, password, [INFO]);
      await revokeToken(gateway.url, password, revoked);
      await same('revoked', INFO, `Bearer ${revoked}`);

      // A rotation's end reaches the Go node as the revoked/ key that the gateway records once it is due.
      const rotating = await newToken(gateway.url, password, [INFO]);
      const rotated = await jsonrpc(authUrl(gateway.url), 'auth.rotateToken', { password, token: rotating });
      t.type((rotated.result as { token?: unknown }).token, 'string', 'rotated, with no overlap');
      while ((await call(node.url, INFO, rotating)).status === 200) await sleep(100);
      await same('the old token of a rotation', INFO, `Bearer ${rotating}`);

      // The gateway counts the Go node among the members its writes wait for.
      const scraper = await newToken(gateway.url, password, ['/ext/metrics']);
      t.match(
        (await request(gateway.url, '/ext/metrics', { headers: [['Authorization', `Bearer ${scraper}`]] })).text,
        /^api_auth_fleet_members 2$/m,
        'two members: the gateway and the Go node',
      );

      // The key schema: what the gateways wrote is what the Go side reads (docs/fleet-keys.md).
      const next = randomPassword();
      t.same(await changePassword(gateway.url, password, next), { success: true }, 'a new password');
      await same('a token of the earlier password', INFO, `Bearer ${token}`);
      const fresh = await newToken(gateway.url, next, [INFO]);
      t.equal((await call(node.url, INFO, fresh)).status, 200, 'a token of the new password is served');
      const kvs = await fleetKeys(etcd);
      const { keys } = await programs();
      const decoded = await new Promise<Run>((done) => {
        const child = execFile(keys, [], (error, stdout, stderr) => done({ code: error ? 1 : 0, stdout, stderr }));
        child.stdin!.end(JSON.stringify(kvs));
      });
      t.equal(decoded.code, 0, "go/fleet decodes the gateways' keys", { output: decoded.stdout + decoded.stderr });
      const state = JSON.parse(decoded.stdout) as {
        key: string;
        generation: number;
        grants: { id: number; entries: string[] }[];
        blocks: { start: number; end: number }[];
        revoked: { serial: number }[];
        members: { follower: boolean }[];
      };
      t.equal(state.key, kvs.key, 'the token key');
      t.equal(state.generation, 1, 'the generation after one password change');
      t.same(
        state.grants.map((g) => g.entries),
        [[INFO], [INFO, '', 'info.getNodeID'], ['/ext/bc/X/rpc'], ['/ext/metrics']],
        'the grants, by id',
      );
      t.equal(state.revoked.length, 17, "every revocation, a rotation's end included");
      t.ok(state.blocks.length > 0 && state.blocks.every((b) => b.end - b.start === 4096), 'the serial blocks');
      t.same(state.members.map((m) => m.follower).sort(), [false, true], 'the gateway, and the Go node as a follower');
      if (process.env.API_AUTH_WRITE_FLEET_FIXTURE === '1') writeFileSync(FIXTURE, JSON.stringify(kvs, null, 2) + '\n');
      const fixture = JSON.parse(readFileSync(FIXTURE, 'utf8')) as Record<string, string>;
      t.same(
        shape(kvs),
        shape(fixture),
        'the gateways still write the keys of go/fleet/testdata/fleet-keys.json, which go test decodes ' +
          '(a change of schema: update docs/fleet-keys.md and go/fleet, then API_AUTH_WRITE_FLEET_FIXTURE=1 npx tap test/fleet/go.test.ts)',
      );

      // Stopped (SIGSTOP) while a revoke goes through: once continued, never 200 for that token.
      const stopped = await newToken(gateway.url, next, [INFO]);
      t.equal((await call(node.url, INFO, stopped)).status, 200);
      node.child.kill('SIGSTOP');
      t.teardown(() => {
        node.child.kill('SIGCONT');
      });
      t.same(await revokeToken(gateway.url, next, stopped), REVOKED, "the revoke returns once the stopped node's lease has lapsed");
      node.child.kill('SIGCONT');
      const first = await call(node.url, INFO, stopped);
      t.not(first.status, 200, `the continued node does not serve the revoked token (got ${first.status})`);
      if (first.status === 503) t.match(JSON.parse(first.text), { error: { code: -32046 } }, 'a clear 503');
      await node.waitForLines((l) => l.msg === 'serving in the fleet', 2, 30_000);
      t.same(seen(await call(node.url, INFO, stopped)).body, refusalBody(REASONS.revoked), 'rejoined: refused as revoked');
      t.equal((await call(node.url, INFO, fresh)).status, 200, 'and serving the others');

      // etcd killed: the node serves until its lease lapses, then 503, and recovers by itself.
      await etcd.kill();
      t.equal((await call(node.url, INFO, fresh)).status, 200, 'serving while its lease holds');
      const fenced = await waitForStatus(node.url, fresh, 503);
      t.same(seen(fenced), seen(await call(gateway.url, INFO, fresh)), 'then the 503 the gateway answers too');
      await etcd.start();
      await waitForStatus(node.url, fresh, 200);
      // The gateway rejoins on its own schedule: a change waits until it serves again too.
      await waitForStatus(gateway.url, fresh, 200);
      const last = await newToken(gateway.url, next, [INFO]);
      t.same(await revokeToken(gateway.url, next, last), REVOKED, 'the fleet takes changes again');
      t.equal((await call(node.url, INFO, last)).status, 401, 'and the recovered node holds them');
      for (const line of node
        .stdout()
        .split('\n')
        .filter((l) => l !== ''))
        t.doesNotThrow(() => JSON.parse(line), 'a JSON line');
    },
  );

  t.test("a Go node takes its share of each token's limits, and the gateways count it in G", async (t) => {
    const { etcd, password, gateway, node } = await gatewayAndNode(t);
    const scraper = await newToken(gateway.url, password, ['/ext/metrics']);
    const members = async (): Promise<string> =>
      /^api_auth_fleet_members (\d+)$/m.exec(
        (await request(gateway.url, '/ext/metrics', { headers: [['Authorization', `Bearer ${scraper}`]] })).text,
      )?.[1] ?? '';
    // The gateway's watch delivers the Go node's member key: an order of events, polled.
    while ((await members()) !== '2') await new Promise((resolve) => setTimeout(resolve, 50));
    const made = await jsonrpc(`${gateway.url}/ext/auth`, 'auth.newToken', { password, endpoints: [INFO], rateLimit: '1/h', burst: 4 });
    const token = made.result.token as string;
    // G = 2: each member lets through ceil(4 / 2) = 2 of the burst, and the third is 429.
    const through = async (base: string): Promise<number[]> => {
      const statuses: number[] = [];
      for (let i = 0; i < 3; i++) statuses.push((await call(base, INFO, token)).status);
      return statuses;
    };
    t.same(await through(node.url), [200, 200, 429], 'the Go node: its half of the burst, then 429 (it enforced the whole burst before)');
    t.same(await through(gateway.url), [200, 200, 429], 'the gateway: its half too (it left the Go node out of G before)');
    const keys = await fleetKeys(etcd);
    const nodeKey = Object.entries(keys).find(([name, value]) => name.startsWith('members/') && value.includes('"follower":true'));
    t.match(
      JSON.parse(nodeKey?.[1] ?? '{}'),
      { follower: true, limitShare: true },
      'the Go node says it enforces its share (docs/fleet-keys.md)',
    );
    await node.stop();
  });

  t.test('a Go node never tidies: with its member key the lowest, a gateway still deletes what expired', async (t) => {
    // A fleet for the node to follow, seeded as its first gateway would seed it, with a
    // record whose checks cost next to nothing: this test is about the clean-up.
    const { etcd, passwordFile } = await seededEtcd(t);
    const expired = `/api-auth/revoked/${String(1).padStart(16, '0')}`;
    const client = new Etcd3({ hosts: etcd.url });
    t.teardown(() => client.close());
    await client.put(expired).value(String(Math.floor(Date.now() / 1000) - 60));
    // etcd hands out lease ids in increasing order: the node's member key sorts before the gateway's.
    await startNode(t, etcd);
    const gateway = await startGateway(t, etcd, passwordFile, GATEWAY_LEASE);
    const members = Object.entries(await client.getAll().prefix('/api-auth/members/').strings()).sort();
    t.match(members[0][1], /"follower":true/, 'the Go node holds the lowest member key');
    let gone = false;
    for (const started = Date.now(); !gone && Date.now() - started < 30_000; await new Promise((done) => setTimeout(done, 100))) {
      gone = (await client.get(expired).string()) === null;
    }
    t.ok(gone, 'the gateway, the lowest member that writes, deleted the expired revocation');
    t.equal((await request(gateway.url, '/ext/auth/health')).status, 200);
  });

  t.test("a Go node on a secured etcd: TLS with client certificates, or an etcd user limited to the fleet's prefix", async (t) => {
    const certs = makeCertificates(tempDir(t));
    const secured = await startEtcd(t, { certFile: certs.server.cert, keyFile: certs.server.key, clientCaFile: certs.ca });
    const plain = await startEtcd(t);
    const etcdPassword = randomPassword();
    const etcdPasswordFile = join(tempDir(t), 'etcd-password');
    writeFileSync(etcdPasswordFile, `${etcdPassword}\n`, { mode: 0o600 });
    await enableAuth(plain, [
      { name: 'gateway', password: etcdPassword, prefixes: ['/api-auth/', '/api-auth.throttle/', '/api-auth.usage/'] },
      { name: 'node', password: etcdPassword, prefixes: ['/api-auth/'] },
    ]);
    const tls = ['--cluster-etcd-ca', certs.ca, '--cluster-etcd-cert', certs.client.cert, '--cluster-etcd-key', certs.client.key];
    for (const [what, etcd, gatewayFlags, nodeFlags] of [
      ['TLS and a client certificate', secured, tls, tls],
      [
        'an etcd user',
        plain,
        ['--cluster-etcd-user', 'gateway', '--cluster-etcd-password-file', etcdPasswordFile],
        ['--cluster-etcd-user', 'node', '--cluster-etcd-password-file', etcdPasswordFile],
      ],
    ] as const) {
      const password = randomPassword();
      const passwordFile = join(tempDir(t), 'password');
      writeFileSync(passwordFile, password, { mode: 0o600 });
      const gateway = await startGateway(t, etcd, passwordFile, [...GATEWAY_LEASE, ...gatewayFlags]);
      const node = await startNode(t, etcd, nodeFlags);
      const token = await newToken(gateway.url, password, [INFO]);
      t.equal((await call(node.url, INFO, token)).status, 200, `${what}: a token of the fleet is served`);
      t.same(await revokeToken(gateway.url, password, token), REVOKED);
      t.equal((await call(node.url, INFO, token)).status, 401, `${what}: revoked as the call returns`);
      t.notOk(node.stdout().includes(etcdPassword), `${what}: the etcd password appears in no log line`);
    }
    const { node } = await programs();
    for (const [args, message] of [
      [['--cluster-etcd', plain.url, '--cluster-etcd-ca', certs.ca], /need https:\/\/ URLs/],
      [['--cluster-etcd', secured.url, '--cluster-etcd-cert', certs.client.cert], /--cluster-etcd-cert and --cluster-etcd-key go together/],
      [['--cluster-etcd', plain.url, '--cluster-etcd-user', 'node'], /--cluster-etcd-user and --cluster-etcd-password-file go together/],
    ] as const) {
      const run = launchProgram(t, [node, [...args]]);
      t.same(await run.waitForExit(), { code: 2, signal: null }, `${args.slice(2).join(' ')}: exit 2`);
      t.match(JSON.parse(run.stdout().trim()), { level: 'ERROR', msg: message, code: 'USAGE' }, 'one JSON line that says why');
    }
  });

  t.test(
    'go/ is gofmt-clean, vet-clean and staticcheck-clean, and go test ./... passes: the vectors on both builds, the gate, the follower on etcd',
    async (t) => {
      const { gofmt, vet, staticcheck, test } = await checks;
      t.equal(gofmt.stdout, '', 'gofmt -l lists no file');
      t.equal(vet.code, 0, 'go vet ./...', { stderr: vet.stderr });
      t.equal(staticcheck.code, 0, 'go tool staticcheck ./... finds nothing', { output: staticcheck.stdout + staticcheck.stderr });
      t.equal(test.code, 0, 'go test ./...', {
        output:
          test.stdout
            .split('\n')
            .filter((l) => /FAIL|panic|_test\.go/.test(l))
            .slice(0, 40)
            .join('\n') + test.stderr,
      });
      for (const pkg of ['core', 'gate', 'fleet'])
        t.match(test.stdout, new RegExp(`^ok\\s+api-auth/go/${pkg}\\s`, 'm'), `go/${pkg} passed`);
      for (const run of ['auto/core.wasm', 'auto/core-threads.wasm', 'interpreter/core.wasm', 'interpreter/core-threads.wasm']) {
        t.match(test.stdout, new RegExp(`--- PASS: TestVectors/${run.replace('.', '\\.')}`), `the vectors pass on ${run}`);
      }
      const cases = (JSON.parse(readFileSync(join(ROOT, 'test/vectors/core-vectors.json'), 'utf8')) as { cases: unknown[] }).cases.length;
      t.equal(test.stdout.split('\n').filter((l) => l.includes(`${cases} passed, 0 failed`)).length, 4, `all ${cases} cases, four times`);
    },
  );
}
