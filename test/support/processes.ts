// Real processes for the process tests: the gateway entry point of `npm start`
// as a child process, waiting for it to exit, free ports, and finding a
// Postgres by its port.
import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { PORT_RANGE } from '../../gateway/core/process/free-port.ts';

export const projectRoot = path.resolve(import.meta.dirname, '..', '..');

// Children still running after the test file (a test that failed half way)
// or when this process exits (a bench interrupted) are killed. Benches import
// this module outside Vitest, hence the condition.
const children: ChildProcess[] = [];
const killChildren = () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
};
process.once('exit', killChildren);
if (process.env.VITEST) (await import('vitest')).afterAll(killChildren);

export interface GatewayProcess {
  child: ChildProcess;
  url: string;
  output: () => string;
}

/** Starts `command` (default: the gateway entry point) and resolves once it listens. */
export function startGatewayProcess(
  env: Record<string, string>,
  { cwd = projectRoot, command = [process.execPath, '--import', 'tsx', 'gateway/main.ts'], detached = false } = {},
): Promise<GatewayProcess> {
  return startChild(env, { cwd, command, detached, ready: /gateway listening on (http:\/\/localhost:\d+)/, what: 'gateway' });
}

/** Starts `npm run worker`'s entry point (node itself, so that signals reach it) and resolves once its job worker runs (url: ''). */
export function startWorkerProcess(env: Record<string, string>): Promise<GatewayProcess> {
  return startChild(env, {
    cwd: projectRoot,
    command: [process.execPath, '--import', 'tsx', 'gateway/worker-main.ts'],
    detached: false,
    ready: /"msg":"job worker running"/,
    what: 'worker',
  });
}

function startChild(
  env: Record<string, string>,
  { cwd, command, detached, ready, what }: { cwd: string; command: string[]; detached: boolean; ready: RegExp; what: string },
): Promise<GatewayProcess> {
  const child = spawn(command[0]!, command.slice(1), {
    cwd,
    env: { ...process.env, LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached,
  });
  children.push(child);
  let output = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what} did not start:\n${output}`)), 120_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const match = ready.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve({ child, url: match[1] ?? '', output: () => output });
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${what} exited with ${code}:\n${output}`));
    });
  });
}

export function exited(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve(child.exitCode);
    else child.on('exit', (code) => resolve(code));
  });
}

/** Stops a process as an operator does: SIGTERM, then SIGKILL if it has not exited within `graceMs`. */
export async function stopProcess(child: ChildProcess, graceMs: number): Promise<void> {
  child.kill('SIGTERM');
  const killer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited(child);
  clearTimeout(killer);
}

/**
 * A random port for a gateway process (and its MCP process on port + 1),
 * below Linux's ephemeral range (see gateway/core/process/free-port.ts).
 */
export const freePort = () => PORT_RANGE.from + crypto.randomInt(PORT_RANGE.to - PORT_RANGE.from - 1);

/** Pids of Postgres server processes started with `-p <port>` (scans /proc). */
export function postgresOnPort(port: number): number[] {
  const pids: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const args = fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      const p = args.indexOf('-p');
      if (path.basename(args[0] ?? '') === 'postgres' && p !== -1 && args[p + 1] === String(port)) pids.push(Number(entry));
    } catch {
      // the process ended meanwhile
    }
  }
  return pids;
}

export async function waitUntil(condition: () => boolean | Promise<boolean>, timeoutMs: number, what: string): Promise<number> {
  const started = Date.now();
  while (!(await condition())) {
    if (Date.now() - started > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return Date.now() - started;
}
