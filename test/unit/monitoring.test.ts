// What operators are given for monitoring holds together: the Prometheus
// alert rules pass `promtool check rules` and their unit tests
// (docs/monitoring/prometheus-alerts.test.yml: every alert fires during its
// fault and resolves after it) pass `promtool test rules` (Debian's
// prometheus package, as .ci/run does; skipped with a message without it),
// and every metric the rules, the Grafana dashboard and
// docs/operations/monitoring.md name is one the admin server serves (and
// every metric served is documented).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import client from 'prom-client';
import { describe, expect, it } from 'vitest';
import { readinessMetric, registry } from '../../gateway/core/process/metrics.ts';
import { projectRoot } from '../support/processes.ts';

const RULES = path.join(projectRoot, 'docs', 'monitoring', 'prometheus-alerts.yml');
const RULE_TESTS = path.join(projectRoot, 'docs', 'monitoring', 'prometheus-alerts.test.yml');
const promtool = spawnSync('promtool', ['--version']).error ? undefined : 'promtool';
if (!promtool) console.log('skipped: the promtool checks of docs/monitoring need Debian\'s prometheus package (apt-get install prometheus)');
const DASHBOARD = path.join(projectRoot, 'docs', 'monitoring', 'grafana-dashboard.json');
const MONITORING = path.join(projectRoot, 'docs', 'operations', 'monitoring.md');

/** The names a scrape holds: ours and the process metrics (a histogram's _bucket, _sum and _count), and our label names. */
async function servedNames(): Promise<{ ours: string[]; all: Set<string> }> {
  const processMetrics = new client.Registry();
  client.collectDefaultMetrics({ register: processMetrics });
  const all = new Set<string>();
  // The readiness gauge is the admin server's, added to each scrape (not in the registry).
  const readiness = readinessMetric({}).name;
  const ours = [...(await registry.getMetricsAsJSON()).map((m) => m.name).filter((name) => !/^(process|nodejs)_/.test(name)), readiness];
  all.add(readiness);
  for (const m of registry.getMetricsAsArray()) for (const label of (m as unknown as { labelNames: string[] }).labelNames) all.add(label);
  for (const m of [...(await registry.getMetricsAsJSON()), ...(await processMetrics.getMetricsAsJSON())]) {
    all.add(m.name);
    if (String(m.type) === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) all.add(m.name + suffix);
  }
  return { ours, all };
}

/** Metric names in a text (PromQL expressions, a Markdown table). */
function namesIn(text: string): Set<string> {
  return new Set(text.match(/\b(?:http_server|db_client|db_replica|realtime|readiness|jobs|webhook|emails|password_hashing|storage_volume|process|nodejs)_[a-z0-9_]*[a-z0-9]/g) ?? []);
}

describe('monitoring files', () => {
  it.skipIf(!promtool)('the alert rules pass promtool check rules', () => {
    const run = spawnSync('promtool', ['check', 'rules', RULES], { encoding: 'utf8' });
    expect(run.status, run.stdout + run.stderr).toBe(0);
    expect(run.stdout).toMatch(/SUCCESS: \d+ rules found/);
  });

  it.skipIf(!promtool)('every alert fires during its fault and resolves after it: promtool test rules', () => {
    const run = spawnSync('promtool', ['test', 'rules', RULE_TESTS], { encoding: 'utf8' });
    expect(run.status, run.stdout + run.stderr).toBe(0);
    expect(run.stdout).toMatch(/SUCCESS/);
    // Every alert the rules name is tested (and fires in some test).
    const alerts = [...fs.readFileSync(RULES, 'utf8').matchAll(/^\s+- alert: (\S+)$/gm)].map((m) => m[1]!);
    const tests = fs.readFileSync(RULE_TESTS, 'utf8');
    const fired = new Set([...tests.matchAll(/alertname: (\S+)\n\s+exp_alerts:\n\s+- exp_labels/g)].map((m) => m[1]!));
    const required = ['CommunityBackendDown', 'CommunityBackendNotReady', 'CommunityBackendDatabaseUnavailable', 'CommunityBackendHighErrorRate', 'CommunityBackendStorageVolumeFilling', 'CommunityBackendStorageVolumeFull', 'CommunityBackendJobQueueGrowing', 'CommunityBackendReplicaLagging'];
    for (const alert of required) {
      expect(alerts).toContain(alert);
      expect(fired.has(alert), `${alert} fires in a test of ${path.basename(RULE_TESTS)}`).toBe(true);
    }
  });

  it('the rules and the dashboard use only metrics the admin server serves', async () => {
    const { all } = await servedNames();
    const dashboard = JSON.parse(fs.readFileSync(DASHBOARD, 'utf8')) as { panels: { targets: { expr: string }[] }[] };
    const exprs = dashboard.panels.flatMap((p) => p.targets.map((t) => t.expr)).join('\n');
    for (const [file, text] of [['alerts.yml', fs.readFileSync(RULES, 'utf8')], ['dashboard', exprs]] as const) {
      const unknown = [...namesIn(text)].filter((name) => !all.has(name));
      expect(unknown, file).toEqual([]);
    }
    // The dashboard shows the request histogram and each family.
    for (const name of ['http_server_request_duration_seconds_bucket', 'db_client_operation_duration_seconds_bucket', 'db_client_connection_count', 'realtime_open_connections', 'jobs_queued', 'webhook_delivery_duration_seconds_count']) {
      expect(exprs).toContain(name);
    }
  });

  it('docs/operations/monitoring.md names every metric of ours, and only served ones', async () => {
    const { ours, all } = await servedNames();
    const section = fs.readFileSync(MONITORING, 'utf8');
    expect(section.length).toBeGreaterThan(100);
    for (const name of ours) expect(section, name).toContain(`\`${name}\``);
    expect([...namesIn(section)].filter((name) => !all.has(name))).toEqual([]);
  });
});
