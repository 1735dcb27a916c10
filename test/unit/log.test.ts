// The log destination (gateway/core/process/log.ts): lines are buffered and written
// in blocks, everything left is written when the process exits, and a
// process whose stdout has no reader any more still exits (with pino's own
// destination it retried the failed write forever: MCP processes were left
// running after the test suite).
import { spawn } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const root = path.resolve(import.meta.dirname, '..', '..');

/** A process that logs `lines` lines with the gateway's logger and exits at once. */
function logAndExit(lines: number) {
  const script = `
    import { createLogger } from './gateway/core/process/log.ts';
    const log = createLogger('info', 'logtest');
    for (let i = 0; i < ${lines}; i++) log.info({ i }, 'line');
    process.exit(0);`;
  return spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
}

function exit(child: ReturnType<typeof spawn>, ms: number): Promise<number | string> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      resolve('still running');
    }, ms);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve(code ?? 'signal');
    });
  });
}

describe('log destination', () => {
  it('writes every line logged before process.exit, in order', { timeout: 60_000 }, async () => {
    const child = logAndExit(2000);
    let out = '';
    child.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()));
    expect(await exit(child, 30_000)).toBe(0);
    const numbers = out.trim().split('\n').map((line) => (JSON.parse(line) as { i: number }).i);
    expect(numbers).toEqual(Array.from({ length: 2000 }, (_, i) => i));
  });

  it('a process whose stdout reader is gone still exits', { timeout: 60_000 }, async () => {
    const child = logAndExit(10);
    child.stdout!.destroy(); // the reading end closes: writes fail with EPIPE
    expect(await exit(child, 15_000)).toBe(0);
  });
});
