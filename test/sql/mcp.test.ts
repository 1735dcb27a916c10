// SQL-level tests of the agent-interface rules (what a DBA runs after
// changing one): scoping of the api.mcp_* functions, the per-agent hourly
// limits under parallel transactions, per-IP admission windows, redaction of
// audited arguments, and the community-scoped-token guard.
import crypto from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { withClaims } from '../../gateway/core/db.ts';
import { asUser, db, uniqueEmail } from '../helpers.ts';
import { newCommunity, newUser } from '../support/sql-fixtures.ts';

describe('scoping', () => {
  it('only managed communities; only own members; both as PT404 not_found', async () => {
    const [a, b] = [await newUser({ prefix: 'mcpsql' }), await newUser({ prefix: 'mcpsql' })];
    const community = await newCommunity({ manager: a });
    const profile = (await asUser(a.id, (tx) => tx`select api.mcp_community_profile(${community}) as r`))[0]!.r;
    expect(profile).toMatchObject({ id: community, accepts_handoffs: false });
    await expect(asUser(b.id, (tx) => tx`select api.mcp_community_profile(${community})`)).rejects.toMatchObject({ code: 'PT404', hint: 'not_found' });
    const member = (await asUser(a.id, (tx) => tx`select api.mcp_member_create(${uniqueEmail('m')}, null, null, 'http://x') as r`))[0]!.r;
    await expect(asUser(b.id, (tx) => tx`select api.mcp_member_get(${member.id})`)).rejects.toMatchObject({ code: 'PT404', hint: 'not_found' });
    // Row-level security: the other agent's rows are not even readable.
    const rows = await asUser(b.id, (tx) => tx`select * from app.agent_members where member_id = ${member.id}`);
    expect(rows).toHaveLength(0);
  });

  it('refuses a community-scoped token (claims) with PT403 community_scope_violation', async () => {
    const a = await newUser({ prefix: 'mcpsql' });
    const community = await newCommunity({ manager: a });
    const claims = { role: 'authenticated' as const, sub: a.id, token_id: crypto.randomUUID(), token_community_id: community };
    await expect(withClaims(db(), claims, (tx) => tx`select api.mcp_community_profile(${community})`)).rejects.toMatchObject({
      code: 'PT403',
      hint: 'community_scope_violation',
    });
  });
});

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

describe('private.mcp_admit', () => {
  it('counts per IP per minute and reports the session owner', async () => {
    const ip = `192.0.2.${crypto.randomInt(1, 250)}`;
    const a = await newUser({ prefix: 'mcpsql' });
    const [{ id: session }] = (await db()`select private.mcp_session_open(${a.id}, 'c', '1', '2025-03-26') as id`) as unknown as [{ id: string }];
    const answers = [];
    for (let i = 0; i < 4; i++) answers.push((await db()`select * from private.mcp_admit(${ip}, 3, ${session})`)[0]!);
    expect(answers.map((r) => r.allowed)).toEqual([true, true, true, false]);
    expect(answers.map((r) => r.remaining)).toEqual([2, 1, 0, 0]);
    expect(answers[0]!.session_user_id).toBe(a.id);
    await db()`select private.mcp_session_end(${session}, ${a.id})`;
    expect((await db()`select * from private.mcp_admit(${`${ip}-x`}, 3, ${session})`)[0]!.session_user_id).toBeNull();
  });
});

describe('private.redact_secrets', () => {
  it('replaces values under secret-looking keys at any depth', async () => {
    const [row] = await db()`select private.redact_secrets(${db().json({
      a: 1,
      Password: 'x',
      list: [{ api_key: 'k', keep: true }],
      deep: { refresh_token: 't', client_secret: 's', note: 'n' },
    })}) as r`;
    expect(row!.r).toEqual({
      a: 1,
      Password: '[redacted]',
      list: [{ api_key: '[redacted]', keep: true }],
      deep: { refresh_token: '[redacted]', client_secret: '[redacted]', note: 'n' },
    });
  });
});
