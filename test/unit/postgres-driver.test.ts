// postgres.js 3.4.9 around reserve() when the server closes connections: the
// bugs that left the gateway broken after a database outage, each against a
// real Postgres. Every case fails (hangs, or an uncaught TypeError) on the
// unpatched driver; gateway/patches/postgres+3.4.9.patch, applied by
// `npm install` (patch-package), fixes them. Upstream: porsager/postgres
// #1195, #1199, #1186, #1208, #1219, #1223, #1082, #1192.
import fs from 'node:fs';
import postgres from 'postgres';
import { afterAll, describe, expect, it } from 'vitest';
import { databaseUrl, db } from '../helpers.ts';
import { PGBOUNCER_BINARY, startPgBouncer } from '../support/pgbouncer.ts';
import { startTcpProxy } from '../support/tcp-proxy.ts';

const pools: postgres.Sql[] = [];
afterAll(async () => {
  await Promise.all(pools.map((p) => p.end({ timeout: 1 })));
});

function pool(url = databaseUrl, options: postgres.Options<{}> = {}): postgres.Sql {
  const sql = postgres(url, { onnotice: () => {}, backoff: () => 0.05, ...options });
  pools.push(sql);
  return sql;
}

/** The promise's outcome, or 'pending' if it has not settled within `ms`. */
async function within<T>(promise: Promise<T>, ms = 5_000): Promise<T | 'pending'> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'pending'>((resolve) => (timer = setTimeout(() => resolve('pending'), ms)));
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

async function backendPid(sql: postgres.Sql | postgres.ReservedSql): Promise<number> {
  const [row] = await sql`select pg_backend_pid() as pid`;
  return row!.pid as number;
}

async function terminate(pid: number): Promise<void> {
  await db()`select pg_terminate_backend(${pid})`;
}

describe('postgres.js reserved connections when things go wrong', () => {
  it('a reserve queued behind a connection the server terminates gets a connection (#1195)', async () => {
    const sql = pool(databaseUrl, { max: 1 });
    const first = await sql.reserve();
    const pid = await backendPid(first);
    const second = sql.reserve();
    await terminate(pid);
    const got = await within(second);
    expect(got, 'the queued reserve never settled').not.toBe('pending');
    const reserved = got as postgres.ReservedSql;
    expect(await within(backendPid(reserved))).not.toBe(pid);
    reserved.release();
    first.release();
    expect(await within(sql`select 1 as one`)).toEqual([{ one: 1 }]);
  });

  it('reserves refused while the database is unreachable do not take the connections that come back', async () => {
    const proxy = await startTcpProxy({ host: new URL(databaseUrl).hostname, port: Number(new URL(databaseUrl).port) });
    try {
      const sql = pool(proxy.via(databaseUrl), { max: 2 });
      await sql`select 1`;
      await proxy.down();
      await new Promise((r) => setTimeout(r, 100)); // the pool sees its connections close
      // Requests keep coming while it is down: each reserve fails (refused).
      for (let i = 0; i < 6; i++) {
        const outcome = await within(sql.reserve().then((r) => (r.release(), 'reserved'), (e: { code?: string }) => e.code ?? 'error'));
        expect(outcome).not.toBe('reserved');
        expect(outcome).not.toBe('pending');
      }
      await proxy.up();
      // Back: every connection of the pool serves again, reserved or not.
      for (let i = 0; i < 10; i++) {
        const reserved = await within(sql.reserve());
        expect(reserved, `reserve ${i} after the return`).not.toBe('pending');
        const r = reserved as postgres.ReservedSql;
        expect(await within(r`select 1 as one`)).toEqual([{ one: 1 }]);
        r.release();
        expect(await within(sql`select 2 as two`)).toEqual([{ two: 2 }]);
      }
    } finally {
      await proxy.close();
    }
  });

  it('releasing a reservation whose backend was terminated leaves a working pool (#1199, #1208)', async () => {
    const sql = pool(databaseUrl, { max: 1 });
    const reserved = await sql.reserve();
    const pid = await backendPid(reserved);
    const sleeping = reserved`select pg_sleep(10)`.then(
      () => 'finished',
      (e: { code?: string }) => e.code,
    );
    await new Promise((r) => setTimeout(r, 200));
    await terminate(pid);
    expect(await within(sleeping)).toBe('CONNECTION_CLOSED');
    reserved.release();
    // A query on the released handle fails instead of writing to a closed socket.
    await expect(reserved`select 1`).rejects.toMatchObject({ code: 'CONNECTION_CLOSED' });
    // The next query gets a new connection, and its own answer (not the old backend's 57P01: #1223).
    expect(await within(sql`select 3 as three`)).toEqual([{ three: 3 }]);
  });

  it('queries waiting on a reservation fail when its connection is terminated (#1186)', async () => {
    // max_pipeline 1: the second query of the reservation waits in its queue.
    const pipelineOfOne = { max: 1, max_pipeline: 1 }; // an option postgres.js's types omit
    const sql = pool(databaseUrl, pipelineOfOne as postgres.Options<{}>);
    const reserved = await sql.reserve();
    const pid = await backendPid(reserved);
    const queries = [reserved`select pg_sleep(10)`, reserved`select 1`, reserved`select 2`].map((q) =>
      q.then(
        () => 'answered',
        (e: { code?: string }) => e.code,
      ),
    );
    await new Promise((r) => setTimeout(r, 200));
    await terminate(pid);
    const outcomes = await within(Promise.all(queries));
    expect(outcomes, 'queries of the reservation never settled').not.toBe('pending');
    expect(outcomes).not.toContain('answered');
    reserved.release();
    expect(await within(sql`select 4 as four`)).toEqual([{ four: 4 }]);
  });

  it('a reserve on a cold pool with fetch_types off gets its connection (#1219)', async () => {
    const sql = pool(databaseUrl, { max: 1, fetch_types: false });
    const reserved = await within(sql.reserve());
    expect(reserved).not.toBe('pending');
    expect(await within((reserved as postgres.ReservedSql)`select 5 as five`)).toEqual([{ five: 5 }]);
    (reserved as postgres.ReservedSql).release();
  });

  it('a query that cannot be built, pipelined inside a transaction, fails alone and leaves no transaction open (#1082)', async () => {
    const sql = pool(databaseUrl, { max: 1 });
    const reserved = await sql.reserve();
    const pid = await backendPid(reserved);
    const outcomes = await within(
      Promise.allSettled([
        reserved`begin`.execute(),
        reserved`select ${undefined as unknown as number}::int as never`.execute(),
        reserved`select 1 as one`.execute(),
        reserved`commit`.execute(),
      ]),
    );
    expect(outcomes, 'the pipeline never settled').not.toBe('pending');
    const [begin, unbuildable, one, commit] = outcomes as PromiseSettledResult<unknown>[];
    expect(begin!.status).toBe('fulfilled');
    expect(unbuildable).toMatchObject({ status: 'rejected', reason: { code: 'UNDEFINED_VALUE' } });
    expect(one).toMatchObject({ status: 'fulfilled', value: [{ one: 1 }] });
    expect(commit!.status).toBe('fulfilled');
    reserved.release();
    expect(await within(sql`select 6 as six`)).toEqual([{ six: 6 }]);
    const [state] = await db()`select state from pg_stat_activity where pid = ${pid}`;
    expect(state?.state).toBe('idle');
  });
});

// PgBouncer accepts a client's connection and signs it in by itself; only the
// first query needs a server. With the server gone, that first query (the
// driver's own array-types query, fetch_types) fails: postgres.js dropped
// that failure as an unhandled rejection, which ends a Node process (the
// gateway died on `server login has been failing` and `write
// CONNECTION_CLOSED` behind PgBouncer). Upstream #1192, #279.
describe.skipIf(!fs.existsSync(PGBOUNCER_BINARY))('postgres.js behind PgBouncer while the server is gone', () => {
  it('a new connection PgBouncer cannot serve fails its query or reserve at once, with no unhandled rejection, and serves once the server is back', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    const target = new URL(databaseUrl);
    const proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port) });
    const bouncer = await startPgBouncer(proxy.via(databaseUrl));
    try {
      const viaBouncer = (max = 1) => pool(bouncer.url, { max, prepare: false });
      expect(await within(viaBouncer()`select 1 as one`)).toEqual([{ one: 1 }]);
      await proxy.down();
      const failed = (p: Promise<unknown>) => within(p.then(() => 'answered', (e: { code?: string }) => e.code ?? 'error'), 5_000);
      // The query that meets the failure waits in PgBouncer (query_wait_timeout);
      // after it, PgBouncer refuses at once until server_login_retry has passed.
      await within(viaBouncer()`select 1`.catch(() => {}), 2_000);
      for (let i = 0; i < 3; i++) {
        // A cold pool: its connection's first query is the array types.
        const query = await failed(viaBouncer()`select 1`);
        expect(query, 'a query on a new connection').not.toBe('pending');
        expect(query).not.toBe('answered');
        const reserve = await failed(viaBouncer().reserve());
        expect(reserve, 'a reserve on a new connection').not.toBe('pending');
        expect(reserve).not.toBe('answered');
      }
      await new Promise((r) => setTimeout(r, 200));
      expect(unhandled, 'unhandled rejections').toEqual([]);
      // Back: a pool that failed serves again.
      const again = viaBouncer(2);
      await failed(again`select 1`);
      await proxy.up();
      const started = Date.now();
      let answer: unknown;
      while (Date.now() - started < 10_000) {
        answer = await within(again`select 2 as two`.catch(() => 'failed'));
        if (Array.isArray(answer)) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(answer).toEqual([{ two: 2 }]);
      const reserved = (await within(again.reserve())) as postgres.ReservedSql;
      expect(await within(reserved`select 3 as three`)).toEqual([{ three: 3 }]);
      reserved.release();
      expect(unhandled, 'unhandled rejections').toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
      await bouncer.stop();
      await proxy.close();
    }
  });
});
