// Who a request comes from. The connection's far end is the peer; when the peer is a
// proxy the operator trusts (--trusted-proxies), the client is the address that proxy
// names in X-Forwarded-For. Addresses leave this module in addresses.ts's one canonical
// text form, so that the throttle and the logs see one spelling per client.
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import { formatAddress, parseAddress } from '../addresses.js';
import type { TrustedProxies } from '../addresses.js';

// Where X-Forwarded-For entries are parsed, one at a time: reading them allocates nothing for them.
const SCRATCH = new Uint8Array(16);

/**
 * The client a request comes from, canonical: the peer, unless the peer is a trusted
 * proxy; then the right-most address of X-Forwarded-For that is not itself a trusted
 * proxy (every entry to its right was written by a proxy the operator trusts, so this
 * one is what the outermost of them saw). When every entry is trusted, the left-most;
 * an entry that is not an address ends the walk at the trusted hop right of it. Call it
 * in the uWS handler, before returning.
 */
export function clientAddress(res: HttpResponse, req: HttpRequest, trusted: TrustedProxies): string {
  const peer = peerAddress(res);
  if (!trusted.has(peer)) return peer;
  const chain = forwardedFor(req);
  let client = peer;
  let end = chain.length;
  while (end > 0) {
    const comma = chain.lastIndexOf(',', end - 1);
    const entry = forwardedAddress(chain.slice(comma + 1, end).trim());
    if (entry === null) break;
    client = entry;
    if (!trusted.has(entry)) break;
    end = Math.max(comma, 0);
  }
  return client;
}

/** The connection's far end, canonical. */
export function peerAddress(res: HttpResponse): string {
  return formatAddress(new Uint8Array(res.getRemoteAddress()));
}

/** Every X-Forwarded-For line of the request, in order, as one list. */
function forwardedFor(req: HttpRequest): string {
  let chain = '';
  req.forEach((name, value) => {
    if (name === 'x-forwarded-for') chain = chain === '' ? value : `${chain},${value}`;
  });
  return chain;
}

/** An X-Forwarded-For entry as an address, canonical; null when it is not one. Ports some proxies add are dropped. */
function forwardedAddress(entry: string): string | null {
  let text = entry;
  if (text.startsWith('[')) {
    const close = text.indexOf(']');
    if (close < 0 || !(close === text.length - 1 || /^:\d{1,5}$/.test(text.slice(close + 1)))) return null;
    text = text.slice(1, close);
  } else if (/^[\d.]+:\d{1,5}$/.test(text)) {
    text = text.slice(0, text.indexOf(':'));
  }
  const bytes = parseAddress(text, SCRATCH);
  return bytes === null ? null : formatAddress(bytes);
}
