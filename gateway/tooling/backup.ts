// `npm run admin -- backup DIR` and `restore DIR`: everything the service
// keeps, in one consistent copy: the database (pg_dump, custom format) and
// the bytes of every stored file the dump lists, from the configured byte
// store (fs: STORAGE_DIR; s3: the bucket), and the generated JWT secret
// when the service signs with it (DATA_DIR/jwt-secret).
// docs/operations/backup.md#backup-and-restore says how to use them.
//
// Why the copy is consistent. A file's bytes are durable before the row that
// lists it commits (gateway/storage/uploader.ts, private.storage_upload_finish),
// and they are deleted only by the storage_collect job, after the row is gone
// and its key was taken by private.storage_garbage_take. The backup holds
// private.storage_backup_lock_id (a session advisory lock) from before its
// snapshot until it has copied the files: while it does, garbage_take takes
// nothing (and the lock waits for a take still under way). So:
//   1. lock; a repeatable-read transaction exports its snapshot;
//   2. pg_dump dumps exactly that snapshot (--snapshot);
//   3. the same snapshot lists the objects' keys, whose bytes are copied:
//      every one was durable when the snapshot was taken, and none can have
//      been deleted since (no key is taken while the lock is held; a key
//      taken before it had no row in the snapshot);
//   4. commit, unlock: collection resumes.
// Files are copied after the dump, never before: a file copied first could
// belong to an object deleted (and collected) before the dump, which is
// harmless, but an object made after it would be missing from the copy.
//
// A restore puts the files into the configured byte store first, then
// restores the database into an empty one (pg_restore, as the owner): no
// object the restored database lists is missing.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import postgres from 'postgres';
import type { Config } from '../core/process/config.ts';
import type { Database } from '../core/process/open-database.ts';
import { createByteStore } from '../storage/service.ts';
import { checkKey, NotStoredError, type ByteStore } from '../storage/byte-store.ts';
import { findClientProgram, libpqEnvironment } from './psql.ts';

/** What a backup folder holds, besides database.dump and files/ (backup.json). */
interface Manifest {
  format: 1;
  createdAt: string;
  /** The database it was taken from (no password), and its server's major version. */
  database: string;
  serverVersion: number;
  /** Where the files came from (fs:STORAGE_DIR or s3:bucket/prefix). */
  byteStore: string;
  objects: number;
  bytes: number;
  /** DATA_DIR/jwt-secret is in the folder (the service signed with the generated secret). */
  jwtSecret: boolean;
}

const DUMP = 'database.dump';
const FILES = 'files';
const MANIFEST = 'backup.json';
const JWT_SECRET = 'jwt-secret';

/** Where a configuration's files are, for a person. */
function byteStoreOf(config: Config): string {
  const { storage } = config;
  return storage.backend === 's3' ? `s3:${storage.s3!.bucket}/${storage.s3!.prefix}` : `fs:${path.join(storage.dir, 'objects')}`;
}

async function serverMajor(sql: postgres.Sql): Promise<number> {
  const [row] = await sql<{ v: string }[]>`select current_setting('server_version_num') as v`;
  return Math.floor(Number(row!.v) / 10000);
}

function run(program: string, args: string[], databaseUrl: string): void {
  const result = spawnSync(program, args, { env: libpqEnvironment(databaseUrl, 'admin-backup'), encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`${path.basename(program)} failed: ${(result.stderr || result.stdout || result.error?.message || '').trim()}`);
}

export async function backup(config: Config, database: Database, dir: string): Promise<string> {
  const target = path.resolve(dir);
  if (fs.existsSync(target) && fs.readdirSync(target).length > 0) throw new Error(`${target} is not empty: give a new folder`);
  // The dump and the lock need a session of their own (not a transaction pooler's).
  const url = config.databaseDirectUrl ?? database.url;
  const session = postgres(url, { max: 1, onnotice: () => {}, connection: { application_name: 'admin-backup' } });
  const bytes = createByteStore(config.storage);
  try {
    const serverVersion = await serverMajor(session);
    const pgDump = findClientProgram('pg_dump', serverVersion);
    fs.mkdirSync(path.join(target, FILES), { recursive: true, mode: 0o700 });
    const conn = await session.reserve();
    try {
      // 1. No byte is collected from here on (private.storage_garbage_take), then the snapshot.
      await conn`select pg_advisory_lock(private.storage_backup_lock_id())`;
      await conn`begin isolation level repeatable read read only`;
      const [exported] = await conn<{ snapshot: string }[]>`select pg_export_snapshot() as snapshot`;
      const snapshot = exported!.snapshot;
      // 2. The dump of exactly that snapshot.
      run(pgDump, ['--format=custom', `--snapshot=${snapshot}`, `--file=${path.join(target, DUMP)}`], url);
      // 3. The files of the objects that snapshot lists.
      let objects = 0;
      let size = 0;
      for await (const rows of conn<{ storage_key: string }[]>`select storage_key from app.storage_objects order by storage_key`.cursor(500)) {
        for (const { storage_key: key } of rows) {
          size += await copyOut(bytes, key, path.join(target, FILES, checkKey(key)), config);
          objects++;
        }
      }
      await conn`commit`;
      // 4. Collection resumes.
      await conn`select pg_advisory_unlock(private.storage_backup_lock_id())`;
      const jwtSecret = !config.jwtSecret && !config.jwtSigningKeys && fs.existsSync(path.join(config.dataDir, JWT_SECRET));
      if (jwtSecret) fs.copyFileSync(path.join(config.dataDir, JWT_SECRET), path.join(target, JWT_SECRET));
      const manifest: Manifest = {
        format: 1,
        createdAt: new Date().toISOString(),
        database: database.description,
        serverVersion,
        byteStore: byteStoreOf(config),
        objects,
        bytes: size,
        jwtSecret,
      };
      fs.writeFileSync(path.join(target, MANIFEST), `${JSON.stringify(manifest, null, 2)}\n`, { mode: 0o600 });
      return `backed up into ${target}: the database (${DUMP}) and ${objects} stored files (${size} bytes, from ${manifest.byteStore})${jwtSecret ? ', and the generated JWT secret' : ''}`;
    } finally {
      conn.release();
    }
  } finally {
    await session.end({ timeout: 5 });
  }
}

/** Copies the bytes under `key` to `file`; their size. A key the database lists and the store lacks fails the backup, saying where it looked. */
async function copyOut(bytes: ByteStore, key: string, file: string, config: Config): Promise<number> {
  let body;
  try {
    body = await bytes.get(key);
  } catch (err) {
    if (err instanceof NotStoredError) {
      throw new Error(`${key}, which the database lists, is not in ${byteStoreOf(config)}: run the backup with the gateway's STORAGE_DIR (or STORAGE_S3_*)`);
    }
    throw err;
  }
  await fsp.mkdir(path.dirname(file), { recursive: true });
  await pipeline(body, fs.createWriteStream(file, { mode: 0o600 }));
  return (await fsp.stat(file)).size;
}

export async function restore(config: Config, database: Database, dir: string): Promise<string> {
  const source = path.resolve(dir);
  const manifestFile = path.join(source, MANIFEST);
  if (!fs.existsSync(manifestFile)) throw new Error(`${source} holds no backup (no ${MANIFEST})`);
  const manifest = JSON.parse(fs.readFileSync(manifestFile, 'utf8')) as Manifest;
  const url = config.databaseDirectUrl ?? database.url;
  const session = postgres(url, { max: 1, onnotice: () => {} });
  const bytes = createByteStore(config.storage);
  try {
    // Into an empty database only: a restore never mixes with data.
    const [used] = await session<{ schemas: string[] }[]>`
      select coalesce(array_agg(nspname order by nspname), '{}') as schemas from pg_namespace
       where nspname in ('app', 'identity', 'graphile_migrate', 'graphile_worker')`;
    if (used!.schemas.length > 0) {
      throw new Error(`${database.description} is not empty (schemas ${used!.schemas.join(', ')}): restore into a new, empty database`);
    }
    if (config.storage.backend === 'fs') {
      const objects = path.join(config.storage.dir, 'objects');
      if (fs.existsSync(objects) && fs.readdirSync(objects).length > 0) throw new Error(`${objects} is not empty: restore into an empty STORAGE_DIR`);
    }
    const pgRestore = findClientProgram('pg_restore', await serverMajor(session));
    // 1. The files, into the configured byte store (each durable when put resolves).
    let restored = 0;
    const files = path.join(source, FILES);
    for (const folder of fs.existsSync(files) ? fs.readdirSync(files) : []) {
      for (const name of fs.readdirSync(path.join(files, folder))) {
        const key = checkKey(`${folder}/${name}`);
        await bytes.put(key, fs.createReadStream(path.join(files, key)), { contentType: 'application/octet-stream' });
        restored++;
      }
    }
    if (restored !== manifest.objects) throw new Error(`${files} holds ${restored} files, the backup says ${manifest.objects}: it is incomplete`);
    // 2. The database, in one transaction, as the owner.
    run(pgRestore, ['--no-owner', '--single-transaction', '--exit-on-error', `--dbname=${libpqEnvironment(url, 'admin-restore').PGDATABASE}`, path.join(source, DUMP)], url);
    // 3. The generated JWT secret, when the service signed with it: the access tokens it issued stay valid.
    let secret = '';
    if (manifest.jwtSecret && !config.jwtSecret && !config.jwtSigningKeys) {
      const file = path.join(config.dataDir, JWT_SECRET);
      const saved = fs.readFileSync(path.join(source, JWT_SECRET));
      if (!fs.existsSync(file)) {
        fs.mkdirSync(config.dataDir, { recursive: true });
        fs.writeFileSync(file, saved, { mode: 0o600 });
        secret = `, and the generated JWT secret into ${file}`;
      } else if (!fs.readFileSync(file).equals(saved)) {
        secret = `; ${file} holds another JWT secret than the backup's (${JWT_SECRET}): access tokens issued before are refused unless you put it back`;
      }
    }
    return `restored ${manifest.objects} stored files into ${byteStoreOf(config)} and the database of ${manifest.createdAt} into ${database.description}${secret}`;
  } finally {
    await session.end({ timeout: 5 });
  }
}
