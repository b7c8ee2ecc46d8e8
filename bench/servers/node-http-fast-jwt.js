// The usual way: a node:http server checking an HS256 JWT with fast-jwt on every request,
// then answering GET /ext/health with the same body and content-type as ours.
// Environment: BENCH_JWT_KEY (hex, required), BENCH_FASTJWT_CACHE=1 to turn fast-jwt's
// verified-token cache on. Usage: node bench/servers/node-http-fast-jwt.js [port]
import { createServer } from 'node:http';
import { createVerifier } from 'fast-jwt';
import { BODY, CONTENT_TYPE, PATH, listening, refusal } from './body.js';

if (!process.env.BENCH_JWT_KEY) {
  process.stderr.write('node-http-fast-jwt: set BENCH_JWT_KEY to the HS256 key in hex\n');
  process.exit(2);
}
const key = Buffer.from(process.env.BENCH_JWT_KEY, 'hex');
const verify = createVerifier({ key, algorithms: ['HS256'], cache: process.env.BENCH_FASTJWT_CACHE === '1' });
const GENERATION = Number(process.env.BENCH_JWT_GENERATION ?? 1);

const NO_TOKEN = refusal('auth token not provided');
const BAD_HEADER = refusal('couldn\'t parse auth token. Header "Authorization" should be "Bearer TOKEN.GOES.HERE"');
const INVALID = refusal('the provided auth token is invalid');
const NOT_GRANTED = refusal('the provided auth token does not allow access to this endpoint');
const NOT_FOUND = '404 page not found\n';

function refuse(res, body) {
  res.writeHead(401, { 'Content-Type': 'application/json', 'WWW-Authenticate': 'Bearer' });
  res.end(body);
}

const server = createServer((req, res) => {
  const q = req.url.indexOf('?');
  const path = q < 0 ? req.url : req.url.slice(0, q);
  const header = req.headers.authorization;
  if (header === undefined || header === '') return refuse(res, NO_TOKEN);
  if (!header.startsWith('Bearer ')) return refuse(res, BAD_HEADER);
  let claims;
  try {
    claims = verify(header.slice(7));
  } catch {
    return refuse(res, INVALID);
  }
  if (claims.gen !== GENERATION) return refuse(res, INVALID);
  if (!Array.isArray(claims.endpoints) || !claims.endpoints.includes(path)) return refuse(res, NOT_GRANTED);
  if (path !== PATH || req.method !== 'GET') {
    res.writeHead(404, { 'Content-Type': 'text/plain; charset=utf-8' });
    return res.end(NOT_FOUND);
  }
  res.writeHead(200, { 'Content-Type': CONTENT_TYPE, 'Content-Length': BODY.length });
  res.end(BODY);
});
server.keepAliveTimeout = 60000;
server.headersTimeout = 61000;
server.listen(Number(process.argv[2] ?? 0), '127.0.0.1', () => listening(server.address().port));

const stop = () => {
  server.close(() => process.exit(0));
  server.closeAllConnections();
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
