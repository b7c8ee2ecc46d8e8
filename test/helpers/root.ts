// What only root can do (mount a file system, enter namespaces, give a file to another
// user). A test that needs it runs wherever the suite runs as root, as CI does, and fails
// there when it fails; run as another user, it is skipped with one line naming the need,
// so that a clone in a home folder passes `npm test` without sudo.
export const IS_ROOT = process.getuid?.() === 0;

/** tap's options for a test that needs root for `what`: skipped, saying so, when not root. */
export function needsRoot(what: string): { skip: string | false } {
  return { skip: IS_ROOT ? false : `needs root: ${what}; run the suite as root (as CI does) to include it` };
}
