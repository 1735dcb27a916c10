// A backup (`npm run admin -- backup`, gateway/tooling/backup.ts) holds
// private.storage_backup_lock_id in its session from before its snapshot
// until it has copied the stored files: meanwhile the storage_collect job
// takes no key (private.storage_garbage_take), and the backup's lock waits
// for a take under way. So no byte of an object its dump lists is deleted
// before it is copied. Sessions of their own, as the backup and a worker are.
import crypto from 'node:crypto';
import postgres from 'postgres';
import { describe, expect, it } from 'vitest';
import { ownSession } from '../support/sql-fixtures.ts';
import { eventually } from '../support/wait.ts';

const session = ownSession;

describe('storage garbage collection and a backup', () => {
  it('takes no key while a backup holds its lock, and the lock waits for a take under way', async () => {
    const backup = session();
    const worker = session();
    const key = `objects/${crypto.randomUUID()}`;
    const taken = async (tx: postgres.TransactionSql) =>
      (await tx<{ storage_key: string }[]>`select storage_key from private.storage_garbage_take(100000)`).map((r) => r.storage_key);

    // (In the worker's transaction, uncommitted: no other worker of the test database can take the key.)
    await worker
      .begin(async (tx) => {
        await tx`insert into app.storage_garbage (storage_key, collect_after) values (${key}, now() - interval '1 minute')`;
        await backup`select pg_advisory_lock(private.storage_backup_lock_id())`;
        expect(await taken(tx)).not.toContain(key);
        await backup`select pg_advisory_unlock(private.storage_backup_lock_id())`;
        expect(await taken(tx)).toContain(key);
        throw new Error('rolled back');
      })
      .catch((err: Error) => expect(err.message).toBe('rolled back'));

    // A take under way holds the backup off until its transaction ends: what it took then has no row in the backup's snapshot.
    let locked = false;
    let waiting: Promise<unknown> = Promise.resolve();
    await worker
      .begin(async (tx) => {
        await tx`insert into app.storage_garbage (storage_key, collect_after) values (${key}, now() - interval '1 minute')`;
        expect(await taken(tx)).toContain(key);
        waiting = backup`select pg_advisory_lock(private.storage_backup_lock_id())`.then(() => (locked = true));
        await eventually('the backup waiting for the lock', async () => {
          const [row] = await tx<{ n: number }[]>`
            select count(*)::int as n from pg_locks l join pg_stat_activity a on a.pid = l.pid
             where l.locktype = 'advisory' and l.objsubid = 1 and ((l.classid::bigint << 32) | l.objid::bigint) = private.storage_backup_lock_id()
               and not l.granted and a.datname = current_database()`;
          return row!.n > 0;
        }, 10_000);
        expect(locked).toBe(false);
        throw new Error('rolled back');
      })
      .catch((err: Error) => expect(err.message).toBe('rolled back'));
    await waiting;
    expect(locked).toBe(true);
    await backup`select pg_advisory_unlock(private.storage_backup_lock_id())`;
  });
});
