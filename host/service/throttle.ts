// Password guessing costs time. Each client (an IPv4 address, or the /64 of an IPv6
// address) and all clients together have an allowance of wrong passwords: a burst,
// then a fixed rate (the generic cell rate algorithm, GCRA, one "due time" per rate).
// Waiting refills the allowance at that rate and never faster, so any span of time
// holds at most burst + span / interval wrong passwords, whatever the guesser's timing.
//
// A check counts against its client and against everyone from the moment it starts,
// and stays counted while argon2id runs: checks that run at once cannot slip past a
// limit together. Once it is over, a wrong password keeps it counted (from the time it
// started); a right one takes it back and forgives its client's earlier failures (not
// the other clients'); a check that could not run takes it back too.
//
// A waiting client is refused before its body is read and before any hashing, so a
// flood of wrong passwords costs the node almost nothing (http/auth-route.ts, which holds
// the refusals back in its tarpit).
import { isIP } from 'node:net';

/** A burst, then a fixed rate. */
export interface Rate {
  /** Wrong passwords allowed at once, after a quiet spell. */
  readonly burst: number;
  /** Then one per this many ms. */
  readonly interval: number;
}

/** Rates that all hold at once: a short burst at a quick rate, a longer one at a slow rate... */
export type ThrottleRule = readonly Rate[];

/** Each client: 3 at once, then one per 10 s; and 10 at once, then one per 5 min (12 an hour). */
export const PER_CLIENT: ThrottleRule = [
  { burst: 3, interval: 10_000 },
  { burst: 10, interval: 5 * 60_000 },
];
/** All clients together: 100 at once, then one a second (3,600 an hour). */
export const OVERALL: ThrottleRule = [{ burst: 100, interval: 1000 }];
/** Clients tracked at once; past it the longest-idle ones are forgotten (the overall rule still holds). */
export const MAX_CLIENTS = 10_000;

/** What one client, or all of them, may still spend. */
class Allowance {
  /**
   * Per rate, when the wrong passwords counted so far are paid off (ms); at or before
   * now, the whole burst is there. GCRA's "theoretical arrival time".
   */
  private readonly due: number[];
  /** Checks started and not over: counted as wrong until they are. */
  running = 0;

  constructor(private readonly rule: ThrottleRule) {
    this.due = rule.map(() => 0);
  }

  /** ms until one more check may start; 0 or less when it may start now. */
  wait(now: number): number {
    let wait = -Infinity;
    for (let i = 0; i < this.rule.length; i++) {
      const { burst, interval } = this.rule[i];
      // One more check fits while the debt, running checks included, leaves room in the burst.
      const debt = Math.max(this.due[i], now) + this.running * interval - now;
      wait = Math.max(wait, debt - (burst - 1) * interval);
    }
    return wait;
  }

  /** A wrong password, from a check that started at `started`. */
  charge(started: number): void {
    for (let i = 0; i < this.rule.length; i++) this.due[i] = Math.max(this.due[i], started) + this.rule[i].interval;
  }

  forgive(): void {
    this.due.fill(0);
  }
}

/**
 * Told of each change of a wait, to publish it to other threads (threads/throttle-board.ts).
 * The times are when the client, and everyone, may start their next check (ms since the
 * epoch), reckoned from a moment at or before the change: never later than the throttle's
 * own, and so never stricter, whenever they are read.
 */
export interface ThrottleWatcher {
  /** `at`: the moment the times were reckoned from, at or before now (ms). */
  changed(key: string, clientUntil: number, overallUntil: number, at: number): void;
  /** The client is no longer tracked (the table was full): it waits for nothing now. */
  forgot(key: string): void;
}

/** A password check under way: say how it ended, once. */
export class PasswordCheck {
  private over = false;

  /** `ended` runs after each way it ends. */
  constructor(
    private readonly client: Allowance,
    private readonly overall: Allowance,
    private readonly started: number,
    private readonly ended?: (started: number) => void,
  ) {}

  /** The password was wrong: the check stays counted, for its client and overall. */
  failed(): void {
    if (!this.end()) return;
    this.client.charge(this.started);
    this.overall.charge(this.started);
    this.ended?.(this.started);
  }

  /** The password was right: not a guess, and its client's earlier failures are forgiven. */
  succeeded(): void {
    if (!this.end()) return;
    this.client.forgive();
    this.ended?.(this.started);
  }

  /** No password was compared (the hashing queue was full, the hashing failed): nothing counted. */
  abandoned(): void {
    if (this.end()) this.ended?.(this.started);
  }

  private end(): boolean {
    if (this.over) return false;
    this.over = true;
    this.client.running--;
    this.overall.running--;
    return true;
  }
}

export class PasswordThrottle {
  /** In order of last check started: the first is the longest idle. */
  private readonly clients = new Map<string, Allowance>();
  private readonly overall: Allowance;

  /** `watcher`, when given, is told of every change of a wait (see ThrottleWatcher). */
  constructor(
    private readonly perClient: ThrottleRule = PER_CLIENT,
    all: ThrottleRule = OVERALL,
    private readonly maxClients = MAX_CLIENTS,
    private readonly watcher?: ThrottleWatcher,
  ) {
    for (const rate of [...perClient, ...all]) {
      if (!Number.isInteger(rate.burst) || rate.burst < 1 || !(rate.interval > 0)) {
        throw new RangeError(`a throttle rate needs a whole burst of 1 or more and an interval above 0 ms, not ${JSON.stringify(rate)}`);
      }
    }
    this.overall = new Allowance(all);
  }

  /** Whole seconds this client must wait before its next password check; 0 when it may go ahead. `now` in ms. */
  retryAfter(address: string, now: number): number {
    const client = this.clients.get(clientKey(address));
    return seconds(Math.max(this.overall.wait(now), client?.wait(now) ?? 0));
  }

  /**
   * Starts a password check for `address` at `now` (ms), counted from now on; or, when
   * the client or everyone must wait first, the whole seconds to wait, and nothing is
   * counted.
   */
  begin(address: string, now: number): PasswordCheck | number {
    const key = clientKey(address);
    let client = this.clients.get(key);
    const wait = seconds(Math.max(this.overall.wait(now), client?.wait(now) ?? 0));
    if (wait > 0) return wait;
    if (client === undefined) {
      client = new Allowance(this.perClient);
      this.makeRoom();
    } else {
      // Re-inserted below, so the map stays in order of last check.
      this.clients.delete(key);
    }
    this.clients.set(key, client);
    client.running++;
    this.overall.running++;
    const watcher = this.watcher;
    if (watcher === undefined) return new PasswordCheck(client, this.overall, now);
    const counted = client;
    const publish = (at: number): void => {
      // A client forgotten meanwhile has nothing left to publish.
      const until = this.clients.get(key) === counted ? at + counted.wait(at) : -Infinity;
      watcher.changed(key, until, at + this.overall.wait(at), at);
    };
    publish(now);
    return new PasswordCheck(client, this.overall, now, publish);
  }

  private makeRoom(): void {
    if (this.clients.size < this.maxClients) return;
    const oldest = this.clients.keys().next();
    if (oldest.done) return;
    this.clients.delete(oldest.value);
    this.watcher?.forgot(oldest.value);
  }
}

function seconds(ms: number): number {
  return ms > 0 ? Math.ceil(ms / 1000) : 0;
}

/**
 * The unit a client is throttled by. An IPv4 address is itself, also when written as an
 * IPv4-mapped IPv6 address (a dual-stack listener sees `::ffff:192.0.2.7`, or uWS's
 * `0000:0000:0000:0000:0000:ffff:c000:0207`); an IPv6 address is its /64 (one
 * subscriber's allocation, which a guesser could otherwise walk through), in one
 * spelling whatever the address's. Text that is no IP address is a key of its own.
 */
export function clientKey(address: string): string {
  switch (isIP(address)) {
    case 6: {
      const groups = ipv6Groups(address);
      if (groups[0] === 0 && groups[1] === 0 && groups[2] === 0 && groups[3] === 0 && groups[4] === 0 && groups[5] === 0xffff) {
        return `${groups[6] >> 8}.${groups[6] & 0xff}.${groups[7] >> 8}.${groups[7] & 0xff}`;
      }
      return `${groups[0].toString(16)}:${groups[1].toString(16)}:${groups[2].toString(16)}:${groups[3].toString(16)}::/64`;
    }
    case 4:
      // isIP's IPv4 form is dotted decimal without leading zeros: one spelling per address.
      return address;
    default:
      // In brackets, which no key of an IP address holds, so it cannot share one's bucket.
      return `[${address}]`;
  }
}

/** The eight 16-bit groups of an address that isIP() calls IPv6. */
function ipv6Groups(address: string): number[] {
  const zone = address.indexOf('%');
  let text = zone < 0 ? address : address.slice(0, zone);
  // A trailing dotted quad is the last two groups.
  const lastColon = text.lastIndexOf(':');
  const tail = text.slice(lastColon + 1);
  if (tail.includes('.')) {
    const [a, b, c, d] = tail.split('.').map(Number);
    text = `${text.slice(0, lastColon + 1)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  // At most one "::", standing for as many zero groups as are missing.
  const gap = text.indexOf('::');
  const head = gap < 0 ? text.split(':') : text.slice(0, gap) === '' ? [] : text.slice(0, gap).split(':');
  const rest = gap < 0 ? [] : text.slice(gap + 2) === '' ? [] : text.slice(gap + 2).split(':');
  const words = [...head, ...Array<string>(8 - head.length - rest.length).fill('0'), ...rest];
  return words.map((word) => parseInt(word, 16));
}
