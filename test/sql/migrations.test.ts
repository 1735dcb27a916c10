// The migrations themselves: Supabase's copy is the same SQL, and the
// compatibility layer only creates what is missing (as on a Supabase project,
// where roles, auth.uid() and pgcrypto already exist).
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import postgres from 'postgres';
import { describe, expect, it } from 'vitest';
import { ensureDatabase } from '../../gateway/core/process/embedded-postgres.ts';
import { createLogger } from '../../gateway/core/process/log.ts';
import { MIGRATIONS_FOLDER, runMigrations } from '../../gateway/core/database/migrate.ts';
import { databaseUrl, db } from '../helpers.ts';

const committed = path.join(MIGRATIONS_FOLDER, 'committed');
const supabaseMigrations = path.resolve(MIGRATIONS_FOLDER, '..', '..', 'supabase', 'migrations');

describe('migrations', () => {
  it('supabase/migrations holds every committed migration, in the same order, as the same file', () => {
    const ours = fs.readdirSync(committed).filter((f) => f.endsWith('.sql')).sort();
    const theirs = fs.readdirSync(supabaseMigrations).filter((f) => f.endsWith('.sql')).sort();
    expect(theirs).toHaveLength(ours.length);
    theirs.forEach((file, i) => {
      expect(file).toMatch(/^\d{14}_[a-z0-9_]+\.sql$/);
      expect(fs.realpathSync(path.join(supabaseMigrations, file))).toBe(fs.realpathSync(path.join(committed, ours[i]!)));
    });
  });

  it('current/ holds no SQL on main (work in progress is committed before it lands)', () => {
    const current = fs.readdirSync(path.join(MIGRATIONS_FOLDER, 'current')).filter((f) => f.endsWith('.sql'));
    expect(current).toEqual([]);
    expect(fs.existsSync(path.join(MIGRATIONS_FOLDER, 'current.sql'))).toBe(false);
  });

  it('the compatibility migration is a no-op on a database that already has everything', async () => {
    const sqlText = fs.readFileSync(path.join(committed, '000001-supabase-compat.sql'), 'utf8');
    const rollback = new Error('rollback');
    await expect(
      db().begin(async (tx) => {
        await tx.unsafe(sqlText);
        throw rollback;
      }),
    ).rejects.toBe(rollback);
  });

  it('keeps an existing auth.uid() (as on Supabase) instead of replacing it', async () => {
    const name = `premade_${crypto.randomBytes(4).toString('hex')}`;
    const server = Object.assign(new URL(databaseUrl), { pathname: '/postgres' }).toString();
    await ensureDatabase(server, name);
    const url = Object.assign(new URL(databaseUrl), { pathname: `/${name}` }).toString();
    const sql = postgres(url, { max: 1, onnotice: () => {} });
    try {
      await sql.unsafe(`
        create schema auth;
        create function auth.uid() returns uuid language sql stable as $$ select null::uuid $$;
        comment on function auth.uid() is 'pre-existing';`);
      await runMigrations(url, createLogger('silent'), { includeCurrent: false });
      const [row] = await sql`select obj_description('auth.uid()'::regprocedure) as comment, to_regprocedure('auth.jwt()') is not null as has_jwt`;
      expect(row).toEqual({ comment: 'pre-existing', has_jwt: true });
    } finally {
      await sql.end();
      const admin = postgres(server, { max: 1, onnotice: () => {} });
      await admin`drop database if exists ${admin(name)} with (force)`;
      await admin.end();
    }
  });
});
