// Where the refusals of password guessers wait. A client the throttle makes wait is
// refused before its body is read, and the refusal is held back a moment: its
// connections then idle rather than spin.

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

  constructor(
    private readonly delayMs = TARPIT_DELAY,
    private readonly max = TARPIT_MAX,
  ) {}

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
