// The ceiling of the gateway bench: a node:http server with no pipeline at
// all (no routing table, authentication, validation, limits, request log or
// error mapping) that answers each bench route by running exactly the
// direct side's transaction (gateway-sql.ts) and sending its rows as JSON.
// Whatever a gateway built on node:http and postgres.js does, it cannot do
// less than this; the bench reports its rate against the direct side's.
//
// Started by gateway.bench.ts: BARE_DATABASE_URL, BARE_PORT, BARE_POOL,
// BARE_CLAIMS (the request.jwt.claims JSON), BARE_SESSION, BARE_PUBLIC_URL.
import http from 'node:http';
import postgres from 'postgres';
import { directTransaction, routeCases, type DirectClaims } from './gateway-sql.ts';

const env = (name: string) => {
  const value = process.env[name];
  if (value === undefined) throw new Error(`${name} is not set`);
  return value;
};
const sql = postgres(env('BARE_DATABASE_URL'), { max: Number(env('BARE_POOL')), onnotice: () => {} });
const claims: DirectClaims = { json: env('BARE_CLAIMS'), session: process.env.BARE_SESSION || null };
const routes = new Map(routeCases(env('BARE_PUBLIC_URL')).map((route) => [`${route.method} ${route.path}`, route]));

http
  .createServer((req, res) => {
    const route = routes.get(`${req.method} ${req.url}`);
    req.resume(); // the body (the route's arguments are fixed)
    if (!route) {
      res.writeHead(404).end();
      return;
    }
    directTransaction(sql, claims, route).then(
      (rows) => {
        const body = JSON.stringify(rows.length === 1 ? rows[0] : rows);
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body);
      },
      () => res.writeHead(500).end(),
    );
  })
  .listen(Number(env('BARE_PORT')), '127.0.0.1', () => process.send?.('listening'));
