// One error table (issue 23): every error class of api-auth carries a stable API_AUTH_*
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
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** `api-auth ...args` in a process of its own, as an operator runs it: its exit code, stdout and stderr. */
function operator(args: readonly string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(...untracked(process.execPath, [MAIN, ...args]), { cwd: ROOT, env: PROGRAM_ENV, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => { stdout += chunk; });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => { stderr += chunk; });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

t.test('an operator command that fails unforeseen exits 1 with one line, and a node that is not there still exits 3', async (t) => {
  // A node that answers auth.listTokens with a list whose entry is null: the command's own
  // table cannot be made, which no rule of the command foresees.
  const node = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"jsonrpc":"2.0","result":{"tokens":[null]},"id":1}'));
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
  t.same(Object.keys(library.RPC_ERRORS).map(Number).sort(), [...codes].sort(), 'one entry per JSON-RPC code');
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
  t.match(library.RPC_ERRORS[library.RpcCode.InsufficientScope], { code: 'API_AUTH_INSUFFICIENT_SCOPE', httpStatus: 403 });

  const forGood = new library.RpcError(library.RpcCode.IncorrectPassword, 'incorrect password');
  t.ok(forGood instanceof library.ApiAuthError, 'an RpcError is one of api-auth\'s errors');
  t.match(forGood, { name: 'RpcError', code: 'API_AUTH_INCORRECT_PASSWORD', rpcCode: -32000, httpStatus: 200, message: 'incorrect password' },
    'a refusal for good travels in a 200, as the node\'s do');
  t.match(new library.RpcError(library.RpcCode.Throttled, 'wait', 7), { code: 'API_AUTH_THROTTLED', httpStatus: 429, retryAfter: 7 },
    'a refusal for now has its status');
});

t.test('the operator command\'s errors, the core\'s refusals to issue, and the broken invariant have their codes', async (t) => {
  const refused = new library.NodeRefusedError(-32000, 'incorrect password');
  t.ok(refused instanceof library.ApiAuthError);
  t.match(refused, { name: 'NodeRefusedError', code: 'API_AUTH_NODE_REFUSED', rpcCode: -32000, exitCode: library.OperatorExitCode.Refused });
  const unreachable = new library.NodeUnreachableError('cannot reach it');
  t.ok(unreachable instanceof library.ApiAuthError);
  t.match(unreachable, { name: 'NodeUnreachableError', code: 'API_AUTH_NODE_UNREACHABLE', exitCode: library.OperatorExitCode.Unreachable });
  for (const [refusal, answer] of Object.entries(library.ISSUE_ERRORS)) {
    t.match(answer, { code: /^API_AUTH_ISSUE_[A-Z_]+$/, rpcCode: library.RpcCode.ResourceLimit, httpStatus: 200 }, refusal);
  }

  // A broken invariant, met through the core's own surface: a key of no bytes.
  const core = new Core(coreModule());
  t.throws(() => core.setKey(new Uint8Array(0)), { name: 'InvariantError', code: 'API_AUTH_INVARIANT', httpStatus: 500, exitCode: 1,
    message: 'the token key must be 1 to 64 bytes' });
  let thrown: unknown;
  try {
    core.setKey(new Uint8Array(0));
  } catch (error) {
    thrown = error;
  }
  t.ok(thrown instanceof library.InvariantError && thrown instanceof library.ApiAuthError, 'it is the library\'s InvariantError');
});
