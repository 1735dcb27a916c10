// The storage jobs' entry points (sql/areas/storage.sql decides what; this
// moves bytes; gateway/jobs/ runs them on graphile-worker):
//
//   storage_collect  every minute (jobs/crontab.ts): uploads past their expiry
//                    (cut off, or their gateway killed) are forgotten and their
//                    keys become garbage (and transformation counts of past
//                    minutes are forgotten); garbage keys are deleted from the
//                    byte store with their transformations, a batch at a
//                    time (one that fails is tried again later, with
//                    back-off); leftovers of killed processes (temporary files,
//                    resumable uploads staged more than a day ago) are swept.
//   storage_purge    queued by SQL when an account, a community or an event
//                    is deleted (or by account deletion that keeps the row:
//                    private.storage_purge_enqueue): deletes the objects of
//                    its folders, a batch at a time; their bytes follow as
//                    garbage.
import type { JobHelpers, Task } from 'graphile-worker';
import type { StorageService } from './service.ts';

/** Garbage keys deleted per batch. */
const BATCH = 200;

/** One storage_collect run: how much it did. */
export async function collectStorage(helpers: JobHelpers, storage: StorageService): Promise<{ expired: number; deleted: number; failed: number; swept: number }> {
  const { rows: expiredRows } = await helpers.query<{ n: number }>('select private.storage_uploads_expire() as n');
  await helpers.query('select private.storage_render_misses_prune()');
  let deleted = 0;
  let failed = 0;
  for (;;) {
    const { rows } = await helpers.query<{ storage_key: string }>('select storage_key from private.storage_garbage_take($1)', [BATCH]);
    if (rows.length === 0) break;
    const keys = rows.map((r) => r.storage_key);
    const failures: Record<string, string> = {};
    try {
      await storage.bytes.delete(keys);
    } catch (err) {
      // One by one, to tell which fail.
      for (const key of keys) {
        await storage.bytes.delete([key]).catch((e: unknown) => (failures[key] = (e as Error)?.message ?? String(e)));
      }
      helpers.logger.warn(`storage_collect: deleting a batch failed (${(err as Error)?.message}); ${Object.keys(failures).length} of ${keys.length} keys kept for later`);
    }
    await helpers.query('select private.storage_garbage_done($1::text[], $2::jsonb)', [keys, JSON.stringify(failures)]);
    failed += Object.keys(failures).length;
    deleted += keys.length - Object.keys(failures).length;
    if (rows.length < BATCH || Object.keys(failures).length === keys.length) break;
  }
  const swept = await storage.sweep();
  return { expired: expiredRows[0]?.n ?? 0, deleted, failed, swept };
}

/** storage_purge: {folder_owner: 'user' | 'community' | 'event', id}. */
export const storagePurgeTask: Task = async (payload, helpers) => {
  const { folder_owner: owner, id } = (payload ?? {}) as { folder_owner?: unknown; id?: unknown };
  if (typeof owner !== 'string' || typeof id !== 'string') return;
  for (;;) {
    const { rows } = await helpers.query<{ n: number }>('select private.storage_purge($1, $2::uuid, 500) as n', [owner, id]);
    if ((rows[0]?.n ?? 0) === 0) break;
  }
};
