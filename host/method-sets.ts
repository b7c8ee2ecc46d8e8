// Named sets of JSON-RPC methods for `api-auth token new --methods`: `@read`, `@send`,
// `@subscribe`..., each expanded here into the plain method names it stands for, so that
// a token holds only names and the gate's rules stay as they are (scope.ts). The sets
// are what Ethereum clients call for their common uses, the calls ethers, viem and web3.js
// make on their own included (docs/guides/ethereum.md says which library needs which).

/** The sets, by name; each a list of exact method names. */
export const METHOD_SETS: Readonly<Record<string, readonly string[]>> = (() => {
  // What every library asks before anything else: which chain, and how far it is.
  const chain = ['eth_chainId', 'net_version', 'eth_blockNumber'];
  const read = [
    ...chain,
    'web3_clientVersion',
    'net_listening',
    'eth_syncing',
    'eth_gasPrice',
    'eth_maxPriorityFeePerGas',
    'eth_feeHistory',
    'eth_getBalance',
    'eth_getCode',
    'eth_getStorageAt',
    'eth_getTransactionCount',
    'eth_call',
    'eth_estimateGas',
    'eth_createAccessList',
    'eth_getBlockByNumber',
    'eth_getBlockByHash',
    'eth_getBlockTransactionCountByNumber',
    'eth_getBlockTransactionCountByHash',
    'eth_getTransactionByHash',
    'eth_getTransactionByBlockNumberAndIndex',
    'eth_getTransactionByBlockHashAndIndex',
    'eth_getTransactionReceipt',
    'eth_getLogs',
    'eth_getProof',
  ];
  // A transaction signed by the client (its keys never reach the node), and what sending
  // one reads first: the nonce, the fees, the gas, then the receipt.
  const send = [...read, 'eth_sendRawTransaction'];
  // Pushed over WebSocket (newHeads, logs, newPendingTransactions).
  const subscribe = [...chain, 'eth_subscribe', 'eth_unsubscribe'];
  // Polled over HTTP: ethers' contract.on() and provider.on('block'), viem's watch* without a WebSocket.
  const filter = [
    ...chain,
    'eth_newFilter',
    'eth_newBlockFilter',
    'eth_newPendingTransactionFilter',
    'eth_getFilterChanges',
    'eth_getFilterLogs',
    'eth_uninstallFilter',
  ];
  return Object.freeze({ '@chain': chain, '@read': read, '@send': send, '@subscribe': subscribe, '@filter': filter });
})();

/**
 * The plain method patterns that `patterns` stand for: each `@set` expanded, duplicates
 * dropped, in the order first given. Throws with the known sets for an unknown one.
 */
export function expandMethodSets(patterns: readonly string[]): string[] {
  const methods = new Set<string>();
  for (const pattern of patterns) {
    if (!pattern.startsWith('@')) {
      methods.add(pattern);
      continue;
    }
    const set = METHOD_SETS[pattern];
    if (set === undefined) {
      throw new Error(`unknown method set ${JSON.stringify(pattern)}; the sets are ${Object.keys(METHOD_SETS).join(', ')}`);
    }
    for (const method of set) methods.add(method);
  }
  return [...methods];
}

/**
 * `methods` as a person reads them: each set whose every method is there shown by its
 * name (`@read`), the largest first, and a set inside one already shown (`@chain` in
 * `@read`) not again; the other names as they are, in their order. The node keeps plain
 * names (expandMethodSets), so `token list` gives back what `token new --methods` took.
 */
export function collapseMethodSets(methods: readonly string[]): string[] {
  const given = new Set(methods);
  const shown: string[] = [];
  const covered = new Set<string>();
  const bySize = Object.entries(METHOD_SETS).sort(([, a], [, b]) => b.length - a.length);
  for (const [name, set] of bySize) {
    if (!set.every((method) => given.has(method)) || set.every((method) => covered.has(method))) continue;
    shown.push(name);
    for (const method of set) covered.add(method);
  }
  // In the sets' own order (@chain, @read, ...), as the help lists them.
  const order = Object.keys(METHOD_SETS);
  shown.sort((a, b) => order.indexOf(a) - order.indexOf(b));
  return [...shown, ...methods.filter((method) => !covered.has(method))];
}
