// SQL-level tests of what request records keep (issue 27, finding 7):
// private.json_capped (each stored body at most 16 KB of JSON text, else a
// truncation marker) and private.stored_records_prune (records older than 30
// days go, a batch at a time), which the MCP process runs every minute.
import crypto from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { db } from '../helpers.ts';
import { newUser } from '../support/sql-fixtures.ts';

const capped = async (value: unknown, max?: number) => {
  const [row] = max === undefined
    ? await db()`select private.json_capped(${db().json(value as never)}) as v`
    : await db()`select private.json_capped(${db().json(value as never)}, ${max}) as v`;
  return row!.v;
};

describe('private.json_capped', () => {
  it('keeps a value of at most 16 KB of JSON text as it is, and null as null', async () => {
    const value = { a: 'x'.repeat(16_000), n: [1, 2, 3] };
    expect(await capped(value)).toEqual(value);
    const [row] = await db()`select private.json_capped(null) as v`;
    expect(row!.v).toBeNull();
  });

  it('replaces a larger one by {truncated, bytes, preview} with at most half the cap of its text', async () => {
    const value = { text: crypto.randomBytes(30_000).toString('hex') };
    const result = await capped(value);
    expect(result.truncated).toBe(true);
    expect(result.bytes).toBe(Buffer.byteLength(JSON.stringify(value).replace(/":"/g, '": "')));
    expect(Buffer.byteLength(result.preview)).toBeLessThanOrEqual(8192);
    expect(`{"text": "${value.text}"}`.startsWith(result.preview)).toBe(true);
  });

  it('never cuts a multi-byte character: the preview stays within its bytes', async () => {
    for (const ch of ['é', '€', '😀']) {
      const result = await capped({ t: ch.repeat(10_000) }, 1000);
      expect(result.truncated).toBe(true);
      expect(Buffer.byteLength(result.preview)).toBeLessThanOrEqual(500);
      expect(result.preview.length).toBeGreaterThan(0);
      expect(result.preview).not.toContain('\ufffd');
    }
  });
});

describe('private.stored_records_prune', () => {
  it('deletes live test results and tool-call records older than 30 days, at most a batch of each per call', async () => {
    const { id: userId } = await newUser({ prefix: 'prune' });
    const [endpoint] = await db()`select id from app.api_endpoints limit 1`;
    const [token] = await db()`insert into app.api_tokens (user_id, name, permissions, token_hash)
                               values (${userId}, 'prune', array['*'], extensions.digest(${crypto.randomUUID()}, 'sha256')) returning id`;
    const ages = ['31 days', '31 days', '31 days', '29 days', '1 minute'];
    for (const age of ages) {
      await db()`insert into app.api_test_results (api_endpoint_id, api_token_id, user_id, request_method, request_path,
                                                   response_status, response_time_ms, success, executed_at)
                 values (${endpoint!.id}, ${token!.id}, ${userId}, 'GET', '/x', 200, 1, true, now() - ${age}::interval)`;
      await db()`insert into app.mcp_tool_calls (user_id, credential_kind, tool, outcome, duration_ms, called_at)
                 values (${userId}, 'api_token', 'get_member', 'ok', 1, now() - ${age}::interval)`;
    }
    const left = async () => {
      const [row] = await db()`select (select count(*)::int from app.api_test_results where user_id = ${userId}) as tests,
                                      (select count(*)::int from app.mcp_tool_calls where user_id = ${userId}) as calls`;
      return row;
    };
    // A batch of 2: two of the three old rows of each table go.
    await db()`select private.stored_records_prune(interval '30 days', 2)`;
    expect(await left()).toEqual({ tests: 3, calls: 3 });
    const [pruned] = await db()`select private.stored_records_prune() as n`;
    expect(pruned!.n).toBeGreaterThanOrEqual(2);
    expect(await left()).toEqual({ tests: 2, calls: 2 });
  });
});
