// The ceiling of the storage bench: a node:http server with no pipeline at all
// (no authentication, rules, metadata rows, image checks or logging) that
// stores a PUT body in a file (written to a temporary name, fsynced, renamed,
// as the gateway's fs byte store does) and streams a GET from disk. Whatever
// the gateway does, it cannot move bytes faster than this on the same machine.
//
// Started by storage.bench.ts: BARE_PORT, BARE_DIR.
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';

const dir = process.env.BARE_DIR!;
fs.mkdirSync(dir, { recursive: true });
const fileOf = (url: string) => path.join(dir, crypto.createHash('sha256').update(url).digest('hex'));

http
  .createServer((req, res) => {
    const file = fileOf(req.url ?? '/');
    if (req.method === 'PUT') {
      const tmp = `${file}.${crypto.randomBytes(4).toString('hex')}.part`;
      const out = fs.createWriteStream(tmp, { flush: true });
      pipeline(req, out)
        .then(() => fs.promises.rename(tmp, file))
        .then(
          () => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'),
          () => res.writeHead(500).end(),
        );
      return;
    }
    fs.stat(file, (err, stat) => {
      if (err) return void res.writeHead(404).end();
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': stat.size });
      pipeline(fs.createReadStream(file), res).catch(() => res.destroy());
    });
  })
  .listen(Number(process.env.BARE_PORT), '127.0.0.1', () => process.send?.('listening'));
