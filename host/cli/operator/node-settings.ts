// The defaults the node's own settings give the operator commands: its password file and
// the URL it listens at, read as the node reads them (../flags.ts).
import { UsageError } from '../../errors.js';
import { resolveServerOptions } from '../../options.js';
import { readCommand } from '../flags.js';
import { CONFIG_FILE, unknownEnvironment } from '../sources.js';
import type { CommandIo } from '../io.js';
import type { Environment } from '../sources.js';
import { parseUri } from './args.js';
import type { OperatorOptions } from './args.js';

/**
 * The defaults the node's own settings give, where no flag gave the value: its password
 * file, and the URL it listens at. Read as the node reads them (flags.ts, readCommand):
 * the API_AUTH_ environment, then the config file (--config-file, or the one
 * API_AUTH_CONFIG_FILE names), every value checked by the node's own rules. A listener on
 * every address (0.0.0.0, ::) is called at this machine's own.
 */
export function fromNodeSettings(options: OperatorOptions, env: Environment, io: Pick<CommandIo, 'stderr'>): void {
  const unknown = unknownEnvironment(env);
  if (unknown.length > 0) {
    io.stderr(
      `api-auth: warning: ${unknown.join(', ')} ${unknown.length === 1 ? 'is' : 'are'} named like the node's settings but ` +
        "none of them, and change nothing (API_AUTH_ and a flag's name in upper snake case, such as API_AUTH_PASSWORD_FILE)\n",
    );
  }
  const { command, name } = readCommand(options.configFile === undefined ? [] : [`--${CONFIG_FILE.flag}`, options.configFile], env);
  if (command.action !== 'serve') return;
  const node = resolveServerOptions(command.options);
  if (options.passwordFile === undefined && !options.passwordStdin && node.passwordFile !== undefined) {
    options.passwordFile = node.passwordFile;
    options.passwordFileNamed = name('passwordFile');
  }
  if (options.uriGiven) return;
  if (node.port === 0) {
    throw new UsageError(`${name('port')} is 0 (a port the system picks), so the node's address is not known here; give --uri`);
  }
  const host = node.host === '0.0.0.0' || node.host === '' ? '127.0.0.1' : node.host === '::' ? '::1' : node.host;
  options.uri = parseUri(`${node.tls === undefined ? 'http' : 'https'}://${host.includes(':') ? `[${host}]` : host}:${node.port}`);
}
