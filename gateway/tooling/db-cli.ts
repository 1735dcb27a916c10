// `npm run db -- <graphile-migrate command>`: graphile-migrate against the
// embedded development cluster (or DATABASE_URL), with the shadow and root
// databases it needs for `commit`, `watch` and `reset` filled in.
//   npm run db -- watch            apply sql/migrations/current/*.sql on every save
//   npm run db -- commit -m name   turn current/ into a committed migration
//   npm run db -- status
//   npm run db -- dump [FILE]      write the whole schema to sql/schema.sql
//                                  (git-ignored build output; schema-dump.ts)
//   npm run db -- areas --check | --diff
//                                  the area files, sql/areas, and the
//                                  migrations (areas.ts); both dump and areas
//                                  run on a throwaway PostgreSQL 15 cluster
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { loadConfigOrExit } from '../core/process/config.ts';
import { openDatabase } from '../core/process/open-database.ts';
import { ensureDatabase } from '../core/process/embedded-postgres.ts';
import { destination } from 'pino';
import { createLogger } from '../core/process/log.ts';
import { runDumpCommand } from './schema-dump.ts';
import { runAreasCommand } from './areas.ts';
// Logs go to stderr: stdout carries only the command's output.
import { startupMessage } from '../core/process/startup-error.ts';
import { primaryUrl } from '../core/database/hosts.ts';

const config = loadConfigOrExit();
const log = createLogger(process.env.LOG_LEVEL ?? 'warn', 'db', destination(2));
if (process.argv[2] === 'dump') {
  process.exit(await runDumpCommand(log, process.argv.slice(3)));
}
if (process.argv[2] === 'areas') {
  const code = await runAreasCommand(log, process.argv.slice(3)).catch((err: unknown) => {
    console.error(`error: ${(err as Error).message}`);
    return 1;
  });
  process.exit(code);
}
const database = await openDatabase(config, log, { reuseRunning: true }).catch((err: unknown) => {
  console.error(`error: ${startupMessage(err)}`);
  process.exit(1);
});
// graphile-migrate's CLI (pg) takes one host: the primary of a multi-host DATABASE_URL.
const single = await primaryUrl(database.url);
const url = new URL(single);
const withDb = (name: string) => Object.assign(new URL(url), { pathname: `/${name}` }).toString();
const shadow = process.env.SHADOW_DATABASE_URL ?? withDb(`${url.pathname.slice(1)}_shadow`);
const root = process.env.ROOT_DATABASE_URL ?? withDb('postgres');
if (database.embedded) await ensureDatabase(root, new URL(shadow).pathname.slice(1));

const cli = createRequire(import.meta.url).resolve('graphile-migrate/dist/cli.js');
const result = spawnSync(process.execPath, [cli, ...process.argv.slice(2)], {
  stdio: 'inherit',
  env: { ...process.env, DATABASE_URL: single, SHADOW_DATABASE_URL: shadow, ROOT_DATABASE_URL: root },
});
await database.stop();
process.exitCode = result.status ?? 1;
