// The agent-interface rule that needs several connections at once (the rest
// are pgTAP: supabase/tests/agents.test.sql): the per-agent hourly limit of a
// write tool holds under parallel transactions.
import { describe, expect, it } from 'vitest';
import { asUser, db } from '../helpers.ts';
import { newUser } from '../support/sql-fixtures.ts';

describe('private.agent_quota_take', () => {
  it('allows exactly the hourly allowance under parallel transactions, then PT429 rate_limited', async () => {
    const a = await newUser({ prefix: 'mcpsql' });
    await db()`insert into private.agent_tool_limits (tool, per_hour) values ('sql_test_tool', 5) on conflict (tool) do update set per_hour = 5`;
    const results = await Promise.allSettled(
      Array.from({ length: 9 }, () => asUser(a.id, (tx) => tx`select private.agent_quota_take('sql_test_tool')`)),
    );
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(5);
    for (const r of results.filter((x) => x.status === 'rejected')) {
      expect((r as PromiseRejectedResult).reason).toMatchObject({ code: 'PT429', hint: 'rate_limited' });
    }
    // Calls older than an hour no longer count.
    await db()`update private.agent_tool_usage set called_at = called_at - interval '61 minutes' where agent_id = ${a.id}`;
    await asUser(a.id, (tx) => tx`select private.agent_quota_take('sql_test_tool')`);
  });
});
