// The usage counters (lastUsedAt, requests) of the data folder's live tokens, kept across
// restarts. The core counts every call in memory, on every thread; writing each count to
// disk would cost every request an fsync, so the owner writes a snapshot instead: every
// USAGE_SAVE_MS of the service's clock and at a clean stop, atomically as the state file
// is written. A kill -9 loses what was counted since the last snapshot, at most
// USAGE_SAVE_MS plus one tick (USAGE_TICK_MS) of calls (docs/guides/limits.md, Usage).
//
// The file holds `{"version":1,"tokens":[[serial, requests, lastUsedMs], ...],
// "quota":[[serial, window, calls], ...]}`, one entry per live token that has been used,
// and one per token with a quota that has calls counted in its current window (a file
// without `quota`, from before quotas, has none). A file that cannot be read as that is not
// worth refusing to start over: its counts are dropped, with a warning. So is one that is
// not a regular file, and one whose entries are out of bounds (readUsageCounts: requests at
// most MAX_USAGE_REQUESTS, lastUsedMs at most MAX_LAST_USED_MS, each serial once).
import { constants, promises as fs } from 'node:fs';
import { join } from 'node:path';
import type { Clock } from '../clock.js';
import type { Core } from '../core/core.js';
import type { Logger } from '../ops/log.js';
import { errorFields } from '../ops/log.js';
import { quotaCounts, readQuotaCounts, readUsageCounts, usageCounts } from '../service/ledger.js';
import type { Inventory, QuotaCount, UsageCount } from '../service/ledger.js';
import { StateError } from '../errors.js';
import { writeDataFile } from './data-folder.js';

/** What else the saver writes on its cadence (state/usage-history.ts); its failures are its own to log. */
export interface HistorySaver {
  /** `last`: the clean stop's save, after which nothing more is counted. */
  save(last?: boolean): Promise<void>;
  /** Releases what it holds open, after its last save. */
  close(): Promise<void>;
}

/**
 * The usage file's bytes; undefined when there is none; the reason when it is not a regular
 * file (a folder, a FIFO, a device, a link), which counts as a damaged file. It is opened
 * with O_NOFOLLOW and O_NONBLOCK (off the event loop), so neither a link nor a FIFO with no
 * writer can make the start wait, and checked with fstat before anything is read.
 */
export async function readUsageFile(path: string, what = 'usage file'): Promise<Buffer | string | undefined> {
  let handle: fs.FileHandle;
  try {
    handle = await fs.open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return undefined;
    if (code === 'ELOOP') return 'it is a symbolic link, not a regular file';
    throw new StateError(`cannot read ${what} ${path} (${code ?? (e as Error).message}); check its owner and permissions`);
  }
  try {
    const stat = await handle.stat();
    if (stat.isDirectory()) return 'it is a folder, not a regular file; move it away, or the saves cannot replace it';
    if (!stat.isFile()) return 'it is not a regular file (a FIFO, a socket or a device)';
    return await handle.readFile();
  } finally {
    await handle.close();
  }
}

/** The usage file's name in the data folder. */
export const USAGE_FILE = 'usage';
const USAGE_VERSION = 1;
/** How often, by the service's clock, the counters are written. */
export const USAGE_SAVE_MS = 30_000;
/** How often (real time) the owner looks whether a snapshot is due. */
export const USAGE_TICK_MS = 1000;

/** The counts of a usage file; undefined (with the reason) when it is not one. */
function decodeUsage(bytes: Buffer): { tokens: UsageCount[]; quota: QuotaCount[] } | string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(bytes.toString('utf8'));
  } catch {
    return 'it is not JSON';
  }
  const file = parsed as { version?: unknown; tokens?: unknown; quota?: unknown };
  if (parsed === null || typeof parsed !== 'object' || file.version !== USAGE_VERSION || !Array.isArray(file.tokens)) {
    return `it is not a usage file of version ${USAGE_VERSION}`;
  }
  const tokens = readUsageCounts(file.tokens);
  if (typeof tokens === 'string') return tokens;
  const quota = readQuotaCounts(file.quota);
  if (typeof quota === 'string') return quota;
  return { tokens, quota };
}

/**
 * Writes the live tokens' usage to the data folder on the service's clock, and once more
 * at `close`. `restore` first: it adds the saved counts to the core's (the owner's call).
 */
export class UsageSaver {
  private timer: NodeJS.Timeout | undefined;
  private lastSave: number;
  private saving: Promise<void> | undefined;
  /** What the file holds, so that an idle service does not write it again. */
  private written = '';

  constructor(
    private readonly dir: string,
    private readonly core: Core,
    private readonly inventory: Inventory,
    private readonly clock: Clock,
    private readonly log: Logger,
    private readonly history?: HistorySaver,
  ) {
    this.lastSave = clock();
  }

  /** Adds the saved counts of the tokens still live to the core's; a damaged file is dropped with a warning. */
  async restore(): Promise<void> {
    const path = join(this.dir, USAGE_FILE);
    const bytes = await readUsageFile(path);
    if (bytes === undefined) return;
    const counted = typeof bytes === 'string' ? bytes : decodeUsage(bytes);
    if (typeof counted === 'string') {
      this.log.warn('the usage file is damaged, so usage (requests, lastUsedAt) counts again from 0; it is replaced at the next save', {
        path,
        reason: counted,
      });
      return;
    }
    let unplaced = 0;
    for (const [serial, requests, lastUsedMs] of counted.tokens) {
      const entry = this.inventory.get(serial);
      if (entry !== undefined && !this.core.restoreUsage(serial, entry.expiry, entry.grant, requests, lastUsedMs)) unplaced++;
    }
    // A count of a window that has ended since is restored too: the core counts a new window from 0.
    for (const [serial, window, calls] of counted.quota) {
      const entry = this.inventory.get(serial);
      if (entry !== undefined && !this.core.setQuota(serial, entry.expiry, window, calls, true)) unplaced++;
    }
    if (unplaced > 0) this.log.warn("the core's usage tables had no room for the saved usage of some tokens", { tokens: unplaced });
  }

  /** Starts the snapshots. */
  start(): void {
    this.timer = setInterval(() => {
      if (this.saving === undefined && this.clock() - this.lastSave >= USAGE_SAVE_MS) void this.save();
    }, USAGE_TICK_MS).unref();
  }

  /** Stops the snapshots and writes the last one (a clean stop). */
  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.saving;
    await this.save(true);
    await this.history?.close();
  }

  private save(last = false): Promise<void> {
    // The history beside the counts, on the same cadence: a kill -9 loses as much of either.
    const history = this.history?.save(last);
    this.lastSave = this.clock();
    const live = this.inventory.list();
    const tokens = usageCounts(live, this.core);
    const quota = quotaCounts(live, this.core, this.lastSave);
    const text = JSON.stringify(quota.length === 0 ? { version: USAGE_VERSION, tokens } : { version: USAGE_VERSION, tokens, quota });
    if (text === this.written && history === undefined) return Promise.resolve();
    const written = (): void => {
      this.written = text;
    };
    // On a failure the counts stay in memory, and the next save tries again.
    const failed = (error: unknown): void =>
      this.log.error('cannot write the usage file; usage since the last save would be lost by a crash', {
        path: join(this.dir, USAGE_FILE),
        ...errorFields(error),
      });
    this.saving = Promise.all([
      history,
      text === this.written ? undefined : writeDataFile(this.dir, USAGE_FILE, new TextEncoder().encode(text)).then(written, failed),
    ])
      .then(() => undefined)
      .finally(() => {
        this.saving = undefined;
      });
    return this.saving;
  }
}
