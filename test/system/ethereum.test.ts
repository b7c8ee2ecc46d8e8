// An Ethereum node behind api-auth: real nodes, ganache 7.9 and geth 1.17 --dev
// (each serving JSON-RPC at "/" over HTTP and WebSocket on one port:
// test/helpers/eth-node.ts), each behind a real api-auth of its own (--upstream), driven by
// the libraries dapp backends use, ethers 6, viem 2 and web3.js 4. The same checks for
// each node: a token for "/" reads, sends a signed transfer and reads its receipt, batches,
// and subscribes to newHeads over WebSocket; a scoped token's refused calls come back as
// JSON-RPC errors each library reads (its own error class, the code kept), alone and in a
// batch whose allowed calls are still answered; a revoke ends a subscription; a token
// that does not open the door (401) and one past its rate (429) look the same whatever
// the node. Where the nodes differ (how a block is mined) the helper says how for each.
// A gateway whose node is gone (502) involves no node, and is checked once.
import t from 'tap';
import type { Test } from 'tap';
import { JsonRpcProvider, FetchRequest, Wallet, WebSocketProvider, parseEther } from 'ethers';
import {
  createPublicClient,
  createWalletClient,
  http,
  InvalidRequestRpcError,
  LimitExceededRpcError,
  MethodNotSupportedRpcError,
  RpcRequestError,
  webSocket,
} from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { HttpProvider, InvalidResponseError, ResponseError, Web3, WebSocketProvider as Web3Socket } from 'web3';
import WebSocket from 'ws';
import { runOperatorCommand } from '../../build/host/cli/operator/index.js';
import { newToken, revokeToken } from '../helpers/auth.js';
import { startGanache, startGeth } from '../helpers/eth-node.js';
import type { EthNode } from '../helpers/eth-node.js';
import { jsonrpc } from '../helpers/http.js';
import { startServer } from '../helpers/server.js';
import type { Server } from '../helpers/server.js';
import { closedPort } from '../helpers/upstream.js';
import { Readable } from 'node:stream';
import { once } from 'node:events';

/** An address that receives the transfers (ganache --wallet.deterministic's second account). */
const OTHER = '0xFFcf8FDEE72ac11b5c542428B35EEF5769C409f0';
const SCOPE_CODE = -32047;
const REFUSED = 'the provided auth token does not allow method "eth_sendRawTransaction"';

/** A node behind a gateway of its own, and the tokens the checks use. */
interface Gateway {
  node: EthNode;
  server: Server;
  /** The gateway's "/", over HTTP and WebSocket. */
  root: string;
  wsRoot: string;
  /** `api-auth token new --endpoints / ...more` against this gateway. */
  cliToken(...more: string[]): Promise<string>;
  /** A token for "/" that may call anything, and one for @read,@subscribe. */
  full: string;
  reader: string;
  /** The raw transaction of a signed transfer that the reader may not send. */
  raw: string;
}

/** `api-auth token new --endpoints / ...more --json` against `server`: the token. */
async function cliToken(server: Server, ...more: string[]): Promise<string> {
  let stdout = '';
  let stderr = '';
  const code = await runOperatorCommand(
    ['token', 'new', '--uri', server.url, '--password-file', server.passwordFile, '--endpoints', '/', ...more, '--json'],
    {
      stdout: (text) => {
        stdout += text;
      },
      stderr: (text) => {
        stderr += text;
      },
      stdin: Readable.from([]) as unknown as NodeJS.ReadStream,
    },
  );
  if (code !== 0) throw new Error(`token new failed (${code}): ${stderr}`);
  return (JSON.parse(stdout) as { token: string }).token;
}

async function behindGateway(node: EthNode): Promise<Gateway> {
  const server = await startServer(t, { args: ['--upstream', node.url, '--api-auth-query-token'] });
  const root = `${server.url}/`;
  return {
    node,
    server,
    root,
    wsRoot: root.replace(/^http/, 'ws'),
    cliToken: (...more) => cliToken(server, ...more),
    full: await cliToken(server),
    reader: await cliToken(server, '--methods', '@read,@subscribe'),
    raw: await new Wallet(node.key).signTransaction({
      to: OTHER,
      value: 1n,
      gasLimit: 21000n,
      gasPrice: 10n ** 10n,
      nonce: 1000,
      chainId: node.chainId,
    }),
  };
}

// Both nodes, their gateways and tokens, before the first test is queued, as everything
// awaited at the top is (threads.test.ts says why).
const gateways = await Promise.all([startGanache(t), startGeth(t)].map(async (node) => behindGateway(await node)));

function ethersProvider({ root, node }: Gateway, token: string): JsonRpcProvider {
  const request = new FetchRequest(root);
  request.setHeader('Authorization', `Bearer ${token}`);
  return new JsonRpcProvider(request, node.chainId, { staticNetwork: true, batchMaxCount: 1, cacheTimeout: -1 });
}

/**
 * What `head` resolves with, mining a block now and then until it does: a subscription
 * made over WebSocket is in place only some time after the call that asks for it
 * returns, and a block mined before that is never pushed.
 */
async function minedUntil<T>(node: EthNode, head: Promise<T>): Promise<T> {
  let done = false;
  const mining = (async () => {
    while (!done) {
      await node.mine();
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

/** Every check that involves the node, against `gateway`'s. */
function suite(t: Test, gateway: Gateway): void {
  const { node, server, root, wsRoot, full, reader, raw } = gateway;
  const key = node.key;
  const chainId = node.chainId;
  const chainHex = `0x${chainId.toString(16)}`;

  t.test(`the node behind the gateway is ${node.name}`, async (t) => {
    t.match((await jsonrpc(root, 'web3_clientVersion', [], 1, [['Authorization', `Bearer ${full}`]])).result, node.client);
  });

  t.test('a token for "/": ethers reads, sends a signed transfer, and reads its receipt', async (t) => {
    const provider = ethersProvider(gateway, full);
    t.teardown(() => provider.destroy());
    t.equal(Number((await provider.getNetwork()).chainId), chainId);
    const wallet = new Wallet(key, provider);
    const before = await provider.getBalance(OTHER);
    const sent = await wallet.sendTransaction({ to: OTHER, value: parseEther('1') });
    const receipt = await sent.wait();
    t.equal(receipt?.status, 1, 'the transfer is mined');
    t.equal(await provider.getBalance(OTHER), before + parseEther('1'));
    const outside = await fetch(`${server.url}/x`, {
      method: 'POST',
      headers: { authorization: `Bearer ${full}`, 'content-type': 'application/json' },
      body: '{"jsonrpc":"2.0","method":"eth_chainId","id":1}',
    });
    t.equal(outside.status, 401, '"/" grants the root alone');
  });

  t.test('viem: reads, a signed transfer and its receipt, and a batch', async (t) => {
    const transport = http(root, { fetchOptions: { headers: { authorization: `Bearer ${full}` } }, batch: true, retryCount: 0 });
    const client = createPublicClient({ transport });
    t.equal(await client.getChainId(), chainId);
    const account = privateKeyToAccount(key);
    const wallet = createWalletClient({ account, transport });
    const hash = await wallet.sendTransaction({ to: OTHER, value: 10n ** 18n, chain: null });
    const receipt = await client.waitForTransactionReceipt({ hash, pollingInterval: 50 });
    t.equal(receipt.status, 'success');
    const [block, balance, nonce] = await Promise.all([
      client.getBlockNumber(),
      client.getBalance({ address: OTHER }),
      client.getTransactionCount({ address: account.address }),
    ]);
    t.ok(block >= 1n && balance > 0n && nonce >= 1, 'a batch of three, answered');
  });

  t.test('web3.js: reads, a signed transfer and its receipt', async (t) => {
    const web3 = new Web3(new HttpProvider(root, { providerOptions: { headers: { authorization: `Bearer ${full}` } } }));
    t.equal(Number(await web3.eth.getChainId()), chainId);
    const account = web3.eth.accounts.privateKeyToAccount(key);
    const signed = await account.signTransaction({
      to: OTHER,
      value: web3.utils.toWei('1', 'ether'),
      gas: 21000,
      gasPrice: await web3.eth.getGasPrice(),
      nonce: await web3.eth.getTransactionCount(account.address),
      chainId,
    });
    const receipt = await web3.eth.sendSignedTransaction(signed.rawTransaction);
    t.equal(Number(receipt.status), 1);
  });

  t.test('a scoped token (@read,@subscribe): each library reads the refusal of a call outside it, with its code', async (t) => {
    const provider = ethersProvider(gateway, reader);
    t.teardown(() => provider.destroy());
    t.ok((await provider.getBlockNumber()) >= 1, 'ethers reads');
    const fromEthers = await provider.broadcastTransaction(raw).then(
      () => null,
      (error: unknown) => error,
    );
    t.match(
      fromEthers,
      { code: 'UNKNOWN_ERROR', error: { code: SCOPE_CODE, message: REFUSED } },
      'ethers: a JSON-RPC error (not SERVER_ERROR "403 Forbidden"), its code and message kept',
    );

    const client = createPublicClient({
      transport: http(root, { fetchOptions: { headers: { authorization: `Bearer ${reader}` } }, retryCount: 0 }),
    });
    t.ok((await client.getBlockNumber()) >= 1n, 'viem reads');
    const fromViem = await client.sendRawTransaction({ serializedTransaction: raw as `0x${string}` }).then(
      () => null,
      (error: unknown) => error,
    );
    t.ok(fromViem instanceof RpcRequestError, 'viem: RpcRequestError, not HttpRequestError');
    t.match(fromViem, { code: SCOPE_CODE, details: REFUSED });

    const web3 = new Web3(new HttpProvider(root, { providerOptions: { headers: { authorization: `Bearer ${reader}` } } }));
    t.ok((await web3.eth.getBlockNumber()) >= 1n, 'web3.js reads');
    const fromWeb3 = await web3.eth.sendSignedTransaction(raw).then(
      () => null,
      (error: unknown) => error,
    );
    t.ok(fromWeb3 instanceof InvalidResponseError, 'web3.js: InvalidResponseError');
    t.match(fromWeb3, { message: `Returned error: ${REFUSED}`, cause: { code: SCOPE_CODE, message: REFUSED } });
  });

  t.test("a scoped token's batch: the allowed calls are answered, the refused one gets its error, in each library", async (t) => {
    const request = new FetchRequest(root);
    request.setHeader('Authorization', `Bearer ${reader}`);
    const provider = new JsonRpcProvider(request, chainId, { staticNetwork: true, cacheTimeout: -1, batchStallTime: 20 });
    t.teardown(() => provider.destroy());
    const [block, sent, balance] = await Promise.allSettled([
      provider.getBlockNumber(),
      provider.broadcastTransaction(raw),
      provider.getBalance(OTHER),
    ]);
    t.match(block, { status: 'fulfilled', value: Number }, 'ethers: an allowed call of the batch answered');
    t.match(balance, { status: 'fulfilled', value: BigInt });
    t.match(sent, { status: 'rejected', reason: { code: 'UNKNOWN_ERROR', error: { code: SCOPE_CODE } } });

    const viem = createPublicClient({
      transport: http(root, { fetchOptions: { headers: { authorization: `Bearer ${reader}` } }, batch: true, retryCount: 0 }),
    });
    const [number, refused, chain] = await Promise.allSettled([
      viem.getBlockNumber(),
      viem.sendRawTransaction({ serializedTransaction: raw as `0x${string}` }),
      viem.getChainId(),
    ]);
    t.match(number, { status: 'fulfilled', value: BigInt }, 'viem: the allowed calls of the batch answered');
    t.match(chain, { status: 'fulfilled', value: chainId });
    t.match(
      refused,
      { status: 'rejected', reason: { code: SCOPE_CODE } },
      'and the refused one is its JSON-RPC error, not "HTTP request failed"',
    );

    const web3 = new Web3(new HttpProvider(root, { providerOptions: { headers: { authorization: `Bearer ${reader}` } } }));
    const batch = new web3.BatchRequest();
    const answers = [
      batch.add({ method: 'eth_chainId', params: [] }),
      batch.add({ method: 'eth_sendRawTransaction', params: [raw] }),
      batch.add({ method: 'eth_blockNumber', params: [] }),
    ];
    const results = await batch.execute();
    t.equal(results.length, 3, 'web3.js: one answer for each call');
    t.match(results[0], { result: chainHex });
    t.match(results[1], { error: { code: SCOPE_CODE, message: REFUSED } });
    t.match(results[2], { result: /^0x/ });
    await Promise.allSettled(answers);
  });

  t.test('a token that does not open the door (401): what each library reports', async (t) => {
    const none = 'not-a-token';
    const invalid = { code: -32600, message: 'the provided auth token is invalid' };
    t.match(
      await ethersProvider(gateway, none)
        .getBlockNumber()
        .then(
          () => null,
          (error: unknown) => error,
        ),
      { code: 'SERVER_ERROR', info: { responseStatus: '401 Unauthorized' } },
      'ethers: SERVER_ERROR, the status in info',
    );
    const fromViem = await viemClient(root, none)
      .getBlockNumber()
      .then(
        () => null,
        (error: unknown) => error,
      );
    t.ok(fromViem instanceof InvalidRequestRpcError, "viem: InvalidRequestRpcError, from the body's -32600");
    t.match(fromViem, { code: -32600, cause: { status: 401 } });
    const fromWeb3 = await web3Client(root, none)
      .eth.getBlockNumber()
      .then(
        () => null,
        (error: unknown) => error,
      );
    t.ok(fromWeb3 instanceof ResponseError, 'web3.js: ResponseError');
    t.match(fromWeb3, { statusCode: 401, cause: invalid });
  });

  t.test("a token past its rate (429): each library shows the reason, and ethers' own retries of a 429", async (t) => {
    const limited = await gateway.cliToken('--rate-limit', '1/h', '--burst', '1');
    const reason = /^the provided auth token is past its rate limit; retry in \d+ s$/;
    t.equal(
      (await jsonrpc(root, 'eth_chainId', [], 1, [['Authorization', `Bearer ${limited}`]])).result,
      chainHex,
      'the burst of 1, spent',
    );

    // ethers retries a 429 itself, up to 12 times, reading Retry-After as milliseconds; a
    // dapp that wants the refusal at once says so with retryFunc.
    const request = new FetchRequest(root);
    request.setHeader('Authorization', `Bearer ${limited}`);
    request.retryFunc = async () => false;
    const provider = new JsonRpcProvider(request, chainId, { staticNetwork: true, batchMaxCount: 1, cacheTimeout: -1 });
    t.teardown(() => provider.destroy());
    const fromEthers = (await provider.getBlockNumber().then(
      () => null,
      (error: unknown) => error,
    )) as { info?: { responseBody?: string } } | null;
    t.match(fromEthers, { code: 'SERVER_ERROR', info: { responseStatus: '429 Too Many Requests' } }, 'ethers: SERVER_ERROR 429');
    t.match(
      JSON.parse(fromEthers?.info?.responseBody ?? '{}'),
      { error: { code: -32005, message: reason } },
      'ethers: the reason in info.responseBody',
    );

    const fromViem = await viemClient(root, limited)
      .getBlockNumber()
      .then(
        () => null,
        (error: unknown) => error,
      );
    t.ok(
      fromViem instanceof LimitExceededRpcError,
      "viem: LimitExceededRpcError (-32005, EIP-1474's limit exceeded), which viem backs off on",
    );
    t.match(fromViem, { code: -32005, details: reason });

    const fromWeb3 = await web3Client(root, limited)
      .eth.getBlockNumber()
      .then(
        () => null,
        (error: unknown) => error,
      );
    t.ok(fromWeb3 instanceof ResponseError, 'web3.js: ResponseError');
    t.match(
      fromWeb3,
      { statusCode: 429, message: /^Returned error: the provided auth token is past its rate limit; retry in \d+ s$/ },
      'web3.js: the reason in its message (the answer echoes the call\'s id; with id null web3.js showed "Returned error: ")',
    );
  });

  /** A WebSocket with the token in its Authorization header, as a backend opens one. */
  const socketWith = (token: string) => () => new WebSocket(wsRoot, { headers: { authorization: `Bearer ${token}` } });

  t.test("WebSocket: newHeads subscriptions through the gateway, a scoped token's refusal, and a revoke that ends one", async (t) => {
    const ethers = new WebSocketProvider(socketWith(reader), chainId, { staticNetwork: true });
    t.teardown(() => ethers.destroy());
    const head = new Promise<number>((resolve) => {
      void ethers.once('block', resolve);
    });
    t.ok((await minedUntil(node, head)) >= 1, 'ethers: a new head, pushed by eth_subscribe("newHeads")');
    const refused = await ethers.broadcastTransaction(raw).then(
      () => null,
      (error: unknown) => error,
    );
    t.match(refused, { code: 'UNKNOWN_ERROR', error: { code: SCOPE_CODE, message: REFUSED } }, 'ethers over WebSocket: the same error');

    const web3 = new Web3(new Web3Socket(wsRoot, { headers: { authorization: `Bearer ${reader}` } }));
    t.teardown(() => web3.currentProvider?.disconnect());
    const subscription = await web3.eth.subscribe('newHeads');
    const header = new Promise<unknown>((resolve) => subscription.on('data', resolve));
    t.match(await minedUntil(node, header), { number: BigInt }, 'web3.js: a new head');

    const viemToken = await gateway.cliToken('--methods', '@subscribe');
    const viem = createPublicClient({ transport: webSocket(`${wsRoot}?access_token=${viemToken}`, { retryCount: 0, reconnect: false }) });
    t.teardown(async () => (await viem.transport.getRpcClient()).close());
    const viemHead = new Promise<bigint>((resolve) => {
      const unwatch = viem.watchBlockNumber({
        onBlockNumber: (n) => {
          unwatch();
          resolve(n);
        },
      });
    });
    t.ok(
      (await minedUntil(node, viemHead)) >= 1n,
      "viem: a new head (a browser's WebSocket sends no headers: the token in access_token, --api-auth-query-token)",
    );

    const doomed = await gateway.cliToken('--methods', '@subscribe');
    const watched = new WebSocketProvider(socketWith(doomed), chainId, { staticNetwork: true });
    await minedUntil(
      node,
      new Promise<number>((resolve) => {
        void watched.once('block', resolve);
      }),
    );
    const socket = watched.websocket as unknown as WebSocket;
    const closed = once(socket, 'close') as Promise<[number, Buffer]>;
    t.match(await revokeToken(server.url, server.password, doomed), { success: true });
    const [code, reason] = await closed;
    t.equal(code, 1008, "the revoke ends the subscription's session: close 1008");
    t.equal(reason.toString(), 'the provided auth token was revoked');
    await watched.destroy();
  });
}

const viemClient = (url: string, token: string) =>
  createPublicClient({ transport: http(url, { fetchOptions: { headers: { authorization: `Bearer ${token}` } }, retryCount: 0 }) });
const web3Client = (url: string, token: string) =>
  new Web3(new HttpProvider(url, { providerOptions: { headers: { authorization: `Bearer ${token}` } } }));

for (const gateway of gateways) t.test(`${gateway.node.name} behind api-auth`, async (t) => suite(t, gateway));

t.test('a node that does not answer (502): what each library reports', async (t) => {
  // A gateway whose node is gone: 502 with -32044, which viem read as -32004, "method not supported", before.
  const orphan = await startServer(t, { args: ['--upstream', `http://127.0.0.1:${await closedPort()}`] });
  const token = await newToken(orphan.url, orphan.password, ['/']);
  const orphanRoot = `${orphan.url}/`;
  const request = new FetchRequest(orphanRoot);
  request.setHeader('Authorization', `Bearer ${token}`);
  const provider = new JsonRpcProvider(request, 1337, { staticNetwork: true, cacheTimeout: -1 });
  t.match(
    await provider.getBlockNumber().then(
      () => null,
      (error: unknown) => error,
    ),
    { code: 'SERVER_ERROR', info: { responseStatus: '502 Bad Gateway' } },
    'ethers: SERVER_ERROR 502',
  );
  provider.destroy();
  const gone = await viemClient(orphanRoot, token)
    .getBlockNumber()
    .then(
      () => null,
      (error: unknown) => error,
    );
  t.notOk(gone instanceof MethodNotSupportedRpcError, 'viem: not "method not supported"');
  t.ok(gone instanceof RpcRequestError, 'viem: RpcRequestError');
  t.match(gone, { code: -32044, status: 502 }, 'viem: the code as sent, with the status');
  t.match(
    await web3Client(orphanRoot, token)
      .eth.getBlockNumber()
      .then(
        () => null,
        (error: unknown) => error,
      ),
    { statusCode: 502, cause: { code: -32044 }, message: 'Returned error: the upstream node refused the connection' },
    'web3.js: ResponseError 502, the code as sent, and the reason (the answer echoes the call\'s id: with id null, web3.js showed "Returned error: ")',
  );
});
