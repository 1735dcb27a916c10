// The statement timeout an operator who sets nothing gets is the one the
// docs' figures were measured with, and bounds every answer behind a pooler
// (a request waiting in PgBouncer while the server is away is answered at the
// gateway's deadline, STATEMENT_TIMEOUT_MS + 1 s): 5 s, so 6 s of waiting,
// not the 16 s of the 15 s it was. docs/operations/ states the default (running.md),
// the load balancer's timeout beside it, and what the figures were measured
// with (deploying.md).
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULT_STATEMENT_TIMEOUT_MS, loadConfig } from '../../gateway/core/process/config.ts';
import { OUTAGE_STATEMENT_TIMEOUT_MS } from '../support/outage.ts';
import { projectRoot } from '../support/processes.ts';

const running = fs.readFileSync(path.join(projectRoot, 'docs', 'operations', 'running.md'), 'utf8');
const deploying = fs.readFileSync(path.join(projectRoot, 'docs', 'operations', 'deploying.md'), 'utf8');

describe('the statement timeout by default', () => {
  it('is 5 s, and the outage tests and benches run with it', () => {
    expect(loadConfig({}).statementTimeoutMs).toBe(5_000);
    expect(DEFAULT_STATEMENT_TIMEOUT_MS).toBe(5_000);
    expect(OUTAGE_STATEMENT_TIMEOUT_MS).toBe(DEFAULT_STATEMENT_TIMEOUT_MS);
  });

  it('is what docs/operations/ says, with the load balancer\'s timeout beside it', () => {
    expect(running).toContain(`| \`STATEMENT_TIMEOUT_MS\` | \`${DEFAULT_STATEMENT_TIMEOUT_MS}\` |`);
    const from = deploying.indexOf('### Timeouts and the load balancer');
    expect(from).toBeGreaterThan(-1);
    const to = deploying.indexOf('\n## ', from);
    const section = deploying.slice(from, to === -1 ? undefined : to);
    expect(section).toContain(`| \`STATEMENT_TIMEOUT_MS\` | the gateway | \`${DEFAULT_STATEMENT_TIMEOUT_MS}\` (the default) |`);
    expect(section).toMatch(/load balancer in front .* above `STATEMENT_TIMEOUT_MS` \+ 1 s/);
    expect(section).toContain(`such a request waits ${DEFAULT_STATEMENT_TIMEOUT_MS / 1000 + 1} s for its answer`);
    expect(section).toContain(`measured with the default statement timeout, ${DEFAULT_STATEMENT_TIMEOUT_MS / 1000} s`);
  });
});
