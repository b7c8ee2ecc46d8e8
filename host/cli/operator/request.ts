// What each operator command asks of the node: its JSON-RPC method, and its params with
// the secrets read (secrets.ts) and --methods' named sets expanded.
import { UsageError } from '../../errors.js';
import { expandMethodSets } from '../../method-sets.js';
import type { CommandIo } from '../io.js';
import { expectPositional } from './args.js';
import type { Action, OperatorOptions } from './args.js';
import { readNewPassword, readSecret } from './secrets.js';

/** One call to the node's /ext/auth. */
export interface NodeRequest {
  readonly method: string;
  readonly params: Record<string, unknown>;
}

/** The call `action` makes, its secrets read from where `options` say (or the prompt). `positional`: the token, if given so. */
export async function requestOf(action: Action, options: OperatorOptions, positional: string[], io: CommandIo): Promise<NodeRequest> {
  let method: string;
  let params: Record<string, unknown>;
  switch (action) {
    case 'token new': {
      expectPositional(positional, 0, action);
      if (options.endpoints.length === 0)
        throw new UsageError(
          'token new needs --endpoints, such as --endpoints /ext/info,/ext/bc/X, --endpoints / for a node served at the root (Ethereum nodes), or "*" for every endpoint',
        );
      const password = await readPassword(options, 'Password: ', io);
      method = 'auth.newToken';
      params = { password, endpoints: options.endpoints };
      if (options.label !== undefined) params.label = options.label;
      if (options.expiresIn !== undefined) params.expiresIn = options.expiresIn;
      if (options.methods.length > 0) params.methods = methodsOf(options.methods);
      if (options.rateLimit !== undefined) params.rateLimit = options.rateLimit;
      if (options.burst !== undefined) params.burst = options.burst;
      if (options.quota !== undefined) params.quota = options.quota;
      if (options.allowedClients.length > 0) params.allowedClients = options.allowedClients;
      break;
    }
    case 'token list': {
      expectPositional(positional, 0, action);
      const password = await readPassword(options, 'Password: ', io);
      method = 'auth.listTokens';
      params = { password };
      break;
    }
    case 'token revoke':
    case 'token rotate': {
      expectPositional(positional, 1, action);
      method = action === 'token revoke' ? 'auth.revokeToken' : 'auth.rotateToken';
      const overlap = options.overlap === undefined ? {} : { overlap: options.overlap };
      if (options.id !== undefined) {
        if (positional.length === 1 || options.tokenFile !== undefined || options.tokenStdin) {
          throw new UsageError('give the token or its --id, not both');
        }
        const password = await readPassword(options, 'Password: ', io);
        params = { password, id: options.id, ...overlap };
        break;
      }
      let token: string;
      if (positional.length === 1) {
        if (options.tokenFile !== undefined || options.tokenStdin)
          throw new UsageError('give the token once: as TOKEN, or with --token-file or --token-stdin');
        token = positional[0];
        io.stderr(ARGV_TOKEN_WARNING);
      } else {
        token = await readSecret(options.tokenFile, options.tokenStdin, 'Token: ', '--token', io, 'token');
      }
      const password = await readPassword(options, 'Password: ', io);
      params = { password, token, ...overlap };
      break;
    }
    case 'password change': {
      expectPositional(positional, 0, action);
      const oldPassword = await readPassword(options, 'Current password: ', io);
      const newPassword = await readNewPassword(options.newPasswordFile, options.newPasswordStdin, io);
      method = 'auth.changePassword';
      params = { oldPassword, newPassword };
      break;
    }
  }
  return { method, params };
}

const ARGV_TOKEN_WARNING =
  'api-auth: warning: a token on the command line can be read by every user of this machine while the ' +
  'command runs (ps, /proc/PID/cmdline), and stays in your shell history; use --token-file PATH or --token-stdin\n';

/** The service password: from --password-file (or the node's own password file), --password-stdin, or the prompt. */
function readPassword(options: OperatorOptions, prompt: string, io: CommandIo): Promise<string> {
  return readSecret(options.passwordFile, options.passwordStdin, prompt, '--password', io, 'password', options.passwordFileNamed);
}

/** --methods with its named sets expanded (method-sets.ts): the node gets plain names. */
function methodsOf(patterns: readonly string[]): string[] {
  try {
    return expandMethodSets(patterns);
  } catch (error) {
    throw new UsageError(`--methods: ${(error as Error).message}`);
  }
}
