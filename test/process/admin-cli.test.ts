// The operator surface is complete: every admin.* SQL function has an
// `npm run admin` command of the same name, every command answers --help, and
// `npm run admin -- sql` opens psql on the service's database. Every command
// says which database it uses; one that reads data refuses an embedded
// database that was never made; `keys` signs for the issuer the gateway on
// the database uses.
import { execFile, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { findPsql } from '../../gateway/tooling/psql.ts';
import { api, databaseUrl, db, jwtSecret, publicUrl, registerUser } from '../helpers.ts';

const root = path.resolve(import.meta.dirname, '..', '..');
// As an operator types it: the service's DATABASE_URL (and its JWT_SECRET), no PORT nor PUBLIC_URL.
const { PORT: _port, PUBLIC_URL: _publicUrl, ...inherited } = process.env;
const env = { ...inherited, DATABASE_URL: databaseUrl, JWT_SECRET: jwtSecret };
const admin = (...args: string[]) => adminWith(env, ...args);
const adminWith = (environment: NodeJS.ProcessEnv, ...args: string[]) =>
  spawnSync(process.execPath, ['--import', 'tsx', 'gateway/tooling/admin.ts', ...args], { cwd: root, env: environment, encoding: 'utf8' });
/** What every command writes on stderr first: the database it uses. */
const DATABASE_LINE = /^database: postgres:\/\/[^\n]*\(DATABASE_URL\)\n/;
const adminAsync = (...args: string[]) =>
  promisify(execFile)(process.execPath, ['--import', 'tsx', 'gateway/tooling/admin.ts', ...args], { cwd: root, env, encoding: 'utf8' });

/** The command names `--help` lists (lines "  name options"). */
const listedCommands = (help: string) => [...help.matchAll(/^ {2}([a-z][a-z0-9-]*)/gm)].map((m) => m[1]!);

describe('npm run admin: the operator surface', () => {
  it('has a command for every admin.* function', async () => {
    const functions = await db()`
      select distinct p.proname from pg_proc p where p.pronamespace = 'admin'::regnamespace order by 1`;
    const help = admin('--help');
    expect(help.status).toBe(0);
    const commands = listedCommands(help.stdout);
    expect(functions.length).toBeGreaterThan(5);
    // One command serves the signing keys' functions, as subcommands (list, add, rotate, revoke).
    const families: Record<string, string> = {
      'signing-key-add': 'signing-keys',
      'signing-key-rotate': 'signing-keys',
      'signing-key-revoke': 'signing-keys',
      'signing-keys-list': 'signing-keys',
    };
    for (const f of functions) {
      const name = (f.proname as string).replaceAll('_', '-');
      expect(commands).toContain(families[name] ?? name);
    }
    expect(commands).toContain('sql');
  });

  // One process per command (tsx start-up is slow on a loaded machine): three at a time.
  it('every command answers --help with its usage', { timeout: 300_000 }, async () => {
    const commands = listedCommands(admin('--help').stdout);
    const pending = [...commands];
    const worker = async () => {
      for (let c = pending.shift(); c; c = pending.shift()) {
        const { stdout } = await adminAsync(c, '--help');
        expect(stdout).toContain(`Usage: npm run admin -- ${c}`);
      }
    };
    await Promise.all([worker(), worker(), worker()]);
  });

  it('publish-events-to-supabase-realtime says whether app.events is published', () => {
    const result = admin('publish-events-to-supabase-realtime');
    expect(result.status).toBe(0);
    expect(result.stdout.trim()).toMatch(/^(true|false)$/);
    expect(admin('publish-events-to-supabase-realtime', '--now', 'x').status).toBe(1);
  });

  it('set-venue-timezone and set-community-timezone set a zone as the tz database spells it; an unknown one fails', async () => {
    const [venue] = await db()`select admin.create_venue('CLI hall') as id`;
    const set = admin('set-venue-timezone', '--venue-node-id', venue!.id, '--timezone', 'europe/rome');
    expect(set.stderr).toMatch(new RegExp(`${DATABASE_LINE.source}$`));
    expect(set.stdout.trim()).toBe('Europe/Rome');
    expect((await db()`select timezone from app.venues where node_id = ${venue!.id}`)[0]!.timezone).toBe('Europe/Rome');
    expect(admin('set-venue-timezone', '--venue-node-id', venue!.id, '--timezone', 'none').stdout.trim()).toBe('none');
    const [community] = await db()`select admin.create_community('CLI zone club') as id`;
    const unknown = admin('set-community-timezone', '--community-id', community!.id, '--timezone', 'Atlantis/Capital');
    expect(unknown.status).toBe(1);
    expect(unknown.stderr).toMatch(/IANA time zone/);
  });

  it('delete-user EMAIL deletes the account as its owner would: its session ends at once, the address registers again', async () => {
    const user = await registerUser('clidel');
    const [c] = await db()`select admin.create_community('CLI solo', null, '{}', ${user.email}) as id`;
    const refused = await adminAsync('delete-user', user.email).catch((err: { code: number; stderr: string }) => err);
    expect(refused).toMatchObject({ code: 1, stderr: expect.stringContaining('the account is the only manager of 1 community') });
    await db()`delete from app.communities where id = ${c!.id}`;

    const { stdout } = await adminAsync('delete-user', user.email.toUpperCase());
    expect(JSON.parse(stdout)).toMatchObject({ user_id: user.userId, communities_left: 0 });
    const after = await api('GET', '/api/mobile/profile', { token: user.accessToken });
    expect(after.status).toBe(401);
    expect(after.body.error).toBe('session_ended');
    expect((await api('POST', '/api/auth/register', { body: { email: user.email, password: 'registered again' } })).status).toBe(201);

    const unknown = admin('delete-user', '--email', 'nobody-at-all@example.com');
    expect(unknown.status).toBe(1);
    expect(unknown.stderr).toContain('no user with email');
    expect(admin('delete-user', 'a@example.com', 'b@example.com').status).toBe(1);
  });

  it('storage-bucket-create adds a bucket with its rules; a bad rule is refused', async () => {
    const id = `cli-bucket-${Date.now().toString(36)}`;
    const made = admin('storage-bucket-create', '--id', id, '--public', 'false', '--folder-owner', 'user', '--max-bytes', '1048576',
      '--types', 'application/pdf,text/plain', '--attachment', 'true');
    expect(made.stderr).toMatch(new RegExp(`${DATABASE_LINE.source}$`));
    expect(made.stdout.trim()).toBe('ok');
    const [bucket] = await db()`select public, folder_owner, file_size_limit, allowed_mime_types, images, download_as_attachment
                                  from app.storage_buckets where id = ${id}`;
    expect(bucket).toEqual({ public: false, folder_owner: 'user', file_size_limit: '1048576', allowed_mime_types: ['application/pdf', 'text/plain'],
      images: false, download_as_attachment: true });
    expect(admin('storage-bucket-create', '--id', `${id}-x`, '--public', 'true', '--folder-owner', 'everyone', '--max-bytes', '10').status).toBe(1);
    expect(admin('storage-bucket-create', '--id', `${id}-y`, '--public', 'true', '--folder-owner', 'user', '--max-bytes', '10',
      '--images', 'true', '--types', 'image/svg+xml').status).toBe(1);
  });

  it.skipIf(!findPsql())('sql runs psql on the service database', () => {
    const result = admin('sql', '-tA', '-c', "select count(*) > 0 from pg_proc where pronamespace = 'admin'::regnamespace");
    expect(result.stderr).toMatch(new RegExp(`${DATABASE_LINE.source}$`));
    expect(result.stdout.trim()).toBe('t');
    expect(admin('sql', '-c', 'select nope').status).not.toBe(0);
  });

  it('says which database it uses, without the password', () => {
    const result = admin('storage-usage', '--limit', '1');
    expect(result.status, result.stderr).toBe(0);
    expect(result.stderr).toMatch(DATABASE_LINE);
    // (The test database has one on the embedded Postgres; none on CI's PostgreSQL 15 pass.)
    const password = decodeURIComponent(new URL(databaseUrl).password);
    if (password) expect(result.stderr).not.toContain(password);
    expect(result.stderr).toContain(databaseUrl.replace(/:[^:@/]*@/, '@'));
  });

  it('without DATABASE_URL, a command that reads data refuses an embedded database that was never made, and makes none', () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'admin-empty-'));
    try {
      const { DATABASE_URL: _url, ...withoutUrl } = env;
      const result = adminWith({ ...withoutUrl, DATA_DIR: dataDir }, 'delete-user', 'someone@example.com');
      expect(result.status).toBe(1);
      expect(result.stderr).toMatch(/DATABASE_URL is unset and there is no embedded development database in .*: set DATABASE_URL to the service's database/);
      expect(result.stderr).not.toMatch(/no user with email/);
      expect(fs.existsSync(path.join(dataDir, 'postgres'))).toBe(false);
    } finally {
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it("keys signs for the issuer of the gateway on the database (no PORT nor PUBLIC_URL given), says it, and the gateway takes the keys", async () => {
    const result = admin('keys');
    expect(result.status, result.stderr).toBe(0);
    const lines = result.stdout.trim().split('\n');
    expect(lines[0]).toBe(`# issuer ${publicUrl}/api/auth (the PUBLIC_URL the gateway on this database started with); signed with JWT_SECRET`);
    const anon = /^SUPABASE_ANON_KEY=(.+)$/m.exec(result.stdout)![1]!;
    const serviceRole = /^SUPABASE_SERVICE_ROLE_KEY=(.+)$/m.exec(result.stdout)![1]!;
    expect((await api('GET', '/auth/v1/settings', { headers: { apikey: anon } })).status).toBe(200);
    expect((await api('GET', '/auth/v1/admin/users', { headers: { apikey: serviceRole, authorization: `Bearer ${serviceRole}` } })).status).toBe(200);
    // PUBLIC_URL given here wins (as it would for a gateway started with it), with a warning that this gateway refuses it.
    const other = adminWith({ ...env, PUBLIC_URL: 'http://elsewhere.example.com' }, 'keys');
    expect(other.stdout).toMatch(/^# issuer http:\/\/elsewhere\.example\.com\/api\/auth \(PUBLIC_URL\)/);
    expect(other.stderr).toContain(`warning: the gateway on this database started with PUBLIC_URL ${publicUrl}`);
  });
});
