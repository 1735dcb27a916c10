// A real gateway process for the throughput benches (`node gateway/main.ts`
// as `npm start` runs it, NODE_ENV=production, on the bench database), and
// the CPU it uses, read from /proc (the process, its cluster workers and its
// MCP process).
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { freePort } from '../../gateway/core/process/free-port.ts';
import type { BenchContext } from './harness.ts';
import { processCpuUs } from './postgres-cpu.ts';

const POOL = Number(process.env.BENCH_POOL ?? 10);

/** `npm start` as production would run it, on the bench database. */
export interface GatewayProcess {
  url: string;
  /** CPU µs used so far by the gateway and its workers. */
  cpuUs(): number;
  /** Resident memory of the gateway and its workers, from /proc (bytes). */
  rssBytes?(): number;
  stop(): Promise<void>;
}

/** VmRSS of a process (0 once it is gone). */
export function processRssBytes(pid: number): number {
  try {
    const match = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

export async function startGatewayProcess(ctx: BenchContext, workers: number, env: Record<string, string> = {}): Promise<GatewayProcess> {
  const port = await freePort();
  // BENCH_CPU_PROF=dir: the gateway writes a V8 CPU profile there when it stops.
  const profile = process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(process.env.BENCH_CPU_PROF)}`] : [];
  const child: ChildProcess = spawn(process.execPath, [...profile, '--import', 'tsx', path.join('gateway', 'main.ts')], {
    cwd: path.resolve(import.meta.dirname, '..', '..'),
    env: {
      ...process.env,
      NODE_ENV: 'production',
      WEB_CONCURRENCY: String(workers),
      DATABASE_URL: ctx.env.databaseUrl,
      PORT: String(port),
      HOST: '127.0.0.1',
      PUBLIC_URL: ctx.env.config.publicUrl,
      JWT_SECRET: ctx.env.jwtSecret,
      DATA_DIR: ctx.env.dir,
      DB_POOL_MAX: String(POOL),
      LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'info',
      ...env,
    },
    stdio: ['ignore', 'ignore', 'inherit'],
    // Its own session, as a service under a process manager runs: with the
    // kernel's autogroup scheduling, it then shares the CPU with Postgres and
    // the load generator as a peer, not inside the load generator's share.
    detached: true,
  });
  const orphan = () => child.kill('SIGKILL');
  process.once('exit', orphan);
  child.once('exit', () => process.off('exit', orphan));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  // Every process must be ready (each migrates at start): 20 healthy answers
  // in a row, each on a new connection (connections are spread over the processes).
  const health = () =>
    new Promise<number>((resolve, reject) =>
      http.get(`${url}/health`, { agent: false }, (res) => (res.resume(), resolve(res.statusCode ?? 0))).on('error', reject),
    );
  for (let healthy = 0; healthy < 20; ) {
    if (child.exitCode !== null) throw new Error(`gateway exited with ${child.exitCode}`);
    try {
      const ok = (await health()) === 200;
      healthy = ok ? healthy + 1 : 0;
      if (ok) continue;
    } catch {
      healthy = 0; // not listening yet
    }
    if (Date.now() > deadline) throw new Error('gateway did not become healthy');
    await new Promise((r) => setTimeout(r, 200));
  }
  const pids = () => {
    const children = fs.existsSync(`/proc/${child.pid}/task/${child.pid}/children`)
      ? fs.readFileSync(`/proc/${child.pid}/task/${child.pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number)
      : [];
    return [child.pid!, ...children];
  };
  return {
    url,
    cpuUs: () => pids().reduce((sum, pid) => sum + processCpuUs(pid), 0),
    rssBytes: () => pids().reduce((sum, pid) => sum + processRssBytes(pid), 0),
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

