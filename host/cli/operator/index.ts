// The operator commands' entry (`api-auth token ...`, `api-auth password change`): the
// work sits in run.ts and the modules beside it.
export { isOperatorCommand, runOperatorCommand } from './run.js';
export { OPERATOR_USAGE } from './usage.js';
export { DEFAULT_URI } from './args.js';
export type { CommandIo as OperatorIo } from '../io.js';
