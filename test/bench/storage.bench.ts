// File storage (/storage/v1) through a real gateway process (`npm start` as
// production runs it, fs byte store), against a ceiling measured in the same
// run: a bare node:http server (bare-file-server.ts) that stores and streams
// the same file from disk with no pipeline at all.
//
//   * 20 MB up then down, 8 at once (BENCH_STORAGE_ROUNDS rounds, default 3,
//     after one untimed): gateway RSS growth (peak during the rounds, sampled
//     every 20 ms, over the RSS before them) and throughput (bytes moved per
//     second) as a ratio to the bare server's; CPU per request on each side.
//   * A 256 px thumbnail (cover, WebP by Accept) of a 12-megapixel JPEG: the
//     first request (several photos, each transformed once), the cached
//     repeat, and a plain download of an object of the thumbnail's size.
import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import sharp from 'sharp';
import { freePort } from '../../gateway/core/process/free-port.ts';
import { startGatewayProcess, type GatewayProcess } from './gateway-process.ts';
import { formatTable, summarize, type Bench, type BenchContext, type Stats } from './harness.ts';
import { processRssBytes } from './gateway-process.ts';
import { processCpuUs } from './postgres-cpu.ts';

const MB = 1024 * 1024;
const SIZE = 20 * MB;
const PARALLEL = 8;
const ROUNDS = Number(process.env.BENCH_STORAGE_ROUNDS ?? 3);
const PHOTOS = Number(process.env.BENCH_STORAGE_PHOTOS ?? 3);
const REPEATS = Number(process.env.BENCH_STORAGE_REPEATS ?? 200);

interface Side {
  label: string;
  url: string;
  uploadMethod: 'POST' | 'PUT';
  cpuUs(): number;
  rssBytes(): number;
  uploadPath(i: number): string;
  downloadPath(i: number): string;
  headers: Record<string, string>;
  stop(): Promise<void>;
}

/** One HTTP request; the body streamed from `file` (or none); the answer drained. Resolves to its status and byte count. */
function request(
  url: string,
  method: string,
  headers: Record<string, string>,
  file?: string,
): Promise<{ status: number; bytes: number; body: Buffer | null }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, headers, agent: false }, (res) => {
      let bytes = 0;
      const keep = Number(res.headers['content-length'] ?? 0) < MB; // small answers are kept (thumbnails, errors)
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => {
        bytes += chunk.length;
        if (keep) chunks.push(chunk);
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, bytes, body: keep ? Buffer.concat(chunks) : null }));
      res.on('error', reject);
    });
    req.on('error', reject);
    if (file) fs.createReadStream(file).pipe(req);
    else req.end();
  });
}

async function startBareFileServer(dir: string): Promise<{ url: string; child: ChildProcess }> {
  const port = await freePort();
  const child = spawn(process.execPath, ['--import', 'tsx', path.join('test', 'bench', 'bare-file-server.ts')], {
    cwd: path.resolve(import.meta.dirname, '..', '..'),
    env: { ...process.env, NODE_ENV: 'production', BARE_PORT: String(port), BARE_DIR: dir },
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  await new Promise<void>((resolve, reject) => {
    child.once('message', () => resolve());
    child.once('exit', (code) => reject(new Error(`bare file server exited with ${code}`)));
  });
  return { url: `http://127.0.0.1:${port}`, child };
}

interface Round {
  seconds: number;
  peakRss: number;
}

/** 8 uploads at once, then 8 downloads at once; RSS sampled throughout. */
async function round(side: Side, file: string): Promise<Round> {
  let peakRss = side.rssBytes();
  const sampler = setInterval(() => (peakRss = Math.max(peakRss, side.rssBytes())), 20);
  const t0 = process.hrtime.bigint();
  try {
    const ups = await Promise.all(
      Array.from({ length: PARALLEL }, (_, i) =>
        request(side.url + side.uploadPath(i), side.uploadMethod, {
          ...side.headers,
          'content-type': 'application/octet-stream',
          'content-length': String(SIZE),
          'x-upsert': 'true',
        }, file),
      ),
    );
    for (const up of ups) if (up.status !== 200) throw new Error(`${side.label}: upload answered ${up.status} ${up.body?.toString().slice(0, 200)}`);
    const downs = await Promise.all(Array.from({ length: PARALLEL }, (_, i) => request(side.url + side.downloadPath(i), 'GET', side.headers)));
    for (const down of downs) if (down.status !== 200 || down.bytes !== SIZE) throw new Error(`${side.label}: download answered ${down.status} with ${down.bytes} bytes`);
  } finally {
    clearInterval(sampler);
  }
  return { seconds: Number(process.hrtime.bigint() - t0) / 1e9, peakRss };
}

async function transfer(ctx: BenchContext, side: Side, file: string) {
  await round(side, file); // untimed: files created, pools and caches warm
  await new Promise((r) => setTimeout(r, 500));
  const rssBefore = side.rssBytes();
  const cpu0 = side.cpuUs();
  const rounds: Round[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    rounds.push(await round(side, file));
    ctx.progress(`${side.label}: round ${r + 1} in ${rounds.at(-1)!.seconds.toFixed(2)} s`);
  }
  const cpuPerRequestMs = (side.cpuUs() - cpu0) / 1000 / (ROUNDS * PARALLEL * 2);
  const seconds = rounds.map((r) => r.seconds).sort((a, b) => a - b)[Math.floor(ROUNDS / 2)]!;
  const peak = Math.max(...rounds.map((r) => r.peakRss));
  return {
    medianRoundSeconds: seconds,
    mbPerSecond: (PARALLEL * SIZE * 2) / MB / seconds,
    rssBeforeMb: rssBefore / MB,
    rssGrowthMb: (peak - rssBefore) / MB,
    cpuPerRequestMs,
  };
}

/** A 12-megapixel photo (4000 × 3000): smooth random shapes at every scale plus grain, so its thumbnail has detail to keep, as a camera's JPEG. */
async function photo(seed: number): Promise<Buffer> {
  const coarse = crypto.createHash('sha256').update(String(seed)).digest();
  const raw = Buffer.alloc(160 * 120 * 3);
  for (let i = 0; i < raw.length; i++) raw[i] = crypto.randomInt(256) ^ coarse[i % coarse.length]!;
  const smooth = await sharp(raw, { raw: { width: 160, height: 120, channels: 3 } }).resize(4000, 3000, { kernel: 'cubic' }).raw().toBuffer();
  return sharp(smooth, { raw: { width: 4000, height: 3000, channels: 3 } })
    .composite([{ input: { create: { width: 4000, height: 3000, channels: 3, background: { r: 0, g: 0, b: 0 }, noise: { type: 'gaussian', mean: 0, sigma: 6 } } }, blend: 'add' }])
    .jpeg({ quality: 85 })
    .toBuffer();
}

async function thumbnails(ctx: BenchContext, gateway: GatewayProcess) {
  const { token, userId } = await ctx.user();
  await ctx.sql`update app.storage_buckets set file_size_limit = 50 * 1024 * 1024 where id = 'avatars'`;
  await ctx.sql`insert into app.storage_usage (user_id, quota_bytes, uploads_per_minute) values (${userId}, 10 * 1024 * 1024 * 1024::bigint, 10000)
                on conflict (user_id) do update set quota_bytes = excluded.quota_bytes, uploads_per_minute = excluded.uploads_per_minute`;
  const auth = { authorization: `Bearer ${token}` };
  const accept = { accept: 'image/webp,image/*,*/*;q=0.8' };
  const tmp = fs.mkdtempSync(path.join(ctx.env.dir, 'bench-photo-'));
  let photoBytes = 0;
  for (let p = 0; p < PHOTOS; p++) {
    const file = path.join(tmp, `photo-${p}.jpg`);
    const bytes = await photo(p);
    photoBytes = bytes.length;
    fs.writeFileSync(file, bytes);
    const up = await request(`${gateway.url}/storage/v1/object/avatars/${userId}/photo-${p}.jpg`, 'POST', {
      ...auth,
      'content-type': 'image/jpeg',
      'content-length': String(bytes.length),
    }, file);
    if (up.status !== 200) throw new Error(`photo upload answered ${up.status} ${up.body?.toString().slice(0, 200)}`);
  }
  const render = (p: number) => `${gateway.url}/storage/v1/render/image/public/avatars/${userId}/photo-${p}.jpg?width=256&height=256&resize=cover`;
  const first: number[] = [];
  const cpuFirst0 = gateway.cpuUs();
  let thumb: Buffer | null = null;
  for (let p = 0; p < PHOTOS; p++) {
    const t0 = process.hrtime.bigint();
    const res = await request(render(p), 'GET', accept);
    first.push(Number(process.hrtime.bigint() - t0) / 1e6);
    if (res.status !== 200) throw new Error(`render answered ${res.status}`);
    thumb = res.body;
  }
  const cpuFirstMs = (gateway.cpuUs() - cpuFirst0) / 1000 / PHOTOS;
  const meta = await sharp(thumb!).metadata();
  // The plain object: the thumbnail's own bytes, stored as an object (an image bucket re-encodes it: its size is reported).
  const plainFile = path.join(tmp, 'plain.webp');
  fs.writeFileSync(plainFile, thumb!);
  const up = await request(`${gateway.url}/storage/v1/object/avatars/${userId}/plain.webp`, 'POST', {
    ...auth,
    'content-type': 'image/webp',
    'content-length': String(thumb!.length),
  }, plainFile);
  if (up.status !== 200) throw new Error(`plain upload answered ${up.status}`);
  const plainUrl = `${gateway.url}/storage/v1/object/public/avatars/${userId}/plain.webp`;
  const plainSize = (await request(plainUrl, 'GET', accept)).bytes;

  const timed = async (label: string, url: string): Promise<Stats & { cpuPerRequestMs: number }> => {
    for (let i = 0; i < 20; i++) await request(url, 'GET', accept);
    const cpu0 = gateway.cpuUs();
    const samples: number[] = [];
    for (let i = 0; i < REPEATS; i++) {
      const t0 = process.hrtime.bigint();
      const res = await request(url, 'GET', accept);
      samples.push(Number(process.hrtime.bigint() - t0) / 1e6);
      if (res.status !== 200) throw new Error(`${label}: ${res.status}`);
    }
    return { ...summarize(label, samples), cpuPerRequestMs: (gateway.cpuUs() - cpu0) / 1000 / REPEATS };
  };
  const plain = await timed(`plain download (${plainSize} bytes)`, plainUrl);
  const cached = await timed(`cached thumbnail (${thumb!.length} bytes)`, render(0));
  const firstStats = summarize(`first thumbnail of a 12-MP JPEG (${(photoBytes / MB).toFixed(1)} MB)`, first);
  plain.ratio = 1;
  cached.ratio = cached.medianMs / plain.medianMs;
  firstStats.ratio = firstStats.medianMs / plain.medianMs;
  console.log(formatTable([plain, cached, firstStats]));
  console.log(`  CPU per request (gateway): plain ${plain.cpuPerRequestMs.toFixed(2)} ms, cached ${cached.cpuPerRequestMs.toFixed(2)} ms, first ${cpuFirstMs.toFixed(1)} ms`);
  return {
    thumbnail: { format: meta.format, width: meta.width, height: meta.height, bytes: thumb!.length },
    photoBytes,
    firstMs: firstStats,
    cachedMs: cached,
    plainMs: plain,
    cachedOverPlain: cached.ratio,
    cpuFirstMs,
  };
}

const bench: Bench = {
  name: 'storage',
  description: 'file storage: 20 MB up+down 8 at once (RSS growth, throughput vs bare node:http from disk); 256 px thumbnail of a 12-MP JPEG (first, cached repeat vs plain download)',
  async throughput(ctx) {
    const dir = fs.mkdtempSync(path.join(ctx.env.dir, 'bench-storage-'));
    const file = path.join(dir, 'twenty.bin');
    const out = fs.openSync(file, 'w');
    for (let i = 0; i < SIZE / MB; i++) fs.writeSync(out, crypto.randomBytes(MB));
    fs.closeSync(out);

    const gateway = await startGatewayProcess(ctx, 1, { STORAGE_DIR: path.join(dir, 'gateway-store'), WORKER: 'off' });
    const bare = await startBareFileServer(path.join(dir, 'bare-store'));
    try {
      const { token, userId } = await ctx.user();
      await ctx.sql`insert into app.storage_usage (user_id, quota_bytes, uploads_per_minute) values (${userId}, 10 * 1024 * 1024 * 1024::bigint, 10000)
                    on conflict (user_id) do update set quota_bytes = excluded.quota_bytes, uploads_per_minute = excluded.uploads_per_minute`;
      const gatewaySide: Side = {
        label: 'gateway /storage/v1',
        url: gateway.url,
        uploadMethod: 'POST',
        cpuUs: gateway.cpuUs,
        rssBytes: gateway.rssBytes!,
        uploadPath: (i) => `/storage/v1/object/attachments/${userId}/bench-${i}.bin`,
        downloadPath: (i) => `/storage/v1/object/authenticated/attachments/${userId}/bench-${i}.bin`,
        headers: { authorization: `Bearer ${token}` },
        stop: gateway.stop,
      };
      const bareSide: Side = {
        label: 'bare node:http',
        url: bare.url,
        uploadMethod: 'PUT',
        cpuUs: () => processCpuUs(bare.child.pid!),
        rssBytes: () => processRssBytes(bare.child.pid!),
        uploadPath: (i) => `/bench-${i}.bin`,
        downloadPath: (i) => `/bench-${i}.bin`,
        headers: {},
        stop: async () => void bare.child.kill('SIGTERM'),
      };
      const bareResult = await transfer(ctx, bareSide, file);
      const gatewayResult = await transfer(ctx, gatewaySide, file);
      const ratio = gatewayResult.mbPerSecond / bareResult.mbPerSecond;
      console.log(
        `  20 MB x ${PARALLEL} up then down, median of ${ROUNDS} rounds:\n` +
          `    bare node:http  ${bareResult.mbPerSecond.toFixed(0)} MB/s, round ${bareResult.medianRoundSeconds.toFixed(2)} s, CPU ${bareResult.cpuPerRequestMs.toFixed(1)} ms/request, RSS growth ${bareResult.rssGrowthMb.toFixed(1)} MB\n` +
          `    gateway         ${gatewayResult.mbPerSecond.toFixed(0)} MB/s, round ${gatewayResult.medianRoundSeconds.toFixed(2)} s, CPU ${gatewayResult.cpuPerRequestMs.toFixed(1)} ms/request, RSS ${gatewayResult.rssBeforeMb.toFixed(0)} MB + peak growth ${gatewayResult.rssGrowthMb.toFixed(1)} MB\n` +
          `    throughput ratio gateway / bare: ${ratio.toFixed(2)}`,
      );
      const thumbs = await thumbnails(ctx, gateway);
      return { transfer: { bare: bareResult, gateway: gatewayResult, ratio }, thumbnails: thumbs };
    } finally {
      await gateway.stop();
      bare.child.kill('SIGTERM');
    }
  },
};

export default bench;
