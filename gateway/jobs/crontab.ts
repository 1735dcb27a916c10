// The periodic jobs, run by graphile-worker's crontab: every worker knows
// them, and each tick becomes ONE job however many workers run (the tick is
// claimed in graphile_worker's known_crontabs). Each is one SQL function,
// safe to run anywhere and more than once.
//
// What they replaced: the realtime hub's five-minute timer in every gateway
// process (change log), the MCP process's one-minute timer (MCP sessions and
// counts, OAuth state, stored test results and tool-call records), and the
// 1-in-100 chance of a delete on every failed sign-in (throttling counts),
// and the hub's timer for Idempotency-Key records and event tombstones.
import type { JobHelpers } from 'graphile-worker';
import type { StorageService } from '../storage/service.ts';
import { collectStorage } from '../storage/jobs.ts';

export interface PeriodicJob {
  /** The task identifier. */
  task: string;
  /** Cron schedule (UTC). */
  schedule: string;
  /** Runs only on workers that have the byte store (PeriodicSettings.storage). */
  needsStorage?: boolean;
  run(helpers: JobHelpers, settings: PeriodicSettings): Promise<unknown>;
}

export interface PeriodicSettings {
  /** CHANGE_LOG_RETENTION_HOURS, in seconds. */
  changeLogRetentionSeconds: number;
  /** GUEST_RETENTION_DAYS, in seconds: unconverted guests older than this are deleted (absent: 30 days). */
  guestRetentionSeconds?: number;
  /** The byte store and staging area the storage jobs clean up (gateway/storage/jobs.ts); absent: no storage job runs here. */
  storage?: StorageService;
}

const sql = (text: string) => (helpers: JobHelpers) => helpers.query(text);

export const PERIODIC_JOBS: PeriodicJob[] = [
  {
    task: 'prune_change_log',
    schedule: '*/5 * * * *',
    run: (helpers, settings) =>
      helpers.query('select admin.prune_change_log(make_interval(secs => $1::float8))', [settings.changeLogRetentionSeconds]),
  },
  // Refresh-token families of ended sessions (and OAuth codes and tokens).
  { task: 'prune_sessions', schedule: '17 * * * *', run: sql('select private.sessions_prune(), private.oauth_prune()') },
  // Guests never converted to a full account, past GUEST_RETENTION_DAYS (deleted as an account deletion does).
  {
    task: 'prune_guests',
    schedule: '29 * * * *',
    run: (helpers, settings) =>
      helpers.query('select private.guests_prune(make_interval(secs => $1::float8))', [settings.guestRetentionSeconds ?? 30 * 86_400]),
  },
  // Failed sign-in counts past any throttling window.
  { task: 'prune_auth_failures', schedule: '*/10 * * * *', run: sql('select private.auth_failures_prune()') },
  // MCP sessions, per-IP request counts and agent quota rows.
  { task: 'prune_mcp', schedule: '* * * * *', run: sql('select private.mcp_prune()') },
  // Live test results and MCP tool-call records past 30 days, a batch a minute.
  { task: 'prune_stored_records', schedule: '* * * * *', run: sql('select private.stored_records_prune()') },
  // Webhook deliveries overdue by a minute get a job (a safety net; see private.webhook_sweep).
  { task: 'webhook_sweep', schedule: '* * * * *', run: sql('select private.webhook_sweep()') },
  { task: 'prune_webhook_deliveries', schedule: '23 3 * * *', run: sql('select private.webhook_deliveries_prune()') },
  // Idempotency-Key records past 24 hours, and tombstones of deleted events no calendar lists any more.
  { task: 'prune_idempotency_keys', schedule: '*/5 * * * *', run: sql('select private.idempotency_keys_prune()') },
  { task: 'prune_event_tombstones', schedule: '41 * * * *', run: sql('select private.event_tombstones_prune()') },
  // Expired uploads, deleted and replaced objects' bytes, leftovers of killed processes (gateway/storage/jobs.ts).
  { task: 'storage_collect', schedule: '* * * * *', needsStorage: true, run: (helpers, settings) => collectStorage(helpers, settings.storage!) },
  // Jobs held by workers that died (see private.jobs_recover).
  { task: 'recover_jobs', schedule: '* * * * *', run: sql('select private.jobs_recover()') },
];

/**
 * The crontab text: one line per periodic job. `jobKey` keeps at most one
 * pending job of each (ticks do not pile up while no worker runs); no
 * backfill of ticks missed while no worker ran. Priority 10: a due e-mail
 * (priority 0) on the same runner goes first.
 */
export function crontab(jobs: readonly PeriodicJob[] = PERIODIC_JOBS): string {
  return jobs.map((job) => `${job.schedule} ${job.task} ?max=3&jobKey=cron_${job.task}&priority=10`).join('\n');
}
