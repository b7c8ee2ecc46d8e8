// The operator commands' one call: JSON-RPC over HTTP(S) to a node's /ext/auth, with
// --cacert's CAs beside the system's, and a failure said as what to do about it (a TLS
// certificate not trusted, a node not there, a server that is not an api-auth node).
import { X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { rootCertificates } from 'node:tls';
import { NodeRefusedError, NodeUnreachableError, UsageError } from '../../errors.js';
import { reason, whyUnreadable } from '../../pem.js';

/**
 * The CA certificates of --cacert (PEM), each one checked readable, for an https:// node.
 * Read before the call, so that a bad file is a bad command line, not an unreachable node.
 */
export async function readCaFile(path: string, uri: string): Promise<string> {
  if (!uri.startsWith('https:'))
    throw new UsageError(`--cacert is for a node at an https:// --uri, and ${uri} is plain HTTP; drop --cacert or use https://`);
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    throw new UsageError(
      `--cacert ${path} ${whyUnreadable(error)}; give the PEM file of the CA certificate that signed the node's certificate`,
    );
  }
  const blocks = text.match(/-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----/g);
  if (blocks === null) {
    throw new UsageError(
      `--cacert ${path} holds no PEM certificate (-----BEGIN CERTIFICATE-----); give the CA certificate's PEM file, not its key`,
    );
  }
  for (const block of blocks) {
    try {
      new X509Certificate(block);
    } catch (error) {
      throw new UsageError(`--cacert ${path}: a certificate in it cannot be read (${reason(error)}); give the CA certificate's PEM file`);
    }
  }
  return blocks.join('\n');
}

// What a failed TLS handshake means, by node:tls's code, and what to do about it.
const SELF_SIGNED = new Set(['DEPTH_ZERO_SELF_SIGNED_CERT']);
const UNKNOWN_CA = new Set([
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
]);

/** Why the TLS handshake with the node failed, for a person; undefined when `code` is not a certificate's failure. */
export function tlsFailure(code: string | undefined, error: unknown, host: string, trusted: boolean): string | undefined {
  const more = trusted
    ? "the CA of --cacert (and the system's) did not sign it"
    : 'give the CA certificate that signed it with --cacert FILE';
  if (code === undefined) return undefined;
  if (SELF_SIGNED.has(code))
    return `the node's TLS certificate is self-signed, and not trusted: ${trusted ? 'it is not the one in --cacert' : 'give that certificate with --cacert FILE'}`;
  if (UNKNOWN_CA.has(code)) return `the node's TLS certificate is signed by a CA this command does not trust: ${more}`;
  if (code === 'ERR_TLS_CERT_ALTNAME_INVALID') {
    return `the node's TLS certificate is not for ${host} (${reason(error)}); use the name the certificate holds in --uri`;
  }
  if (code === 'CERT_HAS_EXPIRED') return "the node's TLS certificate has expired: the node needs a new one";
  if (code === 'CERT_NOT_YET_VALID') return "the node's TLS certificate is not valid yet: check the clocks of this machine and of the node";
  return undefined;
}

/** Calls `method` at `${uri}/ext/auth`; its result, or NodeRefusedError, or NodeUnreachableError. `ca`: --cacert's certificates. */
export async function call(uri: string, timeoutMs: number, method: string, params: Record<string, unknown>, ca?: string): Promise<unknown> {
  const url = `${uri}/ext/auth`;
  let status: number;
  let text: string;
  try {
    // Loaded here, not with this module: main.js imports it for every start of the
    // server, which never calls a node, and undici is most of the main thread's loading.
    const { Agent, request } = await import('undici');
    const response = await request(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      // One call: a kept-alive connection would only hold the process open afterwards.
      reset: true,
      // node:tls's `ca` replaces the system's CAs: they are kept beside --cacert's.
      ...(ca === undefined ? {} : { dispatcher: new Agent({ connect: { ca: [...rootCertificates, ca] } }) }),
    });
    status = response.statusCode;
    text = await response.body.text();
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const tls = tlsFailure(code, error, new URL(uri).hostname, ca !== undefined);
    if (tls !== undefined) throw new NodeUnreachableError(`cannot reach ${url}: ${tls}`);
    const why =
      code === 'ECONNREFUSED'
        ? 'connection refused'
        : code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT' || code === 'UND_ERR_CONNECT_TIMEOUT'
          ? `no answer within ${timeoutMs / 1000} s`
          : error instanceof Error
            ? error.message
            : String(error);
    throw new NodeUnreachableError(`cannot reach ${url}: ${why}; is the node running there (--uri)?`);
  }
  if (status === 404)
    throw new NodeUnreachableError(`${url} answered 404: the node does not serve /ext/auth; is it running with --api-auth-required?`);
  let body: { result?: unknown; error?: { code?: unknown; message?: unknown } } | undefined;
  try {
    body = JSON.parse(text) as typeof body;
  } catch {
    body = undefined;
  }
  // 429 and 503 carry a JSON-RPC error (throttled, busy): a refusal like any other.
  const error = body?.error;
  if (error !== undefined && typeof error.code === 'number' && typeof error.message === 'string')
    throw new NodeRefusedError(error.code, error.message);
  if (status !== 200 || body === undefined || body.result === undefined) {
    throw new NodeUnreachableError(`${url} gave HTTP ${status} without a JSON-RPC answer: ${JSON.stringify(text.slice(0, 200))}`);
  }
  return body.result;
}
