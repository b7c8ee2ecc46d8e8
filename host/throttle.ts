// Password guessing costs time. Each client address, and all of them together, may fail
// a few password checks for free; every failure past that doubles the wait before the
// next check is even attempted, up to a ceiling. A quiet spell forgets the failures, a
// correct password forgets its address's. A waiting client is refused before its body is
// read and before any hashing, so a flood of wrong passwords costs the node almost
// nothing.

export interface ThrottleRule {
  /** Failures that cost no wait. */
  readonly free: number;
  /** The wait after the first failure past the free ones, in ms; it doubles with each next one. */
  readonly firstDelay: number;
  /** The longest wait, in ms. */
  readonly maxDelay: number;
  /** A spell without failures this long (ms) forgets them. */
  readonly forgetAfter: number;
}

export const PER_CLIENT: ThrottleRule = { free: 3, firstDelay: 1000, maxDelay: 5 * 60_000, forgetAfter: 15 * 60_000 };
export const OVERALL: ThrottleRule = { free: 100, firstDelay: 1000, maxDelay: 60_000, forgetAfter: 60_000 };
/** Addresses tracked at once; past it the longest-quiet ones are forgotten (the overall rule still holds). */
export const MAX_CLIENTS = 10_000;

interface Failures {
  count: number;
  last: number;
  /** No check before this time (ms). */
  until: number;
}

function fail(f: Failures, rule: ThrottleRule, now: number): void {
  if (now - f.last > rule.forgetAfter) f.count = 0;
  f.count++;
  f.last = now;
  const over = f.count - rule.free;
  f.until = over > 0 ? now + Math.min(rule.firstDelay * 2 ** (over - 1), rule.maxDelay) : 0;
}

export class PasswordThrottle {
  private readonly clients = new Map<string, Failures>();
  private readonly overall: Failures = { count: 0, last: 0, until: 0 };

  constructor(
    private readonly perClient: ThrottleRule = PER_CLIENT,
    private readonly all: ThrottleRule = OVERALL,
    private readonly maxClients = MAX_CLIENTS,
  ) {}

  /** Whole seconds this client must wait before its next password check; 0 when it may go ahead. */
  retryAfter(address: string, now: number): number {
    const until = Math.max(this.overall.until, this.clients.get(clientKey(address))?.until ?? 0);
    return until > now ? Math.ceil((until - now) / 1000) : 0;
  }

  failed(address: string, now: number): void {
    const key = clientKey(address);
    let f = this.clients.get(key);
    if (f === undefined) {
      f = { count: 0, last: 0, until: 0 };
      this.makeRoom();
    } else {
      // Re-inserted below, so the map stays in order of last failure.
      this.clients.delete(key);
    }
    fail(f, this.perClient, now);
    this.clients.set(key, f);
    fail(this.overall, this.all, now);
  }

  succeeded(address: string): void {
    this.clients.delete(clientKey(address));
  }

  private makeRoom(): void {
    if (this.clients.size < this.maxClients) return;
    const oldest = this.clients.keys().next();
    if (!oldest.done) this.clients.delete(oldest.value);
  }
}

/**
 * The unit a client is throttled by: its IPv4 address, or the /64 of an IPv6 address
 * (one subscriber's allocation, which a guesser could otherwise walk through).
 */
export function clientKey(address: string): string {
  if (!address.includes(':')) return address;
  return address.split(':').slice(0, 4).join(':');
}

/** How long a waiting client's refusal is held back, in ms. */
export const TARPIT_DELAY = 1000;
/** Refusals held at once; past it they go out at once. */
export const TARPIT_MAX = 4096;

/**
 * Holds back the refusals of clients that must wait, and sends them in one batch up to
 * `delayMs` later. A guesser's connections then sit idle instead of spinning through
 * refusals as fast as the node can write them: a client that waits for each answer gets
 * at most one refusal per connection per second, at the cost of one closure each.
 */
export class Tarpit {
  private held: Array<() => void> = [];
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly delayMs = TARPIT_DELAY, private readonly max = TARPIT_MAX) {}

  /** Runs `answer` in a moment, or now when too many are held already. */
  hold(answer: () => void): void {
    if (this.held.length >= this.max) {
      answer();
      return;
    }
    this.held.push(answer);
    this.timer ??= setTimeout(() => this.release(), this.delayMs);
  }

  private release(): void {
    this.timer = undefined;
    const batch = this.held;
    this.held = [];
    for (const answer of batch) answer();
  }
}
