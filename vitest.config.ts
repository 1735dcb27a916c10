import { configDefaults, defineConfig } from 'vitest/config';

// Two tiers (docs/development.md#tests):
// - fast (`npm test`, before every commit): the pieces, the SQL rules and
//   pgTAP, the REST interface through the real HTTP server, the MCP
//   interface through the real transport, and the typed clients compiled
//   against the served document. Every file has its own database (a copy of
//   a migrated template) and its own gateway, so files run in parallel.
// - system (`npm run test:system`): what starts whole processes or other
//   servers: `npm start` and its faults, outages, failover, replicas,
//   PgBouncer, S3, Prometheus, Chromium, the MCP conformance suite and the
//   client generators run with `npm exec`; and the floods (test/load), which
//   saturate a gateway on purpose.
const system = ['test/process/**/*.test.ts', 'test/browser/**/*.test.ts', 'test/load/**/*.test.ts'];

export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 120_000,
    teardownTimeout: 120_000,
    pool: 'forks',
    reporters: ['default'],
    // Measured on two cores (docs/development.md#tests): the files wait on
    // the database and on their gateway much of the time, so more files than
    // cores run at once. `npm run test:system` runs fewer (see package.json).
    maxWorkers: Number(process.env.TEST_WORKERS ?? 4),
    minWorkers: 1,
    projects: [
      {
        extends: true,
        test: {
          name: 'fast',
          include: ['test/**/*.test.ts'],
          exclude: [...configDefaults.exclude, ...system],
          globalSetup: ['test/global-setup.ts'],
        },
      },
      {
        extends: true,
        test: {
          name: 'system',
          include: system,
          globalSetup: ['test/global-setup.ts'],
        },
      },
    ],
  },
});
