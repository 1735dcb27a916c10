// A TCP port that is free on loopback right now, for throwaway servers: a
// PG15 cluster, PgBouncer, a test gateway, a benchmark.
//
// Chosen at random below Linux's ephemeral range (32768 and up), then probed.
// A port the OS hands out for `listen(0)` comes from that range, and so do
// the local ports of outgoing connections: in a busy test run one of them
// took such a port between the probe and the server's own bind.
import crypto from 'node:crypto';
import net from 'node:net';

export const PORT_RANGE = { from: 16000, to: 32000 } as const;

function isFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const port = PORT_RANGE.from + crypto.randomInt(PORT_RANGE.to - PORT_RANGE.from);
    if (await isFree(port)) return port;
  }
  throw new Error(`no free port found between ${PORT_RANGE.from} and ${PORT_RANGE.to}`);
}
