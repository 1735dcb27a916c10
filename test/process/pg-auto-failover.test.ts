// docs/operations/failover.md#with-pg_auto_failover's lines, run as written, as the
// `postgres` OS user (when we are root), with a folder and ports of the
// test's own: a monitor and two nodes, each `pg_autoctl run` in a process
// group of its own, the failure detection set on the monitor and the
// keepers, the formation's URL; then the documented switchover command. The
// state pg_autoctl keeps is where the docs say (XDG_CONFIG_HOME and
// XDG_DATA_HOME, here folders of the test's, not the postgres user's home).
// Skipped without Debian's postgresql-15-auto-failover.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import postgres from 'postgres';
import { afterAll, describe, expect, it } from 'vitest';
import { postgresUser } from '../../gateway/core/process/postgres-binaries.ts';
import { pgAutoctlInstalled } from '../support/pg-auto-failover.ts';
import { freePort, projectRoot, waitUntil } from '../support/processes.ts';

if (!pgAutoctlInstalled) console.log('skipped: pg_auto_failover is not installed (apt-get install postgresql-15-auto-failover)');

const failover = fs.readFileSync(path.join(projectRoot, 'docs', 'operations', 'failover.md'), 'utf8');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pgaf-recipe-'));
const data = path.join(dir, 'formation');
const ports = [freePort(), freePort(), freePort()] as const;
const user = postgresUser();
const env = {
  PATH: process.env.PATH ?? '/usr/bin:/bin',
  HOME: dir,
  XDG_CONFIG_HOME: path.join(dir, 'config'),
  XDG_DATA_HOME: path.join(dir, 'share'),
  XDG_RUNTIME_DIR: path.join(dir, 'run'),
  DATA: data,
};

/** A shell script as the postgres user (we may be root), in the test's folder. */
function asPostgres(script: string, timeout = 300_000) {
  return spawnSync('bash', ['-euc', script], { cwd: dir, env, encoding: 'utf8', timeout, ...(user ?? {}) });
}

afterAll(async () => {
  if (!pgAutoctlInstalled) return;
  for (const node of ['node2', 'node1', 'monitor']) asPostgres(`export PATH=/usr/lib/postgresql/15/bin:$PATH; pg_autoctl stop --pgdata ${data}/${node} || true`, 60_000);
  // Whatever is left of the test's processes (a failed run), by their pids.
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const cmdline = (() => {
      try {
        return fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      } catch {
        return '';
      }
    })();
    if (cmdline.includes(data)) process.kill(Number(entry), 'SIGKILL');
  }
  await new Promise((r) => setTimeout(r, 300));
  fs.rmSync(dir, { recursive: true, force: true });
});

describe.skipIf(!pgAutoctlInstalled)('pg_auto_failover as docs/operations/failover.md sets it up', () => {
  it('the lines run as written: a monitor, two nodes, the settings, the URL, the state where the docs say; the switchover command as written', { timeout: 600_000 }, async () => {
    fs.chmodSync(dir, 0o755);
    if (user) fs.chownSync(dir, user.uid, user.gid);
    const marker = failover.indexOf('<!-- recipe: pg-auto-failover');
    expect(marker, 'the recipe in docs/operations/failover.md').toBeGreaterThan(-1);
    const recipe = /```sh\n([\s\S]*?)```/
      .exec(failover.slice(marker))![1]!
      .replaceAll('/var/lib/postgresql/formation', data)
      .replace(/\b5000\b/g, String(ports[0]))
      .replace(/\b5001\b/g, String(ports[1]))
      .replace(/\b5002\b/g, String(ports[2]));

    const made = asPostgres(recipe);
    expect(made.status, `${made.stdout}\n${made.stderr}`).toBe(0);
    expect(made.stdout).toContain(`postgres://127.0.0.1:${ports[1]},127.0.0.1:${ports[2]}/community?target_session_attrs=read-write`);

    const monitor = postgres(`postgres://postgres@127.0.0.1:${ports[0]}/pg_auto_failover`, { max: 1, onnotice: () => {} });
    try {
      const settings = await monitor<{ name: string; setting: string }[]>`select name, setting from pg_settings where name like 'pgautofailover.%'`;
      const setting = (name: string) => settings.find((s) => s.name === `pgautofailover.${name}`)?.setting;
      expect(setting('node_considered_unhealthy_timeout')).toBe('10000');
      expect(setting('primary_demote_timeout')).toBe('15000');
      expect(setting('health_check_max_retries')).toBe('2');

      // Where the docs say pg_autoctl keeps a node's settings and state.
      for (const node of ['node1', 'node2']) {
        const cfg = path.join(dir, 'config', 'pg_autoctl', data, node, 'pg_autoctl.cfg');
        expect(fs.readFileSync(cfg, 'utf8')).toMatch(/network_partition_timeout = 10\b/);
        expect(fs.existsSync(path.join(dir, 'share', 'pg_autoctl', data, node, 'pg_autoctl.state')), node).toBe(true);
      }

      // The switchover, as the docs write it.
      const command = 'pg_autoctl perform switchover --pgdata $DATA/monitor --formation default';
      expect(failover.replace(/\s+/g, ' ')).toContain(`\`${command}\``);
      const switched = asPostgres(`export PATH=/usr/lib/postgresql/15/bin:$PATH; ${command}`);
      expect(switched.status, `${switched.stdout}\n${switched.stderr}`).toBe(0);
      const states = async () =>
        (await monitor<{ s: string }[]>`select string_agg(nodename || ':' || reportedstate, ' ' order by nodeid) as s from pgautofailover.node`)[0]!.s;
      await waitUntil(async () => (await states()) === 'node1:secondary node2:primary', 120_000, 'node2 the primary, node1 its standby');
    } finally {
      await monitor.end({ timeout: 1 });
    }
  });
});
