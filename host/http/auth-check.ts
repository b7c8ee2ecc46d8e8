// /ext/auth/check: the gate's verdict for a request that a proxy in front (nginx
// auth_request, Caddy forward_auth, Traefik ForwardAuth) asks about before it forwards
// it. The proxy names the original request in one of three ways: its request line in
// X-Original-Request (nginx's $request), X-Original-URI and X-Original-Method (nginx
// configurations written before), or X-Forwarded-Uri and X-Forwarded-Method (Caddy,
// Traefik); its Authorization comes as it was. The verdict is the gate's, on the original
// path (without its query, by the same raw-path rules), and the answer is what the gate
// itself would have sent: 200, or its refusal.
//
// Only the proxy may name the original request, yet each proxy passes the client's other
// headers on: nginx's proxy_set_header replaces a client's header of the same name, and
// forward_auth and ForwardAuth replace the X-Forwarded pair, but none of them drops the
// headers of the other ways. So a genuine check request names the original one way, and a
// request that names it two ways is refused: one of them is the client's. Any method is
// judged alike, OPTIONS too: a preflight that the check let through would reach the node,
// body and all, with no token.
//
// uWebSockets.js trims bytes 0x80-0xFF off both ends of a header value, so a URI header
// that ends in raw UTF-8 would be judged without it. A request line ends in its protocol,
// and Caddy and Traefik (Go) send the path percent-encoded: neither can lose its path's
// end. nginx's X-Original-URI can, hence X-Original-Request.
//
// A token with a method scope or limits passes only a request whose calls are seen and
// allowed (admission.ts). An auth subrequest carries no body (nginx, Caddy and Traefik
// send none), so a scoped token is refused here with 403 insufficient_scope, and a token
// with limits passes only for an original request no node runs calls from (GET, HEAD,
// OPTIONS), as one call: both fail closed. A checker that does send the original body
// (Envoy's ext_authz with_request_body) gets it judged as the gateway judges a body, up to
// the local endpoints' body limit.
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import { RpcCode } from '../errors.js';
import { bodyRead, judged } from './access-log.js';
import { CHECK, Decision } from './admission.js';
import type { Admission } from './admission.js';
import type { Ticket } from './body-admission.js';
import type { InFlight } from './in-flight.js';
import { writeCallRefusal } from './refusals.js';
import { MAX_BODY_BYTES } from '../own-endpoints.js';
import { endWith, jsonLine, readBody, writeBodyTooLarge } from './responses.js';

const NO_URI = jsonLine(
  RpcCode.InvalidRequest,
  '/ext/auth/check needs the original request: its request line in ' +
    'X-Original-Request (nginx: proxy_set_header X-Original-Request $request), or its URI in X-Forwarded-Uri (Caddy forward_auth ' +
    'and Traefik ForwardAuth send it)',
);
const BAD_REQUEST_LINE = jsonLine(
  RpcCode.InvalidRequest,
  'X-Original-Request is not a request line ("METHOD URI HTTP/1.1"): ' + "set it to nginx's $request",
);
const MIXED_REQUEST = twoWays('X-Original-Request with X-Original-URI, X-Original-Method, X-Forwarded-Uri or X-Forwarded-Method');
const MIXED_NGINX = twoWays('X-Original-URI with X-Forwarded-Uri or X-Forwarded-Method');
const MIXED_FORWARDED = twoWays('X-Forwarded-Uri with X-Original-Method');
const GRANTED = new TextEncoder().encode('{"ok":true}\n');

export class AuthCheck {
  /** `admission`: the one the router's requests go through; `inFlight` counts a check whose body is being read. */
  constructor(
    private readonly admission: Admission,
    private readonly inFlight: InFlight,
  ) {}

  /** Call it from the uWS handler, before returning. */
  answer(res: HttpResponse, req: HttpRequest): void {
    // A proxy may check with HEAD: its answer goes without a body, whatever it says.
    const head = req.getMethod() === 'head';
    const line = req.getHeader('x-original-request');
    const originalUri = req.getHeader('x-original-uri');
    const forwardedUri = req.getHeader('x-forwarded-uri');
    let method: string;
    let uri: string;
    if (line !== '') {
      if (
        originalUri !== '' ||
        forwardedUri !== '' ||
        req.getHeader('x-original-method') !== '' ||
        req.getHeader('x-forwarded-method') !== ''
      ) {
        return writeBadCheck(res, head, MIXED_REQUEST);
      }
      // A URI may hold spaces (nginx takes them), a method and a protocol never do.
      const first = line.indexOf(' ');
      const last = line.lastIndexOf(' ');
      if (first < 1 || last < first + 2 || !line.startsWith('HTTP/', last + 1)) return writeBadCheck(res, head, BAD_REQUEST_LINE);
      method = line.slice(0, first);
      uri = line.slice(first + 1, last);
    } else if (originalUri !== '') {
      if (forwardedUri !== '' || req.getHeader('x-forwarded-method') !== '') return writeBadCheck(res, head, MIXED_NGINX);
      method = req.getHeader('x-original-method');
      uri = originalUri;
    } else if (forwardedUri !== '') {
      if (req.getHeader('x-original-method') !== '') return writeBadCheck(res, head, MIXED_FORWARDED);
      method = req.getHeader('x-forwarded-method');
      uri = forwardedUri;
    } else {
      return writeBadCheck(res, head, NO_URI);
    }
    // The path as the gate takes it from a request line: only the query is left out. A
    // raw "#" stays, and the path rules refuse it as they do at the gate.
    const query = uri.indexOf('?');
    const path = query === -1 ? uri : uri.slice(0, query);
    const admission = this.admission;
    // A proxy that passes the refusal on (Caddy, Traefik) passes its CORS headers too.
    const decision = admission.admit(res, req, method, path, CHECK);
    // The check's line names the original request's token.
    judged(res, req, admission, decision, path);
    if (decision !== Decision.Admitted) return;
    const { allow, ticket } = admission;
    if (ticket !== null) return this.judgeBody(res, req, ticket, allow, head);
    endWith(res.writeHeader('Content-Type', 'application/json'), GRANTED, head);
  }

  /** A token with limits or a method scope, and a check that carries the original body: judged as the gateway judges it. */
  private judgeBody(res: HttpResponse, req: HttpRequest, ticket: Ticket, allow: string, head: boolean): void {
    if (!(Number(req.getHeader('content-length') || 0) <= MAX_BODY_BYTES)) return writeBodyTooLarge(res);
    const bodies = this.admission.bodies!;
    const pending = this.inFlight.begin(res);
    readBody(res, pending, (body) => {
      // Whole: the proxy in front forwards the body it has, so a batch cannot be split here.
      const { reading, refusal } = bodies.judge(ticket, body, false, 'http');
      bodyRead(res, reading);
      res.cork(() => {
        // The proxy in front acts on the status: a refused call is a 403 here, not the gate's 200.
        if (refusal !== null) writeCallRefusal(res, refusal, head, allow, true);
        else endWith(res.writeHeader('Content-Type', 'application/json'), GRANTED, head);
      });
      pending.finish();
    });
  }
}

/** A check request the check cannot judge: 400, with one of the bodies above. */
function writeBadCheck(res: HttpResponse, head: boolean, body: Uint8Array): void {
  endWith(res.writeStatus('400 Bad Request').writeHeader('Content-Type', 'application/json'), body, head);
}

/** The 400 of a check request that names the original request in two ways; `found` says which headers. */
function twoWays(found: string): Uint8Array {
  return jsonLine(
    RpcCode.InvalidRequest,
    `/ext/auth/check got ${found}: two ways of naming the original request, so one ` +
      'was written by the client. The proxy in front names it one way (nginx X-Original-Request, or X-Original-URI and ' +
      "X-Original-Method; Caddy and Traefik X-Forwarded-Uri and X-Forwarded-Method) and must drop the client's copies of the " +
      'others (nginx: proxy_set_header NAME ""; in the check\'s location; Caddy: header_up -NAME in forward_auth)',
  );
}
