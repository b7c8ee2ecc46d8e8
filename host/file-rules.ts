// The rules a file that steers api-auth must pass, the data folder's (state/data-folder.ts)
// applied to the config file, the password file and the access log: whoever else could
// write one could turn auth off, choose the password or forge log lines. Imports nothing of api-auth's own.
import type { Stats } from 'node:fs';
import { dirname } from 'node:path';

/**
 * Why a file that steers api-auth (its config file, its password file) cannot be trusted,
 * or null: the data folder's rules, for a file and the folder it is in. It must belong to
 * root or this process's user, and neither its group nor others may write it (`what`
 * names it, `harm` says what a writer could do); its folder the same, unless the folder
 * is sticky (/tmp), where others cannot replace a file that is not theirs. A link is
 * refused by the caller's O_NOFOLLOW. Each refusal names the chmod or chown that fixes it.
 */
export function untrustedFile(path: string, file: Stats, folder: Stats, what: string, harm: string): string | null {
  const user = process.geteuid?.();
  const dir = dirname(path);
  for (const [st, name, target] of [
    [file, `${what} ${path}`, path],
    [folder, `the folder of ${what} ${path}, ${dir},`, dir],
  ] as const) {
    if (user !== undefined && st.uid !== 0 && st.uid !== user) {
      return `${name} belongs to user ${st.uid}, not to root or the user api-auth runs as (${user}), who could then ${harm}; chown ${user} ${target}`;
    }
    if ((st.mode & 0o022) !== 0 && !(st === folder && (st.mode & 0o1000) !== 0)) {
      return (
        `${name} can be written by ${writersOf(st.mode)} (mode ${(st.mode & 0o7777).toString(8).padStart(4, '0')}), who could then ${harm}; ` +
        `chmod go-w ${target}`
      );
    }
  }
  return null;
}

/** Who besides the owner can write a file of `mode`. */
export function writersOf(mode: number): string {
  return (mode & 0o020) !== 0 ? ((mode & 0o002) !== 0 ? 'its group and by others' : 'its group') : 'others';
}
