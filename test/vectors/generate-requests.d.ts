// Types of generate-requests.js, for the TypeScript tests.
export function generateRequests(): string;
