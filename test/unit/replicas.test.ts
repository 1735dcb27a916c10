// The pieces of read replicas that need no database: DATABASE_REPLICA_URLS
// split into URLs (multi-host ones keep their commas), WAL positions read
// from text (a client's X-Consistency-Token is hostile input), and what a
// read needs of a replica. The replicas themselves: test/process/replicas.test.ts.
import { afterAll, describe, expect, it } from 'vitest';
import { splitDatabaseUrls } from '../../gateway/core/process/config.ts';
import { parseLsn, Replicas } from '../../gateway/core/database/replicas.ts';

describe('DATABASE_REPLICA_URLS', () => {
  it('splits on commas between URLs, not inside a multi-host URL', () => {
    expect(splitDatabaseUrls(undefined)).toEqual([]);
    expect(splitDatabaseUrls(' , ')).toEqual([]);
    expect(splitDatabaseUrls('postgres://u@r1:5432/db, postgresql://u@r2/db')).toEqual(['postgres://u@r1:5432/db', 'postgresql://u@r2/db']);
    expect(splitDatabaseUrls('postgres://u@a:5432,b:5433/db?target_session_attrs=standby,postgres://u@c/db')).toEqual([
      'postgres://u@a:5432,b:5433/db?target_session_attrs=standby',
      'postgres://u@c/db',
    ]);
  });
});

describe('consistency tokens', () => {
  it('reads a WAL position as Postgres writes it, and nothing else', () => {
    expect(parseLsn('0/0')).toBe(0n);
    expect(parseLsn('16/B374D848')).toBe((0x16n << 32n) | 0xb374d848n);
    expect(parseLsn('ffffffff/FFFFFFFF')).toBe(2n ** 64n - 1n);
    for (const bad of ['', '1', '1/2/3', '123456789/0', '0/123456789', 'x/1', ' 0/1', '0/1 ', '-1/0', 'x'.repeat(5000), undefined, 12, ['0/1']]) {
      expect(parseLsn(bad), String(bad).slice(0, 20)).toBeNull();
    }
  });

  const replicas = new Replicas('postgres://nobody@127.0.0.1:1/none', ['postgres://nobody@127.0.0.1:1/none'], {
    maxLagMs: 1000,
    pool: { max: 1, applicationName: 'unit' },
  });
  afterAll(() => replicas.close());

  it("a read needs the newer of the token sent and its session's newest write; a value that is not a token, the primary", () => {
    expect(replicas.needOf(undefined, null)).toEqual({ lsn: null });
    expect(replicas.needOf('0/10', null)).toEqual({ lsn: 0x10n });
    expect(replicas.needOf('not a token', null).lsn).toBeGreaterThan(2n ** 64n - 1n);
    replicas.noteWrite('session:a', 0x20n);
    expect(replicas.needOf(undefined, 'session:a')).toEqual({ lsn: 0x20n });
    expect(replicas.needOf('0/30', 'session:a')).toEqual({ lsn: 0x30n });
    expect(replicas.needOf('0/10', 'session:a')).toEqual({ lsn: 0x20n });
    // An older write does not lower what the session needs; another session needs nothing of it.
    replicas.noteWrite('session:a', 0x15n);
    expect(replicas.needOf(undefined, 'session:a')).toEqual({ lsn: 0x20n });
    expect(replicas.needOf(undefined, 'session:b')).toEqual({ lsn: null });
    // An access token issued at t reads what was committed before it.
    expect(replicas.needOf(undefined, 'session:b', 5_000)).toEqual({ lsn: null, since: 5_000 });
    // A session that ended: its reads go to the primary (which refuses them).
    replicas.noteSessionEnded('SESSION-C');
    expect(replicas.needOf(undefined, 'session:session-c').lsn).toBeGreaterThan(2n ** 64n - 1n);
  });

  it('uses no replica before the monitor has seen it', () => {
    expect(replicas.choose({})).toBeNull();
  });
});
