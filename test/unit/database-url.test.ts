// Database URLs that name several hosts (core/process/database-url.ts): not
// WHATWG URLs, read as libpq and postgres.js read them.
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../gateway/core/process/config.ts';
import { databaseHosts, queryParam, withHost } from '../../gateway/core/process/database-url.ts';

const multi = 'postgres://app:p%40ss@db1.internal:5432,db2.internal:6432,[::1]:5433/community?target_session_attrs=read-write&sslmode=disable';

describe('database URLs with several hosts', () => {
  it('are not WHATWG URLs', () => {
    expect(() => new URL(multi)).toThrow();
  });

  it('name their hosts in order, with the default port where none is given', () => {
    expect(databaseHosts(multi)).toEqual([
      { host: 'db1.internal', port: 5432 },
      { host: 'db2.internal', port: 6432 },
      { host: '::1', port: 5433 },
    ]);
    expect(databaseHosts('postgresql://u@h/db')).toEqual([{ host: 'h', port: 5432 }]);
    expect(databaseHosts('postgres://u@h1,h2:7000/db')).toEqual([
      { host: 'h1', port: 5432 },
      { host: 'h2', port: 7000 },
    ]);
  });

  it('name one host at a time for node-postgres, credentials and other parameters kept, target_session_attrs dropped', () => {
    expect(withHost(multi, { host: 'db2.internal', port: 6432 })).toBe('postgres://app:p%40ss@db2.internal:6432/community?sslmode=disable');
    expect(withHost(multi, { host: '::1', port: 5433 })).toBe('postgres://app:p%40ss@[::1]:5433/community?sslmode=disable');
    // A single-host URL of that kind is a WHATWG URL again, as pg's parser needs.
    expect(new URL(withHost(multi, { host: 'db1.internal', port: 5432 })).port).toBe('5432');
    expect(queryParam(multi, 'target_session_attrs')).toBe('read-write');
    expect(queryParam('postgres://u@h/db', 'target_session_attrs')).toBeNull();
  });

  it('are accepted by the configuration, the transaction pooler told by any host on 6543', () => {
    const base = { JWT_SECRET: 'x'.repeat(40) };
    const session = loadConfig({ ...base, DATABASE_URL: multi });
    expect(session.databaseUrl).toBe(multi);
    expect(session.databasePoolMode).toBe('session');
    expect(loadConfig({ ...base, DATABASE_URL: 'postgres://u@h1:6543,h2:6543/db' }).databasePoolMode).toBe('transaction');
  });
});
