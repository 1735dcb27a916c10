// `npm run admin -- <command> [--option value ...]`: the operator functions of
// schema `admin` (docs/dba.md#operator-functions) from the command line. Uses
// DATABASE_URL, or the embedded database (started and migrated for the
// command if no `npm start` is running), and says which on stderr. A command
// that reads data refuses an embedded database that `npm start` never made
// or migrated: it would only find it empty (an operator who forgot
// DATABASE_URL would read "no user with email" about their real users).
import path from 'node:path';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { loadConfigOrExit, type Config } from '../core/process/config.ts';
import { openDatabase, type Database } from '../core/process/open-database.ts';
import { createPool, type Sql } from '../core/database/pool.ts';
import { destination } from 'pino';
import { createLogger, type Logger } from '../core/process/log.ts';
// Logs go to stderr: stdout carries only the command's output.
import { runMigrations } from '../core/database/migrate.ts';
import { runPsql } from './psql.ts';
import { Email, Password, Uuid } from '../core/web/schemas.ts';
import { startupMessage } from '../core/process/startup-error.ts';
import { createTokenService } from '../core/auth/jwt.ts';
import { newSigningKey, SIGNING_ALGORITHMS, type SigningAlgorithm } from '../core/auth/signing-keys.ts';
import { backup, restore } from './backup.ts';

interface Command {
  usage: string;
  description: string;
  options: Record<string, z.ZodType>;
  /** The option a single positional argument fills (`delete-user EMAIL` for `--email EMAIL`). */
  positional?: string;
  /** False for a command that only creates (it may run on a new embedded database); others read data and refuse an empty one. */
  reads?: false;
  /** Options that take no value (`--now`): true when given. */
  flags?: string[];
  /** False: an embedded database is not migrated for it (restore wants an empty one). */
  migrates?: false;
  run(sql: Sql, o: Record<string, unknown>, service: { config: Config; database: Database }): Promise<unknown>;
}

const optionalText = z.string().min(1).optional();
const flag = z.enum(['true', 'false']).transform((v) => v === 'true');
const float = z.coerce.number().finite();
const tagList = z
  .string()
  .optional()
  .transform((v) => (v ? v.split(',').map((t) => t.trim()).filter(Boolean) : []));

/** What `jobs` prints first: how to read the rest (the states of admin.jobs). */
const JOB_STATES = [
  '# states: running = a connected worker is running it now;',
  '#   orphaned = locked by a worker that is gone (killed, lost): the next worker to start, or recover_jobs within a minute, frees it to run again;',
  '#   due = waiting for a free worker (none running, or all busy: start one, see # workers);',
  '#   failed = out of attempts (attempts = max_attempts): it will not run again; last_error says why (a job cut off by its worker on its last attempt says so);',
  '#   scheduled = a retry after a failure, or a job for later (run_at).',
  '# Webhook deliveries have their own attempts and errors: npm run admin -- webhooks.',
];

/** A JSON object given as an option's text (user_metadata). */
const jsonObject = z
  .string()
  .transform((text, ctx) => {
    try {
      const value: unknown = JSON.parse(text);
      if (value !== null && typeof value === 'object' && !Array.isArray(value)) return value as Record<string, unknown>;
    } catch {
      // reported below
    }
    ctx.addIssue({ code: 'custom', message: 'must be a JSON object' });
    return z.NEVER;
  })
  .optional();

const commands: Record<string, Command> = {
  'create-user': {
    reads: false,
    usage: '--email E --password P [--name N]',
    description: 'Create a user with profile and node (as register does). Prints the user id.',
    options: { email: Email, password: Password, name: optionalText },
    run: async (sql, o) =>
      (await sql`select admin.create_user(${o.email as string}, ${o.password as string}, ${(o.name as string | undefined) ?? null}) as id`)[0]?.id,
  },
  'delete-user': {
    usage: 'EMAIL (or --email E)',
    description:
      'Delete an account and everything of the person, as its owner deleting it does: every session, token, stream and websocket ends at once. Refused while it is the only manager of a community. Prints what was deleted.',
    options: { email: Email },
    positional: 'email',
    run: async (sql, o) => (await sql`select admin.delete_user(${o.email as string}) as deleted`)[0]?.deleted,
  },
  'users-list': {
    usage: '[--page N] [--per-page N]',
    description:
      "A page of the accounts as Supabase Auth's User objects, oldest first, and how many there are (what GET /auth/v1/admin/users answers the service-role key). Prints JSON.",
    options: { page: z.coerce.number().int().min(1).optional(), 'per-page': z.coerce.number().int().min(1).max(1000).optional() },
    run: async (sql, o) =>
      (await sql`select admin.users_list(${(o.page as number | undefined) ?? 1}, ${(o['per-page'] as number | undefined) ?? 50}) as page`)[0]?.page,
  },
  'user-get': {
    usage: 'ID (or --id ID)',
    description: "An account as Supabase Auth's User object, by its id (GET /auth/v1/admin/users/{id}). Prints JSON.",
    options: { id: Uuid },
    positional: 'id',
    run: async (sql, o) => (await sql`select admin.user_get(${o.id as string}) as user`)[0]?.user,
  },
  'user-create': {
    reads: false,
    usage: '--email E [--metadata JSON]',
    description:
      "Create an account without a password (it signs in after a set-password link), with user_metadata, as POST /auth/v1/admin/users does for the service-role key. Prints the User object as JSON.",
    options: { email: Email, metadata: jsonObject },
    run: async (sql, o) =>
      (await sql`select admin.user_create(${o.email as string}, null, ${o.metadata === undefined ? null : sql.json(o.metadata as never)}::jsonb) as user`)[0]?.user,
  },
  'user-update': {
    usage: 'ID (or --id ID) [--email E] [--metadata JSON]',
    description:
      "Change an account's e-mail address (at once, no link) and merge its user_metadata, as PUT /auth/v1/admin/users/{id} does. Prints the User object as JSON.",
    options: { id: Uuid, email: Email.optional(), metadata: jsonObject },
    positional: 'id',
    run: async (sql, o) =>
      (
        await sql`select admin.user_update(${o.id as string}, ${(o.email as string | undefined) ?? null}, null,
                                           ${o.metadata === undefined ? null : sql.json(o.metadata as never)}::jsonb) as user`
      )[0]?.user,
  },
  'user-delete': {
    usage: 'ID (or --id ID)',
    description: 'Delete an account by its id, as delete-user does by its e-mail (DELETE /auth/v1/admin/users/{id}). Prints what was deleted.',
    options: { id: Uuid },
    positional: 'id',
    run: async (sql, o) => (await sql`select admin.user_delete(${o.id as string}) as deleted`)[0]?.deleted,
  },
  'signing-keys': {
    usage: '<list|add|rotate|revoke> [--alg ES256|RS256] [--kid KID]',
    description:
      'The keys that sign access tokens (docs/operations/running.md#signing-keys). list: every key and its status. add: a new key (--alg, ES256 by default), standby: published in /auth/v1/.well-known/jwks.json and verifying, not signing yet. rotate: the standby key signs from now on; the one it replaces verifies until its tokens expire. revoke --kid KID: that key verifies nothing any more, at once on every process (not the current key: rotate first). Prints JSON.',
    options: {
      action: z.enum(['list', 'add', 'rotate', 'revoke']),
      alg: z.enum(SIGNING_ALGORITHMS).default('ES256'),
      kid: z.string().min(1).max(64).optional(),
    },
    positional: 'action',
    run: async (sql, o) => {
      if (o.action === 'add') {
        const key = await newSigningKey(o.alg as SigningAlgorithm);
        await sql`select admin.signing_key_add(${key.kid}, ${key.alg}, ${sql.json(key.publicJwk as never)}, ${sql.json(key.privateJwk as never)})`;
      } else if (o.action === 'rotate') {
        await sql`select admin.signing_key_rotate()`;
      } else if (o.action === 'revoke') {
        if (o.kid === undefined) throw new Error('revoke needs --kid KID (npm run admin -- signing-keys list)');
        await sql`select admin.signing_key_revoke(${o.kid as string})`;
      }
      return sql`select * from admin.signing_keys_list()`;
    },
  },
  'create-community': {
    reads: false,
    usage: '--name N [--description D] [--tags a,b] [--manager-email E]',
    description: 'Create a community; the user with --manager-email becomes its manager. Prints the community id.',
    options: { name: z.string().min(1), description: optionalText, tags: tagList, 'manager-email': Email.optional() },
    run: async (sql, o) =>
      (
        await sql`select admin.create_community(${o.name as string}, ${(o.description as string | undefined) ?? null},
                    ${o.tags as string[]}, ${(o['manager-email'] as string | undefined) ?? null}) as id`
      )[0]?.id,
  },
  'add-manager': {
    usage: '--community-id ID --email E',
    description: 'Make a user a manager of a community (joining them if needed).',
    options: { 'community-id': Uuid, email: Email },
    run: async (sql, o) => {
      await sql`select admin.add_manager(${o['community-id'] as string}, ${o.email as string})`;
      return 'ok';
    },
  },
  'set-subscription': {
    usage: '--email E --type basic|premium',
    description: "Set a user's subscription type (and so their max_hats).",
    options: { email: Email, type: z.string().min(1) },
    run: async (sql, o) => {
      await sql`select admin.set_subscription(${o.email as string}, ${o.type as string})`;
      return 'ok';
    },
  },
  'set-community-flags': {
    usage: '--community-id ID [--sandbox true|false] [--draft true|false]',
    description: 'Set the sandbox and draft flags of a community (an omitted flag is left as it is).',
    options: { 'community-id': Uuid, sandbox: flag.optional(), draft: flag.optional() },
    run: async (sql, o) => {
      await sql`select admin.set_community_flags(${o['community-id'] as string},
                  ${(o.sandbox as boolean | undefined) ?? null}, ${(o.draft as boolean | undefined) ?? null})`;
      return 'ok';
    },
  },
  'set-community-timezone': {
    usage: '--community-id ID --timezone ZONE',
    description: "Set a community's IANA time zone (e.g. Europe/Paris; 'none' removes it): its events made from now on take it. Prints it.",
    options: { 'community-id': Uuid, timezone: z.string().min(1) },
    run: async (sql, o) =>
      (
        await sql`select coalesce(admin.set_community_timezone(${o['community-id'] as string},
                    ${o.timezone === 'none' ? null : (o.timezone as string)}), 'none') as zone`
      )[0]?.zone,
  },
  'set-venue-timezone': {
    usage: '--venue-node-id ID --timezone ZONE',
    description: "Set a venue's IANA time zone (e.g. Europe/Paris; 'none' removes it): events made there from now on take it. Prints it.",
    options: { 'venue-node-id': Uuid, timezone: z.string().min(1) },
    run: async (sql, o) =>
      (
        await sql`select coalesce(admin.set_venue_timezone(${o['venue-node-id'] as string},
                    ${o.timezone === 'none' ? null : (o.timezone as string)}), 'none') as zone`
      )[0]?.zone,
  },
  'create-venue': {
    reads: false,
    usage: '--name N [--address A] [--latitude LAT] [--longitude LNG]',
    description: 'Create a venue. Prints its node id.',
    options: { name: z.string().min(1), address: optionalText, latitude: float.optional(), longitude: float.optional() },
    run: async (sql, o) =>
      (
        await sql`select admin.create_venue(${o.name as string}, ${(o.address as string | undefined) ?? null},
                    ${(o.latitude as number | undefined) ?? null}, ${(o.longitude as number | undefined) ?? null}) as id`
      )[0]?.id,
  },
  'create-event': {
    usage: '--community-id ID --title T --starts-at ISO [--ends-at ISO] [--venue-node-id ID] [--description D]',
    description: 'Create an event of a community. Prints the event id.',
    options: {
      'community-id': Uuid,
      title: z.string().min(1),
      'starts-at': z.iso.datetime({ offset: true }),
      'ends-at': z.iso.datetime({ offset: true }).optional(),
      'venue-node-id': Uuid.optional(),
      description: optionalText,
    },
    run: async (sql, o) =>
      (
        await sql`select admin.create_event(${o['community-id'] as string}, ${o.title as string},
                    ${o['starts-at'] as string}, ${(o['ends-at'] as string | undefined) ?? null},
                    ${(o['venue-node-id'] as string | undefined) ?? null}, ${(o.description as string | undefined) ?? null}) as id`
      )[0]?.id,
  },
  outbox: {
    usage: '[--limit N] [--unsent true]',
    description:
      'The newest e-mails of the outbox (set-password and recovery links included while unsent), one JSON object a line.',
    options: { limit: z.coerce.number().int().min(1).max(1000).optional(), unsent: flag.optional() },
    run: async (sql, o) => {
      const rows = await sql`select * from admin.outbox(${(o.limit as number | undefined) ?? 50}, ${(o.unsent as boolean | undefined) ?? false})`;
      return rows.length === 0 ? 'the outbox is empty' : rows.map((row) => JSON.stringify(row)).join('\n');
    },
  },
  webhooks: {
    usage: '[--failures N]',
    description:
      'Webhook endpoints (community, URL, events, active, deliveries and failures of the last 24 hours, pending now), then the most recent failed or retrying deliveries (default 20) with their errors. One JSON object a line.',
    options: { failures: z.coerce.number().int().min(0).max(1000).optional() },
    run: async (sql, o) => {
      const endpoints = await sql`select * from admin.webhooks()`;
      const failures = await sql`select * from admin.webhook_failures(${(o.failures as number | undefined) ?? 20})`;
      return [
        `# endpoints (${endpoints.length})`,
        ...endpoints.map((row) => JSON.stringify(row)),
        `# recent failures (${failures.length})`,
        ...failures.map((row) => JSON.stringify(row)),
      ].join('\n');
    },
  },
  'storage-bucket-create': {
    reads: false,
    usage:
      '--id NAME --public true|false --folder-owner user|community|event --max-bytes N [--types image/*,application/pdf] [--images true|false] [--attachment true|false]',
    description:
      'Create (or change) a storage bucket: public read or not, who writes each first folder (the user whose id it is, the managers of the community or of the event), the size limit, the types it takes (default any; image buckets: image/*), whether it holds images (sniffed, metadata stripped, transformations) and whether downloads are attachments (docs/storage.md).',
    options: {
      id: z.string().regex(/^[a-z0-9][a-z0-9_-]{0,62}$/, { message: 'lowercase letters, digits, - and _' }),
      public: flag,
      'folder-owner': z.enum(['user', 'community', 'event']),
      'max-bytes': z.coerce.number().int().min(1),
      types: tagList,
      images: flag.optional(),
      attachment: flag.optional(),
    },
    run: async (sql, o) => {
      const types = o.types as string[];
      await sql`select admin.storage_bucket_create(${o.id as string}, ${o.public as boolean}, ${o['folder-owner'] as string},
                  ${o['max-bytes'] as number}, ${types.length > 0 ? types : null}::text[],
                  ${(o.images as boolean | undefined) ?? false}, ${(o.attachment as boolean | undefined) ?? false})`;
      return 'ok';
    },
  },
  'storage-set-limits': {
    usage: '--email E [--quota-bytes N] [--uploads-per-minute N]',
    description: "Set a user's own storage quota (bytes) and uploads per minute; an omitted one goes back to their plan's.",
    options: {
      email: Email,
      'quota-bytes': z.coerce.number().int().min(0).optional(),
      'uploads-per-minute': z.coerce.number().int().min(0).optional(),
    },
    run: async (sql, o) => {
      await sql`select admin.storage_set_limits(${o.email as string}, ${(o['quota-bytes'] as number | undefined) ?? null},
                  ${(o['uploads-per-minute'] as number | undefined) ?? null})`;
      return 'ok';
    },
  },
  'storage-usage': {
    usage: '[--limit N]',
    description: 'The users storing the most bytes (default 50): bytes, objects, quota and uploads per minute. One JSON object a line.',
    options: { limit: z.coerce.number().int().min(1).max(10_000).optional() },
    run: async (sql, o) =>
      (await sql`select * from admin.storage_usage(${(o.limit as number | undefined) ?? 50})`).map((row) => JSON.stringify(row)).join('\n'),
  },
  'storage-collect': {
    usage: '[--now]',
    description:
      "Has a job worker delete the bytes of deleted and replaced objects now (the storage_collect job, queued at once) and waits for it (at most a minute): a deleted object's bytes otherwise wait 10 minutes (downloads under way) for the job's next minute. --now: also those still in that wait, to reclaim a full storage volume at once. Needs a job worker running (npm start, or npm run worker): it has the byte store. Prints the keys collected and left.",
    options: { now: z.boolean().optional() },
    flags: ['now'],
    run: async (sql, o) => {
      const garbage = async () => Number((await sql<{ n: string }[]>`select count(*) as n from app.storage_garbage`)[0]?.n ?? 0);
      const before = await garbage();
      const due = (await sql<{ due: number }[]>`select admin.storage_collect(${o.now === true}) as due`)[0]?.due ?? 0;
      // The worker forgets each key once its bytes are deleted: wait until the due ones are gone (or a minute).
      let left = before;
      for (const started = Date.now(); Date.now() - started < 60_000; ) {
        left = await garbage();
        if (before - left >= due) break;
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
      const collected = Math.max(0, before - left);
      const waiting = collected < due ? `; ${due - collected} due keys not collected within a minute: is a job worker running (npm run admin -- job-workers)? npm run admin -- jobs shows storage_collect` : '';
      return `${collected} byte-store keys collected, ${left} left (in their 10-minute wait, or failing: app.storage_garbage.last_error)${waiting}`;
    },
  },
  backup: {
    usage: 'DIR',
    description:
      "A consistent backup of everything the service keeps into the new folder DIR: the database (pg_dump of one snapshot: database.dump) and the bytes of every stored file that snapshot lists, from the configured byte store (STORAGE_DIR, or the S3 bucket: files/), and the generated JWT secret when the service signs with it. While it copies, no stored file is collected. Run it as the database owner, with the gateway's configuration, while the service runs; it needs a pg_dump of the server's major version or newer (docs/operations/backup.md#backup-and-restore).",
    options: { dir: z.string().min(1) },
    positional: 'dir',
    run: (_sql, o, { config, database }) => backup(config, database, o.dir as string),
  },
  restore: {
    usage: 'DIR',
    description:
      'Restores a backup (npm run admin -- backup) into an empty database (DATABASE_URL, made by a superuser with the roles of docs/operations/deploying.md#on-any-postgres-15) and the configured byte store (an empty STORAGE_DIR, or the S3 bucket): the files first, then the database in one transaction, as the owner. Then start the gateway on it. Needs a pg_restore of the server\'s major version or newer.',
    options: { dir: z.string().min(1) },
    positional: 'dir',
    reads: false,
    migrates: false,
    run: (_sql, o, { config, database }) => restore(config, database, o.dir as string),
  },
  'webhook-failures': {
    usage: '[--limit N]',
    description: 'The most recent failed or retrying webhook deliveries (default 20), newest first, one JSON object a line.',
    options: { limit: z.coerce.number().int().min(1).max(10_000).optional() },
    run: async (sql, o) =>
      (await sql`select * from admin.webhook_failures(${(o.limit as number | undefined) ?? 20})`).map((row) => JSON.stringify(row)).join('\n'),
  },
  'job-workers': {
    usage: '',
    description: "The job workers' runners connected now (graphile-worker pool ids; two a worker: deliveries, mail and upkeep), one JSON object a line.",
    options: {},
    run: async (sql) => (await sql`select * from admin.job_workers()`).map((row) => JSON.stringify(row)).join('\n'),
  },
  jobs: {
    usage: '[--limit N]',
    description:
      "The job worker's queue: what each state means, a count per state and task, the workers' runners connected (two a worker), then the jobs (default 50: running first, then orphaned, due, failed, scheduled) with attempts and last errors. One JSON object a line after each # heading.",
    options: { limit: z.coerce.number().int().min(1).max(10_000).optional() },
    run: async (sql, o) => {
      const jobs = await sql`select * from admin.jobs(${(o.limit as number | undefined) ?? 50})`;
      const counts = await sql`
        select state, task, count(*)::int as jobs from admin.jobs(1000000) group by state, task order by state, task`;
      const workers = await sql`select * from admin.job_workers()`;
      return [
        ...JOB_STATES,
        `# jobs by state and task`,
        ...counts.map((row) => JSON.stringify(row)),
        `# workers (${workers.length})`,
        ...workers.map((row) => JSON.stringify(row)),
        `# jobs (${jobs.length} shown)`,
        ...jobs.map((row) => JSON.stringify(row)),
      ].join('\n');
    },
  },
  'publish-events-to-supabase-realtime': {
    reads: false,
    usage: '',
    description:
      'Add app.events to the supabase_realtime publication where it exists (Supabase). Prints true if it is (now) published, false where there is no such publication.',
    options: {},
    run: async (sql) => String((await sql`select admin.publish_events_to_supabase_realtime() as published`)[0]?.published),
  },
  'prune-change-log': {
    usage: "[--older-than '30 days']",
    description: 'Delete event change-log entries older than the interval (default 30 days). Prints how many.',
    options: { 'older-than': z.string().regex(/^\d+\s*(second|minute|hour|day|week)s?$/, { message: "like '30 days' or '12 hours'" }).optional() },
    run: async (sql, o) =>
      String(
        (await sql`select admin.prune_change_log(${(o['older-than'] as string | undefined) ?? '30 days'}::interval) as n`)[0]?.n,
      ),
  },
  'forms-list': {
    usage: '[--limit N] [--since ISO]',
    description: 'Forms posted to POST /api/v1/forms, newest first, one JSON object per line (default: the last 50).',
    options: {
      limit: z.coerce.number().int().min(1).max(10_000).optional(),
      since: z.iso.datetime({ offset: true }).optional(),
    },
    run: async (sql, o) => {
      const rows = await sql`
        select id::text as id, received_at, size_bytes, payload
          from admin.forms_list(${(o.limit as number | undefined) ?? 50}, ${(o.since as string | undefined) ?? null})`;
      return rows.map((row) => JSON.stringify(row)).join('\n');
    },
  },
  'mcp-tool-calls': {
    usage: '[--email E] [--limit N]',
    description: 'The latest MCP tool calls (of one user with --email), newest first: time, user, tool, outcome, duration, arguments. One JSON line each.',
    options: { email: Email.optional(), limit: z.coerce.number().int().min(1).max(10_000).optional() },
    run: async (sql, o) =>
      (await sql`select * from admin.mcp_tool_calls(${(o.email as string | undefined) ?? null}, ${(o.limit as number | undefined) ?? 100})`)
        .map((row) => JSON.stringify(row))
        .join('\n'),
  },
};

function help(): string {
  const lines = [
    'Usage: npm run admin -- <command> [options]',
    '',
    'Operator commands (each calls the admin.* SQL function of the same name).',
    'Database: DATABASE_URL, or the embedded development database.',
    '',
  ];
  for (const [name, c] of Object.entries(commands)) {
    lines.push(`  ${name} ${c.usage}`, `      ${c.description}`);
  }
  lines.push(`  sql ${SQL_COMMAND.usage}`, `      ${SQL_COMMAND.description}`);
  lines.push('  keys', `      ${KEYS_COMMAND.description}`);
  return lines.join('\n');
}

async function main(): Promise<number> {
  const [name, ...rest] = process.argv.slice(2);
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    console.log(help());
    return name ? 0 : 1;
  }
  if (name === 'sql') return sqlShell(rest);
  if (name === 'keys') return printKeys(rest);
  const command = commands[name];
  if (!command) {
    console.error(`unknown command "${name}"\n\n${help()}`);
    return 1;
  }
  if (rest.includes('--help') || rest.includes('-h')) {
    console.log(`Usage: npm run admin -- ${name} ${command.usage}\n\n${command.description}`);
    return 0;
  }
  let values: Record<string, unknown>;
  try {
    const parsed = parseArgs({
      args: rest,
      options: Object.fromEntries(
        Object.keys(command.options).map((k) => [k, { type: command.flags?.includes(k) ? ('boolean' as const) : ('string' as const) }]),
      ) as Record<string, { type: 'string' | 'boolean' }>,
      strict: true,
      allowPositionals: command.positional !== undefined,
    });
    if (parsed.positionals.length > 1 || (parsed.positionals.length === 1 && parsed.values[command.positional!] !== undefined)) {
      throw new Error(`one ${command.positional} at most`);
    }
    const given = parsed.positionals.length === 1 ? { ...parsed.values, [command.positional!]: parsed.positionals[0] } : parsed.values;
    const result = z.object(command.options).safeParse(given);
    if (!result.success) {
      throw new Error(result.error.issues.map((i) => `--${i.path.join('.')}: ${i.message}`).join('\n'));
    }
    values = result.data;
  } catch (err) {
    console.error(`${(err as Error).message}\n\nUsage: npm run admin -- ${name} ${command.usage}`);
    return 1;
  }

  const config = loadConfigOrExit();
  const log = createLogger(process.env.LOG_LEVEL ?? 'warn', 'admin', destination(2));
  return withDatabase(config, log, { reads: command.reads !== false, migrates: command.migrates !== false }, (sql, database) =>
    command.run(sql, values, { config, database }).then((output) => {
      console.log(typeof output === 'string' ? output : JSON.stringify(output));
    }),
  );
}

/**
 * Opens the service's database for a command (DATABASE_URL, or the embedded
 * one, started and migrated for it if no `npm start` runs), says which on
 * stderr, runs `work`, and returns the exit code. `reads`: refuse an
 * embedded database that does not exist or was never migrated; `migrates`:
 * migrate an embedded one first.
 */
async function withDatabase(
  config: Config,
  log: Logger,
  { reads, migrates = true }: { reads: boolean; migrates?: boolean },
  work: (sql: Sql, database: Database) => Promise<void>,
): Promise<number> {
  let database: Database;
  try {
    database = await openDatabase(config, log, { reuseRunning: true, mustExist: reads });
  } catch (err) {
    console.error(`error: ${startupMessage(err)}`);
    return 1;
  }
  console.error(`database: ${database.description}`);
  const sql = createPool(database.url, { max: 1, applicationName: 'admin-cli' });
  try {
    if (database.embedded) {
      const [row] = await sql<{ migrated: boolean }[]>`select to_regclass('graphile_migrate.migrations') is not null as migrated`;
      if (reads && !row?.migrated) {
        console.error(`error: the embedded development database was never migrated: nothing to read (\`npm start\` never ran on it); set DATABASE_URL to the service's database`);
        return 1;
      }
      // The embedded database may never have been started by `npm start` yet.
      if (migrates) await runMigrations(database.url, log, { includeCurrent: true });
    }
    await work(sql, database);
    return 0;
  } catch (err) {
    console.error(`error: ${(err as Error).message}`);
    return 1;
  } finally {
    await sql.end({ timeout: 5 });
    await database.stop();
  }
}

const KEYS_COMMAND = {
  usage: '',
  description:
    "Print the API keys as Supabase issues them (docs/supabase-sdks.md#api-keys): SUPABASE_ANON_KEY (role anon: give it to apps, it is public) and SUPABASE_SERVICE_ROLE_KEY (role service_role: the operator's, keep it secret), JWTs signed with the service's key (JWT_SIGNING_KEYS, JWT_SECRET or DATA_DIR/jwt-secret; run it with the gateway's) for the gateway's issuer: PUBLIC_URL (or PORT) when set here, else the PUBLIC_URL the gateway on this database started with. A first line (# issuer ...) says which. A key stays valid until that key or the issuer changes.",
};

/** `keys`: the issuer it signs for (a # line), then the anon and service-role keys, one `NAME=value` line each. */
async function printKeys(args: string[]): Promise<number> {
  if (args.length > 0) {
    console.log(`Usage: npm run admin -- keys\n\n${KEYS_COMMAND.description}`);
    return args.includes('--help') || args.includes('-h') ? 0 : 1;
  }
  const config = loadConfigOrExit();
  const log = createLogger(process.env.LOG_LEVEL ?? 'warn', 'admin', destination(2));
  const print = async (recorded: string | undefined) => {
    // The gateway reads PUBLIC_URL, else PORT: the same variables here give the same issuer.
    const given = Boolean(process.env.PUBLIC_URL?.trim() || process.env.PORT?.trim());
    const publicUrl = given || !recorded ? config.publicUrl : recorded;
    const source = given
      ? process.env.PUBLIC_URL?.trim()
        ? 'PUBLIC_URL'
        : 'PORT (PUBLIC_URL is unset)'
      : recorded
        ? 'the PUBLIC_URL the gateway on this database started with'
        : 'no PUBLIC_URL, PORT or gateway start on this database: the default';
    if (given && recorded && recorded !== publicUrl) {
      console.error(`warning: the gateway on this database started with PUBLIC_URL ${recorded}: it refuses keys of the issuer ${publicUrl}/api/auth`);
    }
    const keySource = config.jwtSigningKeys ? 'JWT_SIGNING_KEYS' : config.jwtSecret ? 'JWT_SECRET' : `the generated ${path.join(config.dataDir, 'jwt-secret')} (JWT_SECRET is unset)`;
    const tokens = await createTokenService({ ...config, publicUrl });
    console.log(`# issuer ${publicUrl}/api/auth (${source}); signed with ${keySource}`);
    console.log(`SUPABASE_ANON_KEY=${await tokens.apiKey('anon')}`);
    console.log(`SUPABASE_SERVICE_ROLE_KEY=${await tokens.apiKey('service_role')}`);
  };
  // No database yet (a development checkout before its first `npm start`): the configuration alone.
  if (!config.databaseUrl && !(await import('../core/process/embedded-postgres.ts')).embeddedClusterExists(path.join(config.dataDir, 'postgres'))) {
    await print(undefined);
    return 0;
  }
  return withDatabase(config, log, { reads: true }, async (sql) => {
    // What the gateway records at its start (server.ts): the PUBLIC_URL it issues tokens as.
    const [row] = await sql<{ value: string }[]>`select value from private.service_settings where name = 'public_url'`;
    await print(row?.value);
  });
}

const SQL_COMMAND = {
  usage: '[psql arguments, e.g. -c "\\sf api.task_link"]',
  description:
    'Open a psql shell on the database the service uses (DATABASE_URL, or the embedded one; psql 15 works against the embedded Postgres 18).',
};

/** `sql`: psql on the service's database, started (embedded) for the shell if needed. */
async function sqlShell(args: string[]): Promise<number> {
  if (args.includes('--help') || args.includes('-h')) {
    console.log(`Usage: npm run admin -- sql ${SQL_COMMAND.usage}\n\n${SQL_COMMAND.description}`);
    return 0;
  }
  const log = createLogger(process.env.LOG_LEVEL ?? 'warn', 'admin');
  const database = await openDatabase(loadConfigOrExit(), log, { reuseRunning: true });
  console.error(`database: ${database.description}`);
  try {
    if (database.embedded) await runMigrations(database.url, log, { includeCurrent: true });
    return runPsql(database.url, args);
  } finally {
    await database.stop();
  }
}

process.exitCode = await main();
