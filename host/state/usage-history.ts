// The usage history (service/usage-history.ts) of the data folder, kept across restarts
// in the file `usage-history`, written whole (through `usage-history.tmp`) as the `usage`
// file is (usage.ts), on its cadence and at a clean stop: a kill -9 loses what was
// counted since the last save, at most USAGE_SAVE_MS plus one tick, as for `requests`.
//
// The file holds `{"version":1,"requests":[firstHour, count, ...],"refusals":{"<reason>":
// [firstHour, count, ...], ...},"tokens":[[serial, firstHour, count, ...], ...]}`
// (readHistory). A file that cannot be read as that, or is not a regular file, is dropped
// with a warning: the history starts empty, and the next save replaces it.
import { join } from 'node:path';
import type { Logger } from '../ops/log.js';
import { errorFields } from '../ops/log.js';
import { readHistory } from '../service/usage-history.js';
import type { UsageHistory } from '../service/usage-history.js';
import { writeDataFile } from './data-folder.js';
import { readUsageFile } from './usage.js';
import type { HistorySaver } from './usage.js';

/** The history file's name in the data folder. */
export const HISTORY_FILE = 'usage-history';
const HISTORY_VERSION = 1;

/** Reads the saved history into `history` (the tokens `keep` says are live), and saves it when asked. */
export class HistoryFile implements HistorySaver {
  /** The history's version the file holds, so that an idle service does not write it again. */
  private written = -1;

  constructor(
    private readonly dir: string,
    private readonly history: UsageHistory,
    private readonly log: Logger,
  ) {}

  async restore(keep: (serial: number) => boolean): Promise<void> {
    const path = join(this.dir, HISTORY_FILE);
    const bytes = await readUsageFile(path, 'usage history file');
    // What the file holds (nothing, or the history restored) needs no write until something changes.
    this.written = this.history.version;
    if (bytes === undefined) return;
    let reason: string;
    if (typeof bytes === 'string') {
      reason = bytes;
    } else {
      let parsed: unknown;
      try {
        parsed = JSON.parse(bytes.toString('utf8'));
      } catch {
        parsed = undefined;
      }
      const version = (parsed as { version?: unknown } | null | undefined)?.version;
      const read =
        parsed === undefined
          ? 'it is not JSON'
          : version !== HISTORY_VERSION
            ? `it is not a usage history file of version ${HISTORY_VERSION}`
            : readHistory(parsed);
      if (typeof read !== 'string') {
        this.history.restore(read, keep);
        this.written = this.history.version;
        return;
      }
      reason = read;
    }
    this.written = -1;
    this.log.warn(
      'the usage history file is damaged, so the usage history (auth.usageHistory) starts empty; it is replaced at the next save',
      { path, reason },
    );
  }

  /** Samples, then writes the history when it changed; a failure is logged, and the next save tries again. */
  async save(): Promise<void> {
    await this.history.sample();
    const version = this.history.version;
    if (version === this.written) return;
    try {
      const text = await this.history.encodeText({ version: HISTORY_VERSION });
      await writeDataFile(this.dir, HISTORY_FILE, Buffer.from(text, 'utf8'));
      this.written = version;
    } catch (error) {
      this.log.error('cannot write the usage history file; the history since the last save would be lost by a crash', {
        path: join(this.dir, HISTORY_FILE),
        ...errorFields(error),
      });
    }
  }
}
