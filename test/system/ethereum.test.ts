// An Ethereum node behind api-auth (issue 24): a real ganache 7.9 (JSON-RPC at "/" over
// HTTP and WebSocket on one port) behind a real api-auth (--upstream), driven by the
// libraries dapp backends use, ethers 6, viem 2 and web3.js 4. A token for "/" reads,
// sends a signed transfer and reads its receipt, batches, and subscribes to newHeads over
// WebSocket; a scoped token's refused calls come back as JSON-RPC errors each library
// reads (its own error class, the code kept), alone and in a batch whose allowed calls are
// still answered; a revoke ends a subscription. One ganache for the whole file.
import t from 'tap';
import { spawn } from 'node:child_process';
import { JsonRpcProvider, FetchRequest, Wallet, WebSocketProvider, parseEther } from 'ethers';
import { createPublicClient, createWalletClient, http, InvalidRequestRpcError, LimitExceededRpcError, MethodNotSupportedRpcError, RpcRequestError, webSocket } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { HttpProvider, InvalidResponseError, ResponseError, Web3, WebSocketProvider as Web3Socket } from 'web3';
import WebSocket from 'ws';
import { runOperatorCommand } from '../../build/host/cli/operator/index.js';
import { newToken, revokeToken } from '../helpers/auth.js';
import { jsonrpc } from '../helpers/http.js';
import { startServer } from '../helpers/server.js';
import { closedPort } from '../helpers/upstream.js';
import { Readable } from 'node:stream';
import { once } from 'node:events';

// ganache --wallet.deterministic's first two accounts.
const KEY = '0x4f3edf983ac636a65a842ce7c78d9aa706d3b113bce9c46f30d7d21715b23b1d';
const OTHER = '0xFFcf8FDEE72ac11b5c542428B35EEF5769C409f0';
const CHAIN_ID = 1337;
const SCOPE_CODE = -32047;

/** ganache on a free loopback port, stopped with the file: its URL once it answers. */
async function startGanache(): Promise<string> {
  const port = await closedPort();
  const child = spawn(process.execPath, ['node_modules/.bin/ganache', '--server.host', '127.0.0.1', '--server.port', String(port),
    '--wallet.deterministic', '--logging.quiet', '--chain.chainId', String(CHAIN_ID)], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => { stderr += chunk; });
  t.teardown(async () => {
    if (child.exitCode !== null) return;
    child.kill('SIGTERM');
    await once(child, 'exit');
  });
  const url = `http://127.0.0.1:${port}`;
  for (;;) {
    try {
      const answer = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"jsonrpc":"2.0","method":"eth_chainId","id":1}' });
      if (answer.ok) return url;
    } catch {
      // Not listening yet.
    }
    if (child.exitCode !== null) throw new Error(`ganache ended before it answered: ${stderr}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

const ganache = await startGanache();
const server = await startServer(t, { args: ['--upstream', ganache, '--api-auth-query-token'] });
const root = `${server.url}/`;
const wsRoot = root.replace(/^http/, 'ws');

/** `api-auth token new --endpoints / ...more --json` against the gateway: the token. */
async function cliToken(...more: string[]): Promise<string> {
  let stdout = '';
  let stderr = '';
  const code = await runOperatorCommand(['token', 'new', '--uri', server.url, '--password-file', server.passwordFile, '--endpoints', '/',
    ...more, '--json'], { stdout: (text) => { stdout += text; }, stderr: (text) => { stderr += text; }, stdin: Readable.from([]) as unknown as NodeJS.ReadStream });
  if (code !== 0) throw new Error(`token new failed (${code}): ${stderr}`);
  return (JSON.parse(stdout) as { token: string }).token;
}

const full = await cliToken();
const reader = await cliToken('--methods', '@read,@subscribe');

function ethersProvider(token: string): JsonRpcProvider {
  const request = new FetchRequest(root);
  request.setHeader('Authorization', `Bearer ${token}`);
  return new JsonRpcProvider(request, CHAIN_ID, { staticNetwork: true, batchMaxCount: 1, cacheTimeout: -1 });
}

/** The raw transaction of a signed transfer that a scoped token may not send. Made before the first
 * test is queued, as everything awaited at the top is (threads.test.ts says why). */
const RAW = await new Wallet(KEY).signTransaction({ to: OTHER, value: 1n, gasLimit: 21000n, gasPrice: 10n ** 10n, nonce: 1000, chainId: CHAIN_ID });

t.test('a token for "/": ethers reads, sends a signed transfer, and reads its receipt', async (t) => {
  const provider = ethersProvider(full);
  t.teardown(() => provider.destroy());
  t.equal(Number((await provider.getNetwork()).chainId), CHAIN_ID);
  const wallet = new Wallet(KEY, provider);
  const before = await provider.getBalance(OTHER);
  const sent = await wallet.sendTransaction({ to: OTHER, value: parseEther('1') });
  const receipt = await sent.wait();
  t.equal(receipt?.status, 1, 'the transfer is mined');
  t.equal(await provider.getBalance(OTHER), before + parseEther('1'));
  const outside = await fetch(`${server.url}/x`, { method: 'POST', headers: { authorization: `Bearer ${full}`, 'content-type': 'application/json' },
    body: '{"jsonrpc":"2.0","method":"eth_chainId","id":1}' });
  t.equal(outside.status, 401, '"/" grants the root alone');
});

t.test('viem: reads, a signed transfer and its receipt, and a batch', async (t) => {
  const transport = http(root, { fetchOptions: { headers: { authorization: `Bearer ${full}` } }, batch: true, retryCount: 0 });
  const client = createPublicClient({ transport });
  t.equal(await client.getChainId(), CHAIN_ID);
  const account = privateKeyToAccount(KEY);
  const wallet = createWalletClient({ account, transport });
  const hash = await wallet.sendTransaction({ to: OTHER, value: 10n ** 18n, chain: null });
  const receipt = await client.waitForTransactionReceipt({ hash, pollingInterval: 50 });
  t.equal(receipt.status, 'success');
  const [block, balance, nonce] = await Promise.all([client.getBlockNumber(), client.getBalance({ address: OTHER }),
    client.getTransactionCount({ address: account.address })]);
  t.ok(block >= 1n && balance > 0n && nonce >= 1, 'a batch of three, answered');
});

t.test('web3.js: reads, a signed transfer and its receipt', async (t) => {
  const web3 = new Web3(new HttpProvider(root, { providerOptions: { headers: { authorization: `Bearer ${full}` } } }));
  t.equal(Number(await web3.eth.getChainId()), CHAIN_ID);
  const account = web3.eth.accounts.privateKeyToAccount(KEY);
  const signed = await account.signTransaction({ to: OTHER, value: web3.utils.toWei('1', 'ether'), gas: 21000, gasPrice: await web3.eth.getGasPrice(),
    nonce: await web3.eth.getTransactionCount(account.address), chainId: CHAIN_ID });
  const receipt = await web3.eth.sendSignedTransaction(signed.rawTransaction);
  t.equal(Number(receipt.status), 1);
});

const REFUSED = 'the provided auth token does not allow method "eth_sendRawTransaction"';

t.test('a scoped token (@read,@subscribe): each library reads the refusal of a call outside it, with its code', async (t) => {
  const provider = ethersProvider(reader);
  t.teardown(() => provider.destroy());
  t.ok(await provider.getBlockNumber() >= 1, 'ethers reads');
  const fromEthers = await provider.broadcastTransaction(RAW).then(() => null, (error: unknown) => error);
  t.match(fromEthers, { code: 'UNKNOWN_ERROR', error: { code: SCOPE_CODE, message: REFUSED } },
    'ethers: a JSON-RPC error (not SERVER_ERROR "403 Forbidden"), its code and message kept');

  const client = createPublicClient({ transport: http(root, { fetchOptions: { headers: { authorization: `Bearer ${reader}` } }, retryCount: 0 }) });
  t.ok(await client.getBlockNumber() >= 1n, 'viem reads');
  const fromViem = await client.sendRawTransaction({ serializedTransaction: RAW as `0x${string}` }).then(() => null, (error: unknown) => error);
  t.ok(fromViem instanceof RpcRequestError, 'viem: RpcRequestError, not HttpRequestError');
  t.match(fromViem, { code: SCOPE_CODE, details: REFUSED });

  const web3 = new Web3(new HttpProvider(root, { providerOptions: { headers: { authorization: `Bearer ${reader}` } } }));
  t.ok(await web3.eth.getBlockNumber() >= 1n, 'web3.js reads');
  const fromWeb3 = await web3.eth.sendSignedTransaction(RAW).then(() => null, (error: unknown) => error);
  t.ok(fromWeb3 instanceof InvalidResponseError, 'web3.js: InvalidResponseError');
  t.match(fromWeb3, { message: `Returned error: ${REFUSED}`, cause: { code: SCOPE_CODE, message: REFUSED } });
});

t.test('a scoped token\'s batch: the allowed calls are answered, the refused one gets its error, in each library', async (t) => {
  const request = new FetchRequest(root);
  request.setHeader('Authorization', `Bearer ${reader}`);
  const provider = new JsonRpcProvider(request, CHAIN_ID, { staticNetwork: true, cacheTimeout: -1, batchStallTime: 20 });
  t.teardown(() => provider.destroy());
  const [block, sent, balance] = await Promise.allSettled([provider.getBlockNumber(), provider.broadcastTransaction(RAW), provider.getBalance(OTHER)]);
  t.match(block, { status: 'fulfilled', value: Number }, 'ethers: an allowed call of the batch answered');
  t.match(balance, { status: 'fulfilled', value: BigInt });
  t.match(sent, { status: 'rejected', reason: { code: 'UNKNOWN_ERROR', error: { code: SCOPE_CODE } } });

  const viem = createPublicClient({ transport: http(root, { fetchOptions: { headers: { authorization: `Bearer ${reader}` } }, batch: true, retryCount: 0 }) });
  const [number, refused, chainId] = await Promise.allSettled([viem.getBlockNumber(),
    viem.sendRawTransaction({ serializedTransaction: RAW as `0x${string}` }), viem.getChainId()]);
  t.match(number, { status: 'fulfilled', value: BigInt }, 'viem: the allowed calls of the batch answered');
  t.match(chainId, { status: 'fulfilled', value: CHAIN_ID });
  t.match(refused, { status: 'rejected', reason: { code: SCOPE_CODE } }, 'and the refused one is its JSON-RPC error, not "HTTP request failed"');

  const web3 = new Web3(new HttpProvider(root, { providerOptions: { headers: { authorization: `Bearer ${reader}` } } }));
  const batch = new web3.BatchRequest();
  const answers = [batch.add({ method: 'eth_chainId', params: [] }), batch.add({ method: 'eth_sendRawTransaction', params: [RAW] }),
    batch.add({ method: 'eth_blockNumber', params: [] })];
  const results = await batch.execute();
  t.equal(results.length, 3, 'web3.js: one answer for each call');
  t.match(results[0], { result: '0x539' });
  t.match(results[1], { error: { code: SCOPE_CODE, message: REFUSED } });
  t.match(results[2], { result: /^0x/ });
  await Promise.allSettled(answers);
});

t.test('a token that does not open the door (401), and a node that does not answer (502): what each library reports', async (t) => {
  const none = 'not-a-token';
  const invalid = { code: -32600, message: 'the provided auth token is invalid' };
  t.match(await ethersProvider(none).getBlockNumber().then(() => null, (error: unknown) => error),
    { code: 'SERVER_ERROR', info: { responseStatus: '401 Unauthorized' } }, 'ethers: SERVER_ERROR, the status in info');
  const viem = (url: string, token: string) => createPublicClient({ transport: http(url, { fetchOptions: { headers: { authorization: `Bearer ${token}` } }, retryCount: 0 }) });
  const fromViem = await viem(root, none).getBlockNumber().then(() => null, (error: unknown) => error);
  t.ok(fromViem instanceof InvalidRequestRpcError, 'viem: InvalidRequestRpcError, from the body\'s -32600');
  t.match(fromViem, { code: -32600, cause: { status: 401 } });
  const web3 = (url: string, token: string) => new Web3(new HttpProvider(url, { providerOptions: { headers: { authorization: `Bearer ${token}` } } }));
  const fromWeb3 = await web3(root, none).eth.getBlockNumber().then(() => null, (error: unknown) => error);
  t.ok(fromWeb3 instanceof ResponseError, 'web3.js: ResponseError');
  t.match(fromWeb3, { statusCode: 401, cause: invalid });

  // A gateway whose node is gone: 502 with -32044, which viem read as -32004, "method not supported", before.
  const orphan = await startServer(t, { args: ['--upstream', `http://127.0.0.1:${await closedPort()}`] });
  const token = await newToken(orphan.url, orphan.password, ['/']);
  const orphanRoot = `${orphan.url}/`;
  const request = new FetchRequest(orphanRoot);
  request.setHeader('Authorization', `Bearer ${token}`);
  const provider = new JsonRpcProvider(request, CHAIN_ID, { staticNetwork: true, cacheTimeout: -1 });
  t.match(await provider.getBlockNumber().then(() => null, (error: unknown) => error),
    { code: 'SERVER_ERROR', info: { responseStatus: '502 Bad Gateway' } }, 'ethers: SERVER_ERROR 502');
  provider.destroy();
  const gone = await viem(orphanRoot, token).getBlockNumber().then(() => null, (error: unknown) => error);
  t.notOk(gone instanceof MethodNotSupportedRpcError, 'viem: not "method not supported"');
  t.ok(gone instanceof RpcRequestError, 'viem: RpcRequestError');
  t.match(gone, { code: -32044, status: 502 }, 'viem: the code as sent, with the status');
  t.match(await web3(orphanRoot, token).eth.getBlockNumber().then(() => null, (error: unknown) => error),
    { statusCode: 502, cause: { code: -32044 }, message: 'Returned error: the upstream node refused the connection' },
    'web3.js: ResponseError 502, the code as sent, and the reason (the answer echoes the call\'s id: with id null, web3.js showed "Returned error: ")');
});

t.test('a token past its rate (429): each library shows the reason, and ethers\' own retries of a 429', async (t) => {
  const limited = await cliToken('--rate-limit', '1/h', '--burst', '1');
  const reason = /^the provided auth token is past its rate limit; retry in \d+ s$/;
  t.equal((await jsonrpc(root, 'eth_chainId', [], 1, [['Authorization', `Bearer ${limited}`]])).result, '0x539', 'the burst of 1, spent');

  // ethers retries a 429 itself, up to 12 times, reading Retry-After as milliseconds; a
  // dapp that wants the refusal at once says so with retryFunc.
  const request = new FetchRequest(root);
  request.setHeader('Authorization', `Bearer ${limited}`);
  request.retryFunc = async () => false;
  const provider = new JsonRpcProvider(request, CHAIN_ID, { staticNetwork: true, batchMaxCount: 1, cacheTimeout: -1 });
  t.teardown(() => provider.destroy());
  const fromEthers = await provider.getBlockNumber().then(() => null, (error: unknown) => error) as { info?: { responseBody?: string } } | null;
  t.match(fromEthers, { code: 'SERVER_ERROR', info: { responseStatus: '429 Too Many Requests' } }, 'ethers: SERVER_ERROR 429');
  t.match(JSON.parse(fromEthers?.info?.responseBody ?? '{}'), { error: { code: -32005, message: reason } }, 'ethers: the reason in info.responseBody');

  const viem = createPublicClient({ transport: http(root, { fetchOptions: { headers: { authorization: `Bearer ${limited}` } }, retryCount: 0 }) });
  const fromViem = await viem.getBlockNumber().then(() => null, (error: unknown) => error);
  t.ok(fromViem instanceof LimitExceededRpcError, 'viem: LimitExceededRpcError (-32005, EIP-1474\'s limit exceeded), which viem backs off on');
  t.match(fromViem, { code: -32005, details: reason });

  const web3 = new Web3(new HttpProvider(root, { providerOptions: { headers: { authorization: `Bearer ${limited}` } } }));
  const fromWeb3 = await web3.eth.getBlockNumber().then(() => null, (error: unknown) => error);
  t.ok(fromWeb3 instanceof ResponseError, 'web3.js: ResponseError');
  t.match(fromWeb3, { statusCode: 429, message: /^Returned error: the provided auth token is past its rate limit; retry in \d+ s$/ },
    'web3.js: the reason in its message (the answer echoes the call\'s id; with id null web3.js showed "Returned error: ")');
});

/** A WebSocket with the token in its Authorization header, as a backend opens one. */
const socketWith = (token: string) => () => new WebSocket(wsRoot, { headers: { authorization: `Bearer ${token}` } });

/** Mines a block with the full token. */
const mine = () => jsonrpc(root, 'evm_mine', [], 1, [['Authorization', `Bearer ${full}`]]);

/**
 * What `head` resolves with, mining a block now and then until it does: a subscription
 * made over WebSocket is in place only some time after the call that asks for it
 * returns, and a block mined before that is never pushed.
 */
async function minedUntil<T>(head: Promise<T>): Promise<T> {
  let done = false;
  const mining = (async () => {
    while (!done) {
      await mine();
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  })();
  try {
    return await head;
  } finally {
    done = true;
    await mining;
  }
}

t.test('WebSocket: newHeads subscriptions through the gateway, a scoped token\'s refusal, and a revoke that ends one', async (t) => {
  const ethers = new WebSocketProvider(socketWith(reader), CHAIN_ID, { staticNetwork: true });
  t.teardown(() => ethers.destroy());
  const head = new Promise<number>((resolve) => { void ethers.once('block', resolve); });
  t.ok(await minedUntil(head) >= 1, 'ethers: a new head, pushed by eth_subscribe("newHeads")');
  const refused = await ethers.broadcastTransaction(RAW).then(() => null, (error: unknown) => error);
  t.match(refused, { code: 'UNKNOWN_ERROR', error: { code: SCOPE_CODE, message: REFUSED } }, 'ethers over WebSocket: the same error');

  const web3 = new Web3(new Web3Socket(wsRoot, { headers: { authorization: `Bearer ${reader}` } }));
  t.teardown(() => web3.currentProvider?.disconnect());
  const subscription = await web3.eth.subscribe('newHeads');
  const header = new Promise<unknown>((resolve) => subscription.on('data', resolve));
  t.match(await minedUntil(header), { number: BigInt }, 'web3.js: a new head');

  const viemToken = await cliToken('--methods', '@subscribe');
  const viem = createPublicClient({ transport: webSocket(`${wsRoot}?access_token=${viemToken}`, { retryCount: 0, reconnect: false }) });
  t.teardown(async () => (await viem.transport.getRpcClient()).close());
  const viemHead = new Promise<bigint>((resolve) => {
    const unwatch = viem.watchBlockNumber({ onBlockNumber: (n) => { unwatch(); resolve(n); } });
  });
  t.ok(await minedUntil(viemHead) >= 1n, 'viem: a new head (a browser\'s WebSocket sends no headers: the token in access_token, --api-auth-query-token)');

  const doomed = await cliToken('--methods', '@subscribe');
  const watched = new WebSocketProvider(socketWith(doomed), CHAIN_ID, { staticNetwork: true });
  await minedUntil(new Promise<number>((resolve) => { void watched.once('block', resolve); }));
  const socket = watched.websocket as unknown as WebSocket;
  const closed = once(socket, 'close') as Promise<[number, Buffer]>;
  t.match(await revokeToken(server.url, server.password, doomed), { success: true });
  const [code, reason] = await closed;
  t.equal(code, 1008, 'the revoke ends the subscription\'s session: close 1008');
  t.equal(reason.toString(), 'the provided auth token was revoked');
  await watched.destroy();
});
