// The API token rule that needs several connections at once (the rest are
// pgTAP: supabase/tests/tokens.test.sql): concurrent uses of one token are
// each counted, exactly.
import { describe, expect, it } from 'vitest';
import { asAnon, asUser, db } from '../helpers.ts';
import { newUser } from '../support/sql-fixtures.ts';

describe('api.api_token_authenticate', () => {
  it('50 concurrent authentications add exactly 50', async () => {
    const user = await newUser({ prefix: 'toksql' });
    const [created] = await asUser(user.id, (tx) => tx<{ token: Record<string, any>; token_value: string }[]>`
      select * from api.api_token_create('t', array['/*'], null, null)`);
    await Promise.all(Array.from({ length: 50 }, () => asAnon((tx) => tx`select * from api.api_token_authenticate(${created!.token_value}, '/x')`)));
    const [row] = await db()`select usage_count from app.api_tokens where id = ${created!.token.id}`;
    expect(Number(row!.usage_count)).toBe(50);
  });
});
