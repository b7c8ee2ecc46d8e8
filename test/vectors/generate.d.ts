// Types of generate.js, for the TypeScript tests.
export function generateVectors(module?: WebAssembly.Module): { json: string; text: string };
