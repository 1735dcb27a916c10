// W3C Trace Context on the way in: a valid `traceparent` is continued (the
// request's log line carries its trace id); one the specification calls
// invalid, version `ff` among them (security review round 5), is treated as
// absent: the request starts a trace of its own.
import crypto from 'node:crypto';
import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { baseUrl, logFile } from '../helpers.ts';
import { eventually } from '../support/wait.ts';

/** The trace id of the request log line of a request, by its x-request-id. */
async function loggedTraceId(requestId: string): Promise<string> {
  return eventually(`the log line of ${requestId}`, async () => {
    const line = fs
      .readFileSync(logFile, 'utf8')
      .split('\n')
      .filter((l) => l.includes(requestId))
      .map((l) => JSON.parse(l) as { reqId?: string; msg?: string; traceId?: string })
      .find((l) => l.reqId === requestId && l.msg === 'request');
    return line?.traceId;
  });
}

async function traced(traceparent: string): Promise<string> {
  const requestId = `trace-${crypto.randomBytes(6).toString('hex')}`;
  const res = await fetch(`${baseUrl}/api/mobile/profile`, { headers: { traceparent, 'x-request-id': requestId } });
  await res.arrayBuffer();
  return loggedTraceId(requestId);
}

describe('an incoming traceparent', () => {
  it('is continued when valid; version ff, upper case and all-zero ids start a new trace', async () => {
    const traceId = () => crypto.randomBytes(16).toString('hex');
    const parent = crypto.randomBytes(8).toString('hex');

    const kept = traceId();
    expect(await traced(`00-${kept}-${parent}-01`)).toBe(kept);

    for (const invalid of [
      (id: string) => `ff-${id}-${parent}-01`,
      (id: string) => `00-${id.toUpperCase()}-${parent}-01`,
      (id: string) => `00-${id}-${'0'.repeat(16)}-01`,
      (id: string) => `00-${id}-${parent}-01-extra`,
    ]) {
      const refused = traceId();
      const logged = await traced(invalid(refused));
      expect(logged).toMatch(/^[0-9a-f]{32}$/);
      expect(logged).not.toBe(refused.toLowerCase());
    }
  });
});
