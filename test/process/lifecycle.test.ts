// The processes a user runs: the gateway entry point of `npm start` (embedded
// Postgres, clean stop on SIGTERM/SIGINT, data kept between starts; or
// DATABASE_URL) and the admin CLI.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { isAlive } from '../../gateway/lib/embedded-postgres.ts';
import { databaseUrl, uniqueEmail } from '../helpers.ts';

const root = path.resolve(import.meta.dirname, '..', '..');
const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
});

function startGatewayProcess(env: Record<string, string>): Promise<{ child: ChildProcess; url: string; output: () => string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'gateway/main.ts'], {
    cwd: root,
    env: { ...process.env, LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let output = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`gateway did not start:\n${output}`)), 60_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const match = /gateway listening on (http:\/\/localhost:\d+)/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve({ child, url: match[1]!, output: () => output });
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`gateway exited with ${code}:\n${output}`));
    });
  });
}

function exited(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => {
    if (child.exitCode !== null) resolve(child.exitCode);
    else child.on('exit', (code) => resolve(code));
  });
}

const freePort = () => 30000 + crypto.randomInt(20000);

describe('npm start (gateway/main.ts)', () => {
  it('starts an embedded Postgres, serves, stops it cleanly, and keeps the data for the next start', async () => {
    const dataDir = path.join(inject('testDir'), `start-${crypto.randomBytes(3).toString('hex')}`);
    const env = { DATA_DIR: dataDir, PORT: String(freePort()), EMBEDDED_PG_PORT: String(freePort()) };

    const first = await startGatewayProcess(env);
    expect((await fetch(`${first.url}/health`)).status).toBe(200);
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

  it('uses DATABASE_URL instead when it is set (no embedded cluster)', async () => {
    const dataDir = path.join(inject('testDir'), `url-${crypto.randomBytes(3).toString('hex')}`);
    const gw = await startGatewayProcess({ DATABASE_URL: databaseUrl, DATA_DIR: dataDir, PORT: String(freePort()) });
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
    spawnSync(process.execPath, ['--import', 'tsx', 'gateway/admin.ts', ...args], {
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

    // The outbox shows an unsent recovery e-mail with its link.
    const recovered = spawnSync(process.execPath, ['--import', 'tsx', '-e', `
      import postgres from 'postgres';
      const sql = postgres(process.env.DATABASE_URL, { max: 1 });
      await sql\`select api.auth_recover(\${process.argv[1]}, 'https://example.test')\`;
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
