// What operators do to the processes, done for real (issue 21): SIGTERM to
// the `npm start` process (as systemd, docker stop or a process manager send
// it), a port taken in cluster mode, a data folder on a read-only mount or
// that is a file, and a request past the statement timeout. Each ends in one
// clear line (or answer), and nothing is left running.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { databaseUrl, db, registerUser, jwtSecret, publicUrl } from '../helpers.ts';
import { exited, freePort, postgresOnPort, projectRoot, startGatewayProcess, waitUntil } from '../support/processes.ts';
import { testDir } from '../support/test-dir.ts';

/** Node processes of this project whose environment has PORT=<port> (the gateway, its workers, its MCP child). */
function projectProcessesOn(port: number): number[] {
  const pids: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      const cmdline = fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      if (!/(gateway|mcp-server)\/main\.ts/.test(cmdline)) continue;
      const environ = fs.readFileSync(`/proc/${entry}/environ`, 'utf8').split('\0');
      if (environ.includes(`PORT=${port}`)) pids.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

/** Holds a TCP port (as another program would) until released. */
async function holdPort(port: number, host = '0.0.0.0'): Promise<() => Promise<void>> {
  const server = net.createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, resolve);
  });
  return () => new Promise((resolve) => server.close(() => resolve()));
}

function runGateway(env: Record<string, string>, timeoutMs = 60_000) {
  return spawnSync(process.execPath, ['--import', 'tsx', 'gateway/main.ts'], {
    cwd: projectRoot,
    env: { ...process.env, LOG_LEVEL: 'warn', ...env },
    encoding: 'utf8',
    timeout: timeoutMs,
  });
}

const dataDir = (name: string) => path.join(testDir, `${name}-${crypto.randomBytes(3).toString('hex')}`);

describe('signals to `npm start`', () => {
  it('SIGTERM to the npm process stops the gateway, the MCP server and Postgres', { timeout: 120_000 }, async () => {
    const port = freePort();
    const pgPort = freePort();
    const gw = await startGatewayProcess(
      { DATA_DIR: dataDir('npm-term'), PORT: String(port), EMBEDDED_PG_PORT: String(pgPort) },
      { command: ['npm', 'start'] },
    );
    expect((await fetch(`${gw.url}/health`)).status).toBe(200);
    await waitUntil(() => projectProcessesOn(port).length >= 2, 30_000, 'the gateway and its MCP server');
    expect(postgresOnPort(pgPort).length).toBeGreaterThan(0);

    // The npm process only, as a process manager signals the process it started.
    gw.child.kill('SIGTERM');
    await exited(gw.child);
    await waitUntil(() => projectProcessesOn(port).length === 0, 30_000, 'the gateway and the MCP server to exit');
    await waitUntil(() => postgresOnPort(pgPort).length === 0, 30_000, 'Postgres to stop');
    expect(gw.output()).toContain('shutting down');
  });
});

/** Node processes running `script` and whose environment holds `mark` (TEST_MARK=...). */
function processesMarked(script: string, mark: string): number[] {
  const pids: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      const args = fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      if (path.basename(args[0] ?? '') !== 'node' || !args.includes(script)) continue;
      if (fs.readFileSync(`/proc/${entry}/environ`, 'utf8').split('\0').includes(`TEST_MARK=${mark}`)) pids.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

describe('signals to `npm run worker` and `npm run mcp`', () => {
  // Their scripts exec node, so npm passes SIGTERM on; without exec, npm's
  // shell died and node ran on under init.
  for (const { script, file, ready } of [
    { script: 'worker', file: 'gateway/worker-main.ts', ready: 'job worker running' },
    { script: 'mcp', file: 'mcp-server/main.ts', ready: 'MCP server listening' },
  ]) {
    it(`SIGTERM to the npm process of \`npm run ${script}\` stops it`, { timeout: 60_000 }, async () => {
      const mark = crypto.randomBytes(6).toString('hex');
      const port = freePort();
      const child = spawn('npm', ['run', '--silent', script], {
        cwd: projectRoot,
        env: { ...process.env, DATABASE_URL: databaseUrl, PORT: String(port), MCP_PORT: String(port + 1), LOG_LEVEL: 'info', TEST_MARK: mark },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let output = '';
      child.stdout!.on('data', (c: Buffer) => (output += c.toString()));
      child.stderr!.on('data', (c: Buffer) => (output += c.toString()));
      try {
        await waitUntil(() => output.includes(ready), 30_000, `npm run ${script} to start`);
        expect(processesMarked(file, mark)).toHaveLength(1);
        child.kill('SIGTERM');
        await exited(child);
        await waitUntil(() => processesMarked(file, mark).length === 0, 20_000, `the ${script} process to exit`);
        expect(output).toContain('shutting down');
      } finally {
        for (const pid of processesMarked(file, mark)) process.kill(pid, 'SIGKILL');
      }
    });
  }
});

describe('cluster mode (WEB_CONCURRENCY=2) failing to start', () => {
  const cluster = { WEB_CONCURRENCY: '2', NODE_ENV: 'production' };

  it('a taken port is one line on stderr and exit 1, not workers re-forked forever', { timeout: 120_000 }, async () => {
    const port = freePort();
    const pgPort = freePort();
    const release = await holdPort(port);
    try {
      const started = Date.now();
      const result = runGateway({ ...cluster, DATA_DIR: dataDir('cluster-port'), PORT: String(port), EMBEDDED_PG_PORT: String(pgPort) });
      expect(result.status, result.stderr).toBe(1);
      expect(result.stderr.trim().split('\n')).toEqual([`could not start: port ${port} is already in use: set PORT to a free port, or stop what uses it`]);
      expect(Date.now() - started).toBeLessThan(60_000);
      expect(projectProcessesOn(port)).toEqual([]);
      expect(postgresOnPort(pgPort)).toEqual([]);
    } finally {
      await release();
    }
  });

  it('a taken Postgres port is one line on stderr, no log line with a stack trace', { timeout: 120_000 }, async () => {
    const pgPort = freePort();
    const release = await holdPort(pgPort, '127.0.0.1');
    try {
      const result = runGateway({ ...cluster, DATA_DIR: dataDir('cluster-pg'), PORT: String(freePort()), EMBEDDED_PG_PORT: String(pgPort) });
      expect(result.status).toBe(1);
      expect(result.stderr.trim().split('\n')).toHaveLength(1);
      expect(result.stderr).toMatch(new RegExp(`^could not start: port ${pgPort} for the embedded Postgres is already in use`));
      expect(result.stdout).not.toMatch(/"level":60|\bat \S+ \(/);
    } finally {
      await release();
    }
  });
});

describe('a data folder the gateway cannot use', () => {
  it('a file: one line naming it', () => {
    const file = dataDir('a-file');
    fs.writeFileSync(file, 'not a folder');
    const result = runGateway({ DATA_DIR: file, PORT: String(freePort()), EMBEDDED_PG_PORT: String(freePort()) });
    expect(result.status).toBe(1);
    expect(result.stderr.trim()).toBe(`could not start: cannot use the data folder ${file}: ${file} is a file, not a folder; set DATA_DIR to a writable folder`);
  });

  it('on a read-only mount: one line saying so', (ctx) => {
    const mountPoint = dataDir('read-only');
    fs.mkdirSync(mountPoint);
    const mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', 'ro,size=1m', 'tmpfs', mountPoint], { encoding: 'utf8' });
    if (mounted.status !== 0) {
      console.warn(`[read-only data folder] skipped: cannot mount a read-only tmpfs here (${mounted.stderr.trim()})`);
      return ctx.skip();
    }
    try {
      const result = runGateway({ DATA_DIR: path.join(mountPoint, 'data'), PORT: String(freePort()), EMBEDDED_PG_PORT: String(freePort()) });
      expect(result.status).toBe(1);
      expect(result.stderr.trim()).toBe(
        `could not start: cannot use the data folder ${path.join(mountPoint, 'data')}: ${mountPoint} is on a read-only file system; set DATA_DIR to a writable folder`,
      );
    } finally {
      execFileSync('umount', [mountPoint]);
    }
  });
});

describe('a request past the statement timeout', () => {
  it('is 504 statement_timeout, says nothing was changed, and changes nothing', { timeout: 60_000 }, async () => {
    // The test gateway's secret and issuer, so that the user's access token is valid here too.
    const gw = await startGatewayProcess({
      DATABASE_URL: databaseUrl,
      JWT_SECRET: jwtSecret,
      PUBLIC_URL: publicUrl,
      DATA_DIR: dataDir('timeout'),
      PORT: String(freePort()),
      STATEMENT_TIMEOUT_MS: '500',
    });
    const user = await registerUser('timeout');
    try {
      // Another transaction holds the caller's profile row: the update waits on it until the timeout.
      await db().begin(async (lock) => {
        await lock`select 1 from app.profiles where id = ${user.userId} for update`;
        const res = await fetch(`${gw.url}/api/mobile/profile`, {
          method: 'PATCH',
          headers: { authorization: `Bearer ${user.accessToken}`, 'content-type': 'application/json' },
          body: JSON.stringify({ name: 'Never Set' }),
        });
        expect(res.status).toBe(504);
        const body = (await res.json()) as { error: string; message: string };
        expect(body.error).toBe('statement_timeout');
        expect(body.message).toMatch(/nothing was changed/);
      });
      const [row] = await db()`select name from app.profiles where id = ${user.userId}`;
      expect(row!.name).not.toBe('Never Set');
    } finally {
      gw.child.kill('SIGTERM');
      await exited(gw.child);
    }
  });
});

describe('replicas on one database', () => {
  it('a gateway whose PUBLIC_URL differs from a running one says so at start (its tokens would be refused)', { timeout: 60_000 }, async () => {
    const start = (publicUrl: string) =>
      startGatewayProcess({ DATABASE_URL: databaseUrl, JWT_SECRET: jwtSecret, PUBLIC_URL: publicUrl, DATA_DIR: dataDir('replica'), PORT: String(freePort()) });
    const same = await start(publicUrl);
    const other = await start('https://other.example.com');
    try {
      expect(same.output()).not.toContain('different PUBLIC_URL');
      expect(other.output()).toContain('another gateway on this database has a different PUBLIC_URL');
    } finally {
      for (const gw of [same, other]) gw.child.kill('SIGTERM');
      await Promise.all([exited(same.child), exited(other.child)]);
    }
  });
});

describe('SIGTERM while requests arrive', () => {
  it('stops accepting at once, answers what it accepted, and never says it is starting', { timeout: 90_000 }, async () => {
    const http = await import('node:http');
    const gw = await startGatewayProcess({
      DATABASE_URL: databaseUrl,
      JWT_SECRET: jwtSecret,
      PUBLIC_URL: publicUrl,
      DATA_DIR: dataDir('drain'),
      PORT: String(freePort()),
    });
    const user = await registerUser('drain');
    const port = Number(new URL(gw.url).port);
    // Each request on a new connection, as new clients arrive.
    const get = () =>
      new Promise<string>((resolve) => {
        const req = http.get({ host: '127.0.0.1', port, path: '/api/mobile/profile', agent: false, headers: { authorization: `Bearer ${user.accessToken}` } }, (res) => {
          let body = '';
          res.on('data', (c: Buffer) => (body += c));
          res.on('end', () => resolve(`${res.statusCode} ${body.includes('starting') ? 'starting' : ''}`.trim()));
        });
        req.on('error', (err: NodeJS.ErrnoException) => resolve(`refused ${err.code}`));
      });
    const answers: string[] = [];
    let sending = true;
    const senders = Array.from({ length: 4 }, async () => {
      while (sending) answers.push(await get());
    });
    await new Promise((r) => setTimeout(r, 300));
    gw.child.kill('SIGTERM');
    expect(await exited(gw.child)).toBe(0);
    sending = false;
    await Promise.all(senders);
    const kinds = new Set(answers.map((a) => a.split(' ')[0] === 'refused' ? 'refused' : a));
    expect(answers.filter((a) => a.includes('starting')), 'answers saying the service is starting').toEqual([]);
    // Answered requests were served; the rest were refused at the door (nothing of them ran).
    expect([...kinds].every((k) => k === '200' || k === 'refused'), [...kinds].join(', ')).toBe(true);
    expect(answers.filter((a) => a === '200').length).toBeGreaterThan(0);
  });
});
