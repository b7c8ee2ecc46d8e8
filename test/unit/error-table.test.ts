// One error table: every error class of api-auth carries a stable API_AUTH_*
// code, and the HTTP status it is answered with or the exit code it ends a command with,
// all in host/errors.ts; a broken invariant is one class, InvariantError; and an operator
// command that fails in a way nobody foresaw exits 1, never 3, which says "unreachable"
// and which a script may retry.
import t from 'tap';
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as library from '../../build/host/index.js';
import { Core } from '../../build/host/core/core.js';
import { coreModule } from '../../build/host/core/module.js';
import { MAIN, PROGRAM_ENV, ROOT, tempDir, untracked } from '../helpers/server.js';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** `api-auth ...args` in a process of its own, as an operator runs it: its exit code, stdout and stderr. */
function operator(args: readonly string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(...untracked(process.execPath, [MAIN, ...args]), {
      cwd: ROOT,
      env: PROGRAM_ENV,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

t.test('an operator command that fails unforeseen exits 1 with one line, and a node that is not there still exits 3', async (t) => {
  // A node that answers auth.listTokens with a list whose entry is null: the command's own
  // table cannot be made, which no rule of the command foresees.
  const node = createServer((req, res) => {
    req.resume();
    req.on('end', () =>
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"jsonrpc":"2.0","result":{"tokens":[null]},"id":1}'),
    );
  });
  await new Promise<void>((listening) => node.listen(0, '127.0.0.1', listening));
  t.teardown(() => new Promise<void>((closed) => node.close(() => closed())));
  const uri = `http://127.0.0.1:${(node.address() as AddressInfo).port}`;
  const passwordFile = join(tempDir(t), 'password');
  writeFileSync(passwordFile, 'correct horse battery staple\n', { mode: 0o600 });

  const plain = await operator(['token', 'list', '--uri', uri, '--password-file', passwordFile]);
  t.equal(plain.code, library.OperatorExitCode.Failed, 'exit 1');
  t.match(plain.stderr, /^api-auth: unexpected failure: [^\n]+\n$/, 'one line on stderr says it was unforeseen');
  t.equal(plain.stdout, '', 'nothing on stdout');

  await new Promise<void>((closed) => node.close(() => closed()));
  const gone = await operator(['token', 'list', '--uri', uri, '--password-file', passwordFile]);
  t.equal(gone.code, library.OperatorExitCode.Unreachable, 'the node gone: exit 3, unreachable');
  t.match(gone.stderr, /^api-auth: cannot reach .*connection refused/);
});

t.test('every JSON-RPC code has its stable code and status, and an RpcError answers with them', async (t) => {
  const codes = Object.values(library.RpcCode);
  // -32005 is two names (Throttled, RateLimited) of one code: its entry is the throttle's, LIMIT_ERRORS has the rate's.
  t.same(Object.keys(library.RPC_ERRORS).map(Number).sort(), [...new Set(codes)].sort(), 'one entry per JSON-RPC code');
  t.match(library.LIMIT_ERRORS.rate, { code: 'API_AUTH_RATE_LIMITED', rpcCode: -32005, httpStatus: 429 });
  const stable = Object.values(library.RPC_ERRORS).map((answer) => answer.code);
  t.equal(new Set(stable).size, stable.length, 'no stable code twice');
  for (const [rpcCode, answer] of Object.entries(library.RPC_ERRORS)) {
    t.match(answer.code, /^API_AUTH_[A-Z_]+$/, `${rpcCode}: ${answer.code}`);
    t.equal(answer.rpcCode, Number(rpcCode), `${answer.code}: its own JSON-RPC code`);
  }
  t.match(library.RPC_ERRORS[library.RpcCode.Throttled], { code: 'API_AUTH_THROTTLED', httpStatus: 429 });
  t.match(library.RPC_ERRORS[library.RpcCode.Busy], { code: 'API_AUTH_BUSY', httpStatus: 503 });
  t.match(library.RPC_ERRORS[library.RpcCode.UpstreamUnavailable], { code: 'API_AUTH_UPSTREAM_UNAVAILABLE', httpStatus: 502 });
  t.match(library.RPC_ERRORS[library.RpcCode.UpstreamTimeout], { code: 'API_AUTH_UPSTREAM_TIMEOUT', httpStatus: 504 });
  t.match(library.RPC_ERRORS[library.RpcCode.InsufficientScope], { code: 'API_AUTH_INSUFFICIENT_SCOPE', httpStatus: 200 });

  const forGood = new library.RpcError(library.RpcCode.IncorrectPassword, 'incorrect password');
  t.ok(forGood instanceof library.ApiAuthError, "an RpcError is one of api-auth's errors");
  t.match(
    forGood,
    { name: 'RpcError', code: 'API_AUTH_INCORRECT_PASSWORD', rpcCode: -32000, httpStatus: 200, message: 'incorrect password' },
    "a refusal for good travels in a 200, as the node's do",
  );
  t.match(
    new library.RpcError(library.RpcCode.Throttled, 'wait', 7),
    { code: 'API_AUTH_THROTTLED', httpStatus: 429, retryAfter: 7 },
    'a refusal for now has its status',
  );
});

t.test("the operator command's errors, the core's refusals to issue, and the broken invariant have their codes", async (t) => {
  const refused = new library.NodeRefusedError(-32000, 'incorrect password');
  t.ok(refused instanceof library.ApiAuthError);
  t.match(refused, {
    name: 'NodeRefusedError',
    code: 'API_AUTH_NODE_REFUSED',
    rpcCode: -32000,
    exitCode: library.OperatorExitCode.Refused,
  });
  const unreachable = new library.NodeUnreachableError('cannot reach it');
  t.ok(unreachable instanceof library.ApiAuthError);
  t.match(unreachable, { name: 'NodeUnreachableError', code: 'API_AUTH_NODE_UNREACHABLE', exitCode: library.OperatorExitCode.Unreachable });
  for (const [refusal, answer] of Object.entries(library.ISSUE_ERRORS)) {
    t.match(answer, { code: /^API_AUTH_ISSUE_[A-Z_]+$/, rpcCode: library.RpcCode.ResourceLimit, httpStatus: 200 }, refusal);
  }

  // A broken invariant, met through the core's own surface: a key of no bytes.
  const core = new Core(coreModule());
  t.throws(() => core.setKey(new Uint8Array(0)), {
    name: 'InvariantError',
    code: 'API_AUTH_INVARIANT',
    httpStatus: 500,
    exitCode: 1,
    message: 'the token key must be 1 to 64 bytes',
  });
  let thrown: unknown;
  try {
    core.setKey(new Uint8Array(0));
  } catch (error) {
    thrown = error;
  }
  t.ok(thrown instanceof library.InvariantError && thrown instanceof library.ApiAuthError, "it is the library's InvariantError");
});

// EIP-1474 gives -32000 to -32006 meanings Ethereum libraries act on.
const EIP_1474 = new Map([
  [-32000, 'invalid input'],
  [-32001, 'resource not found'],
  [-32002, 'resource unavailable'],
  [-32003, 'transaction rejected'],
  [-32004, 'method not supported'],
  [-32005, 'limit exceeded'],
  [-32006, 'JSON-RPC version not supported'],
]);

t.test("no code of the gateway's collides with EIP-1474; -32000 stays the original node's incorrect password", async (t) => {
  for (const [name, code] of Object.entries(library.RpcCode)) {
    if (name === 'IncorrectPassword') continue;
    // EIP-1474's "limit exceeded" is true of these two, and viem backs off on it.
    if (name === 'Throttled' || name === 'RateLimited') continue;
    t.notOk(EIP_1474.has(code), `${name} (${code}) is not EIP-1474's ${EIP_1474.get(code) ?? ''}`);
  }
  t.equal(library.RpcCode.IncorrectPassword, -32000);
  t.equal(library.RpcCode.Throttled, -32005, 'the password throttle is limit exceeded');
  t.equal(library.RpcCode.RateLimited, -32005, "a token's rate limit is limit exceeded");
  t.same(
    Object.entries(library.RpcCode)
      .filter(([, code]) => code === -32005)
      .map(([name]) => name)
      .sort(),
    ['RateLimited', 'Throttled'],
    '-32005 is only throttling and rate limits (a quota is one: a limit per day or month)',
  );
});

t.test("the proxy's error classes have their stable codes and statuses", async (t) => {
  for (const [kind, answer] of Object.entries(library.UPSTREAM_ERRORS)) {
    const error = new library.UpstreamError('x', kind as library.UpstreamErrorCode);
    t.ok(error instanceof library.ApiAuthError, kind);
    t.match(error, { name: 'UpstreamError', kind, code: answer.code, httpStatus: kind === 'timeout' ? 504 : 502 }, kind);
  }
  t.match(new library.ClientGoneError(), { code: 'API_AUTH_CLIENT_GONE', httpStatus: null });
  t.match(new library.BodyTooLargeError(), { code: 'API_AUTH_BODY_TOO_LARGE', httpStatus: 413, rpcCode: library.RpcCode.InvalidRequest });
  t.match(new library.ScopeRefusedError('method not allowed'), { code: 'API_AUTH_INSUFFICIENT_SCOPE', httpStatus: 200 });
  t.match(new library.ScopeRefusedError('not json-rpc'), { code: 'API_AUTH_SCOPE_UNREADABLE', httpStatus: 403 });
  t.match(new library.LimitRefusedError('rate'), { code: 'API_AUTH_RATE_LIMITED', httpStatus: 429, rpcCode: -32005 });
  t.match(new library.LimitRefusedError('quota'), { code: 'API_AUTH_QUOTA_SPENT', httpStatus: 429, rpcCode: -32005 });
  t.match(new library.LimitRefusedError('table full'), { code: 'API_AUTH_LIMITS_FULL', httpStatus: 503, rpcCode: -32046 });
  t.match(new library.LimitRefusedError('unreadable'), { code: 'API_AUTH_LIMITS_UNREADABLE', httpStatus: 400, rpcCode: -32600 });
});

t.test('docs/reference/errors.md publishes the JSON-RPC table of errors.ts, and what moved', async (t) => {
  const page = readFileSync(join(ROOT, 'docs/reference/errors.md'), 'utf8');
  const section = (title: string): string => {
    const start = page.indexOf(`\n## ${title}\n`);
    t.not(start, -1, `a section "${title}"`);
    const end = page.indexOf('\n## ', start + 1);
    return page.slice(start, end === -1 ? undefined : end);
  };
  const rows = (text: string): string[][] =>
    text
      .split('\n')
      .filter((l) => /^\| -?\d/.test(l))
      .map((l) =>
        l
          .split('|')
          .slice(1, -1)
          .map((cell) => cell.trim().replace(/^`|`$/g, '')),
      );
  const published = rows(section('JSON-RPC codes')).map(([code, status, stable]) => [Number(code), Number(status), stable]);
  const table = [
    ...Object.values(library.RPC_ERRORS),
    library.LIMIT_ERRORS.rate,
    library.LIMIT_ERRORS.quota,
    library.LIMIT_ERRORS.unreadable,
  ].map((a) => [a.rpcCode, a.httpStatus, a.code]);
  const order = (list: (string | number)[][]) => [...list].sort((a, b) => Number(a[0]) - Number(b[0]));
  t.same(order(published), order(table), 'every JSON-RPC code, its HTTP status and its stable code, as errors.ts has them');
  const moved = rows(section('What moved')).map(([was, now, stable]) => [Number(was), Number(now), stable]);
  t.ok(moved.length > 0, 'a table of what moved');
  for (const [was, now, stable] of moved) {
    t.match(library.RPC_ERRORS[now as library.RpcCode], { code: stable }, `${was} -> ${now} is ${stable}`);
    t.ok(EIP_1474.has(was as number) || was === -32007, `${was} was in EIP-1474's range, or moved with it`);
  }
  const changelog = readFileSync(join(ROOT, 'CHANGELOG.md'), 'utf8');
  for (const [was, now] of moved) t.match(changelog, `${was} -> ${now}`, `CHANGELOG.md says ${was} -> ${now}`);
});
