// The Ethereum nodes test/system/ethereum.test.ts puts behind api-auth: ganache 7.9 (a
// devDependency) and geth 1.17.10 in --dev mode (scripts/setup-tests.sh installs it at
// GETH). Each runs on a free loopback port that serves JSON-RPC at "/" over HTTP and
// WebSocket alike, as api-auth's one --upstream needs, with chain id 1337, a private key
// that holds ether for a library to sign with, and a way to mine a block; each is stopped
// when the test that started it ends.
import type { Test } from 'tap';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { computeAddress } from 'ethers';
import { ROOT, tempDir } from './server.js';
import { closedPort } from './upstream.js';

export interface EthNode {
  name: 'ganache' | 'geth';
  /** http://127.0.0.1:<port>/ (ws:// on the same port). */
  url: string;
  chainId: number;
  /** What the node answers to web3_clientVersion. */
  client: RegExp;
  /** A private key whose account holds ether (100 ETH or more). */
  key: `0x${string}`;
  /** Mines one block, asking the node itself (not through a gateway). */
  mine(): Promise<void>;
}

/** Where scripts/setup-tests.sh installs geth (on the docs test's machine's PATH too). */
export const GETH = '/usr/local/bin/geth';
export const GETH_VERSION = '1.17.10';

/** Both nodes' chain id: ganache's is set to geth --dev's. */
const CHAIN_ID = 1337;

/** ganache --wallet.deterministic's first account. geth's dev account funds it too. */
const KEY = '0x4f3edf983ac636a65a842ce7c78d9aa706d3b113bce9c46f30d7d21715b23b1d';

/** A JSON-RPC call to the node itself: its result, or an Error with the node's error. */
export async function nodeCall(url: string, method: string, params: unknown[] = []): Promise<unknown> {
  const answer = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', method, params, id: 1 }),
  });
  const body = (await answer.json()) as { result?: unknown; error?: { message: string } };
  if (body.error) throw new Error(`${method}: ${body.error.message}`);
  return body.result;
}

/** Spawns `command`, stopped (SIGTERM, then its exit awaited) when `t` ends; resolves with `url` once it answers eth_chainId. */
async function run(t: Test, name: string, command: string, args: string[], url: string): Promise<void> {
  const child = spawn(command, args, { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  const exited = once(child, 'exit');
  t.teardown(async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    await exited;
  });
  for (;;) {
    try {
      await nodeCall(url, 'eth_chainId');
      return;
    } catch {
      // Not listening yet.
    }
    if (child.exitCode !== null) throw new Error(`${name} ended (exit ${child.exitCode}) before it answered: ${stderr}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** ganache, with its deterministic accounts; it mines each transaction at once, and a block on evm_mine. */
export async function startGanache(t: Test): Promise<EthNode> {
  const port = await closedPort();
  const url = `http://127.0.0.1:${port}/`;
  await run(
    t,
    'ganache',
    process.execPath,
    [
      'node_modules/.bin/ganache',
      '--server.host',
      '127.0.0.1',
      '--server.port',
      String(port),
      '--wallet.deterministic',
      '--logging.quiet',
      '--chain.chainId',
      String(CHAIN_ID),
    ],
    url,
  );
  return {
    name: 'ganache',
    url,
    chainId: CHAIN_ID,
    client: /^Ganache\/v7\.9\.\d+\//,
    key: KEY,
    mine: async () => {
      await nodeCall(url, 'evm_mine');
    },
  };
}

/** The geth at GETH, checked to be GETH_VERSION: a missing or other geth is an error that says how to install it. */
function checkGeth(): void {
  const install = `run scripts/setup-tests.sh, which installs geth ${GETH_VERSION} at ${GETH}`;
  if (!existsSync(GETH)) throw new Error(`geth is not installed at ${GETH}: ${install}`);
  const version = execFileSync(GETH, ['version'], { encoding: 'utf8' });
  if (!version.split('\n').includes(`Version: ${GETH_VERSION}-stable`))
    throw new Error(`${GETH} is not geth ${GETH_VERSION} (${version.split('\n')[1] ?? version}): ${install}`);
}

/**
 * geth --dev: a one-node chain (id 1337) that mines a block for each transaction it is
 * sent (--dev.period 0) and none otherwise, in a data folder of its own. HTTP and
 * WebSocket on one port: geth serves both on one listener when --ws.port is --http.port.
 * Its dev account (unlocked, eth_accounts[0]) sends KEY's account 100 ETH first, since
 * the libraries sign locally; a block is mined by a transfer of 0 from the dev account to itself.
 */
export async function startGeth(t: Test): Promise<EthNode> {
  checkGeth();
  const port = await closedPort();
  const url = `http://127.0.0.1:${port}/`;
  await run(
    t,
    'geth',
    GETH,
    [
      '--dev',
      '--dev.period',
      '0',
      '--datadir',
      tempDir(t),
      '--ipcdisable',
      '--nodiscover',
      '--verbosity',
      '1',
      '--http',
      '--http.addr',
      '127.0.0.1',
      '--http.port',
      String(port),
      '--http.api',
      'eth,net,web3',
      '--ws',
      '--ws.addr',
      '127.0.0.1',
      '--ws.port',
      String(port),
      '--ws.api',
      'eth,net,web3',
    ],
    url,
  );
  const chainId = Number(await nodeCall(url, 'eth_chainId'));
  if (chainId !== CHAIN_ID) throw new Error(`geth --dev's chain id is ${chainId}, not ${CHAIN_ID}`);
  const [dev] = (await nodeCall(url, 'eth_accounts')) as string[];
  // A receipt, or null while there is none yet. For a while after it starts, geth answers
  // receipts with this error instead, until its transaction indexer has caught up: waiting
  // for the first transfer's receipt waits that out too, so the libraries never see it.
  const indexing = 'eth_getTransactionReceipt: transaction indexing is in progress';
  const receipt = (hash: unknown): Promise<unknown> =>
    nodeCall(url, 'eth_getTransactionReceipt', [hash]).catch((error: Error) => {
      if (error.message === indexing) return null;
      throw error;
    });
  const transfer = async (to: string, value: bigint): Promise<void> => {
    const hash = await nodeCall(url, 'eth_sendTransaction', [{ from: dev, to, value: `0x${value.toString(16)}` }]);
    // Mined as it arrives, and its receipt there some time after (geth indexes it apart).
    while ((await receipt(hash)) === null) await new Promise((resolve) => setTimeout(resolve, 20));
  };
  await transfer(computeAddress(KEY), 100n * 10n ** 18n);
  return {
    name: 'geth',
    url,
    chainId,
    client: new RegExp(`^Geth/v${GETH_VERSION.replaceAll('.', '\\.')}-stable/`),
    key: KEY,
    mine: () => transfer(dev, 0n),
  };
}
