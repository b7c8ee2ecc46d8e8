// Types of client-ranges.js, for the TypeScript tests.
export const CLIENT_RANGES: readonly { range: string; holds: readonly string[]; not: readonly string[] }[];
