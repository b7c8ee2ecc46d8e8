// The Go-style durations that flags, config files and auth.newToken's expiresIn share, in
// a module of its own: the options' schema and the token service both read them, and
// neither should import the other for it.

/**
 * A Go-style duration (`90s`, `15m`, `12h`, `1h30m`, `1.5h`; units ns, us, µs, ms, s, m, h)
 * in whole seconds. Null when the text is not a duration or not a whole number of seconds.
 */
export function parseDuration(text: string): number | null {
  if (text === '') return null;
  const part = /(\d+)(?:\.(\d*))?(ns|us|µs|μs|ms|h|m|s)/y;
  let nanos = 0n;
  let at = 0;
  while (at < text.length) {
    part.lastIndex = at;
    const m = part.exec(text);
    if (m === null) return null;
    const unit = UNIT_NANOS[m[3]];
    const fraction = m[2] ?? '';
    nanos += BigInt(m[1]) * unit;
    if (fraction !== '') nanos += (BigInt(fraction) * unit) / 10n ** BigInt(fraction.length);
    at = part.lastIndex;
  }
  return nanos % NANOS_PER_SECOND === 0n ? Number(nanos / NANOS_PER_SECOND) : null;
}

const NANOS_PER_SECOND = 1_000_000_000n;

const UNIT_NANOS: Record<string, bigint> = {
  ns: 1n,
  us: 1_000n,
  µs: 1_000n,
  μs: 1_000n,
  ms: 1_000_000n,
  s: NANOS_PER_SECOND,
  m: 60n * NANOS_PER_SECOND,
  h: 3600n * NANOS_PER_SECOND,
};

/**
 * What "never" stands for where a token's lifetime is written (--max-token-lifetime,
 * expiresIn): the longest lifetime a token carries, 2^32 - 1 seconds (about 136 years),
 * the most the core takes. A token's expiry is signed into it, so a token that never
 * expires is one that expires past any node's life.
 */
export const NEVER = 'never';
export const NEVER_SECONDS = 0xffff_ffff;
