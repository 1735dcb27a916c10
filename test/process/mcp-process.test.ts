// `npm start` runs the MCP server as a child process: /mcp answers through
// the gateway; Ctrl-C (SIGINT) or SIGTERM stops both; a killed gateway does
// not leave the MCP process behind; a crashed MCP process is restarted (on
// another free port, which the gateway follows). Without MCP_PORT a PORT + 1
// taken by something else (an ADMIN_PORT) is no obstacle; a taken MCP_PORT
// fails the start in one line.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { isAlive } from '../../gateway/core/process/embedded-postgres.ts';
import { databaseUrl } from '../helpers.ts';
import { exited, freePort } from '../support/processes.ts';

const root = path.resolve(import.meta.dirname, '..', '..');
const started: ChildProcess[] = [];
afterAll(() => {
  for (const c of started) if (c.exitCode === null) c.kill('SIGKILL');
});

/** Two consecutive ports free right now (random ports can collide with busy outgoing sockets). */
async function freePortPair(): Promise<number> {
  for (;;) {
    const port = freePort();
    const ok = await Promise.all([port, port + 1].map(
      (p) => new Promise<boolean>((resolve) => {
        const probe = net.createServer();
        probe.once('error', () => resolve(false));
        probe.listen(p, '0.0.0.0', () => probe.close(() => resolve(true)));
      }),
    ));
    if (ok.every(Boolean)) return port;
  }
}

/** `npm start` on the test database, without MCP_PORT (the MCP process takes a free port), once /mcp answers through the gateway. */
async function startProcess(env: Record<string, string> = {}, port?: number): Promise<{ child: ChildProcess; url: string }> {
  port ??= await freePortPair();
  // (Not the test environment's MCP_PORT: the default, as `npm start` runs.)
  const { MCP_PORT: _mcpPort, ...inherited } = process.env;
  const child = spawn(process.execPath, ['--import', 'tsx', 'gateway/main.ts'], {
    cwd: root,
    env: { ...inherited, DATABASE_URL: databaseUrl, PORT: String(port), LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  started.push(child);
  const url = `http://localhost:${port}`;
  for (let i = 0; i < 600; i++) {
    const status = await fetch(`${url}/mcp`, { method: 'POST' }).then((r) => r.status, () => 0);
    if (status === 401) return { child, url };
    if (child.exitCode !== null) throw new Error(`exited with ${child.exitCode}`);
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error('the MCP server did not answer through the gateway');
}

function mcpChildOf(pid: number): number {
  const out = execFileSync('ps', ['-o', 'pid=,args=', '--ppid', String(pid)]).toString();
  const line = out.split('\n').find((l) => l.includes('mcp-server/main.ts'));
  if (!line) throw new Error(`no MCP child of ${pid}: ${out}`);
  return Number(line.trim().split(/\s+/)[0]);
}

async function gone(pid: number, ms = 15_000): Promise<boolean> {
  for (let waited = 0; waited < ms; waited += 100) {
    if (!isAlive(pid)) return true;
    await new Promise((r) => setTimeout(r, 100));
  }
  return false;
}

describe('npm start with the MCP child process', () => {
  // Starting processes is slow on a loaded machine.
  it('SIGINT stops the gateway and the MCP process', { timeout: 180_000 }, async () => {
    const { child } = await startProcess();
    const mcpPid = mcpChildOf(child.pid!);
    child.kill('SIGINT');
    expect(await exited(child)).toBe(0);
    expect(await gone(mcpPid)).toBe(true);
  });

  it('a crashed MCP process is restarted; a killed gateway leaves no MCP process behind', { timeout: 180_000 }, async () => {
    const { child, url } = await startProcess();
    const first = mcpChildOf(child.pid!);
    process.kill(first, 'SIGKILL');
    let second = 0;
    for (let i = 0; i < 100 && !second; i++) {
      await new Promise((r) => setTimeout(r, 200));
      try {
        second = mcpChildOf(child.pid!);
      } catch {
        second = 0;
      }
    }
    expect(second).not.toBe(first);
    for (let i = 0; i < 100; i++) {
      if ((await fetch(`${url}/mcp`, { method: 'POST' }).then((r) => r.status, () => 0)) === 401) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    expect((await fetch(`${url}/mcp`, { method: 'POST' })).status).toBe(401);
    child.kill('SIGKILL');
    expect(await gone(second)).toBe(true);
  });

  it('an MCP process whose parent is gone before it finished loading leaves at once, without starting', { timeout: 60_000 }, async () => {
    // A parent that forks the MCP process (as npm start does) and exits at
    // once: the IPC channel closes while the child is still loading modules.
    const port = await freePortPair();
    const parentScript = `
      import { fork } from 'node:child_process';
      const child = fork('mcp-server/main.ts', [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
      console.log('child pid ' + child.pid);
      process.exit(0);`;
    const parent = spawn(process.execPath, ['--input-type=module', '-e', parentScript], {
      cwd: root,
      env: { ...process.env, DATABASE_URL: databaseUrl, PORT: String(port), MCP_PORT: String(port + 1), LOG_LEVEL: 'info' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    started.push(parent);
    // The child inherits the pipes: they end once it is exiting. (Not yet
    // gone: the kernel closes a process's files before it has finished
    // exiting, and a loaded machine may run this test in between.)
    let output = '';
    parent.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    parent.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    await Promise.all([new Promise((r) => parent.stdout!.on('end', r)), new Promise((r) => parent.stderr!.on('end', r))]);
    const childPid = Number(/child pid (\d+)/.exec(output)?.[1]);
    expect(childPid).toBeGreaterThan(0);
    expect(await gone(childPid), output).toBe(true);
    expect(output).toContain('"reason":"parent exited"');
    // It did not start serving (and then crash on its closed channel).
    expect(output).not.toContain('MCP server listening');
    expect(output).not.toContain('ERR_IPC_CHANNEL_CLOSED');
  });

  it('without MCP_PORT, PORT + 1 taken by the admin server (ADMIN_PORT): /mcp is the MCP process, and /ready says it answers', { timeout: 180_000 }, async () => {
    const port = await freePortPair();
    const { child, url } = await startProcess({ ADMIN_PORT: String(port + 1) }, port);
    // (startProcess waited for the MCP process's 401: the admin server would answer 404.)
    expect((await fetch(`${url}/mcp`, { method: 'POST' })).status).toBe(401);
    const ready = (await (await fetch(`http://127.0.0.1:${port + 1}/ready`)).json()) as { checks: Record<string, string> };
    expect(ready.checks.mcp).toBe('ok');
    child.kill('SIGTERM');
    expect(await exited(child)).toBe(0);
  });

  it('a taken MCP_PORT fails the start: one line naming it, exit code 1, nothing left running', { timeout: 180_000 }, async () => {
    const port = await freePortPair();
    const squatter = net.createServer().listen(port + 1, '127.0.0.1');
    await new Promise((resolve) => squatter.once('listening', resolve));
    try {
      const { MCP_PORT: _mcpPort, ...inherited } = process.env;
      const child = spawn(process.execPath, ['--import', 'tsx', 'gateway/main.ts'], {
        cwd: root,
        env: { ...inherited, DATABASE_URL: databaseUrl, PORT: String(port), MCP_PORT: String(port + 1), LOG_LEVEL: 'silent' },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      started.push(child);
      let stderr = '';
      child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      expect(await exited(child)).toBe(1);
      expect(stderr.trim().split('\n')).toEqual([
        `could not start: the MCP server: port ${port + 1} is already in use: set MCP_PORT to a free port, or unset it under \`npm start\` (a free port is then chosen), or stop what uses it`,
      ]);
      expect(await gone(child.pid!)).toBe(true);
    } finally {
      squatter.close();
    }
  });
});
