// SQL-level tests of private.sync_api_endpoints (what the gateway calls at
// start) and api.api_endpoints_list. Each test runs in a transaction that is
// rolled back, so the gateway's own rows are untouched; timestamps are moved
// back by hand between two syncs (now() is fixed inside one transaction).
import { describe, expect, it } from 'vitest';
import type { Tx } from '../../gateway/core/db.ts';
import { db } from '../helpers.ts';

class Rollback extends Error {}

async function inRolledBackTransaction(fn: (tx: Tx) => Promise<void>): Promise<void> {
  await db()
    .begin(async (tx) => {
      await fn(tx);
      throw new Rollback();
    })
    .catch((err) => {
      if (!(err instanceof Rollback)) throw err;
    });
}

const endpoint = (method: string, path: string, description = 'd') => ({
  http_method: method,
  path,
  controller: 'Test',
  action: `${method.toLowerCase()}_${path.replace(/\W+/g, '_')}`,
  description,
  tags: ['Test'],
});

const sync = async (tx: Tx, endpoints: unknown[]) =>
  (await tx`select * from private.sync_api_endpoints(${tx.json(endpoints as never)}::jsonb)`)[0];

const rows = (tx: Tx) =>
  tx`select http_method, path, description, deprecated, discovered_at, last_updated from app.api_endpoints
      where path like '/sqltest/%' order by path, http_method`;

const ageAll = (tx: Tx) =>
  tx`update app.api_endpoints set discovered_at = discovered_at - interval '1 day', last_updated = last_updated - interval '1 day'`;

describe('private.sync_api_endpoints', () => {
  it('inserts new routes, keeps unchanged ones untouched, moves last_updated on a change, deprecates and revives', async () => {
    await inRolledBackTransaction(async (tx) => {
      const [{ n: before }] = (await tx`select count(*)::int as n from app.api_endpoints where not deprecated`) as unknown as [{ n: number }];
      const a = endpoint('GET', '/sqltest/a');
      const b = endpoint('POST', '/sqltest/b/{id}');
      const first = await sync(tx, [a, b]);
      // The gateway's own routes are no longer in the set: deprecated.
      expect(first).toEqual({ added: 2, changed: 0, retired: before, unchanged: 0 });
      let list = await rows(tx);
      expect(list.map((r) => [r.http_method, r.path, r.deprecated])).toEqual([
        ['GET', '/sqltest/a', false],
        ['POST', '/sqltest/b/{id}', false],
      ]);
      expect(list[0]!.discovered_at).toEqual(list[0]!.last_updated);

      await ageAll(tx);
      const aged = await rows(tx);
      // Same set again: nothing moves.
      expect(await sync(tx, [a, b])).toEqual({ added: 0, changed: 0, retired: 0, unchanged: 2 });
      expect(await rows(tx)).toEqual(aged);

      // A changed description moves last_updated; discovered_at stays.
      expect(await sync(tx, [a, endpoint('POST', '/sqltest/b/{id}', 'new words')])).toEqual({ added: 0, changed: 1, retired: 0, unchanged: 1 });
      list = await rows(tx);
      expect(list[1]!.description).toBe('new words');
      expect(list[1]!.discovered_at).toEqual(aged[1]!.discovered_at);
      expect(list[1]!.last_updated.getTime()).toBeGreaterThan(aged[1]!.last_updated.getTime());
      expect(list[0]).toEqual(aged[0]);

      // Gone from the router: deprecated (and last_updated moves); back: revived, same id.
      const [{ id }] = (await tx`select id from app.api_endpoints where path = '/sqltest/a'`) as unknown as [{ id: string }];
      await ageAll(tx);
      expect(await sync(tx, [endpoint('POST', '/sqltest/b/{id}', 'new words')])).toMatchObject({ retired: 1, unchanged: 1 });
      list = await rows(tx);
      expect(list[0]).toMatchObject({ path: '/sqltest/a', deprecated: true });
      expect(await sync(tx, [a, endpoint('POST', '/sqltest/b/{id}', 'new words')])).toMatchObject({ changed: 1, unchanged: 1 });
      const [revived] = await tx`select id, deprecated from app.api_endpoints where path = '/sqltest/a'`;
      expect(revived).toEqual({ id, deprecated: false });
    });
  });

  it('counts a duplicate once, upper-cases methods and refuses what is not an array (PT400) or breaks a rule', async () => {
    await inRolledBackTransaction(async (tx) => {
      const a = endpoint('get', '/sqltest/dup');
      expect(await sync(tx, [a, a])).toMatchObject({ added: 1 });
      const [row] = await tx`select http_method from app.api_endpoints where path = '/sqltest/dup'`;
      expect(row!.http_method).toBe('GET');
    });
    await expect(db()`select private.sync_api_endpoints('{}'::jsonb)`).rejects.toMatchObject({ code: 'PT400', hint: 'invalid_endpoints' });
    await expect(db()`select private.sync_api_endpoints(${db().json([endpoint('TRACE', '/sqltest/x')] as never)}::jsonb)`).rejects.toMatchObject({
      code: '23514',
    });
  });

  it('is not callable by API roles; the list is readable by anon', async () => {
    await inRolledBackTransaction(async (tx) => {
      await tx`set local role anon`;
      await expect(tx`select private.sync_api_endpoints('[]'::jsonb)`.then(() => 'ran')).rejects.toMatchObject({ code: '42501' });
    });
    await inRolledBackTransaction(async (tx) => {
      await tx`set local role anon`;
      const [row] = await tx`select api.api_endpoints_list() as list`;
      expect(Array.isArray(row!.list)).toBe(true);
      expect((row!.list as unknown[]).length).toBeGreaterThan(10);
    });
  });
});

describe('private.endpoint_path_pattern', () => {
  it('matches one segment per {parameter} and the rest literally', async () => {
    const [row] = await db()`
      select private.endpoint_path_pattern('/api/mobile/tasks/{id}/chain') as task,
             private.endpoint_path_pattern('/api/docs/openapi.json') as dotted,
             '/api/mobile/tasks/abc/chain' ~ private.endpoint_path_pattern('/api/mobile/tasks/{id}/chain') as ok,
             '/api/mobile/tasks/a/b/chain' ~ private.endpoint_path_pattern('/api/mobile/tasks/{id}/chain') as two_segments,
             '/api/docs/openapiXjson' ~ private.endpoint_path_pattern('/api/docs/openapi.json') as dot_is_literal,
             '/llms.txt' ~ private.endpoint_path_pattern('/llms.txt') as literal`;
    expect(row).toEqual({
      task: '^/api/mobile/tasks/[^/]+/chain$',
      dotted: '^/api/docs/openapi\\.json$',
      ok: true,
      two_segments: false,
      dot_is_literal: false,
      literal: true,
    });
  });
});
