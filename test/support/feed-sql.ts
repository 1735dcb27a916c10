// What the realtime feed's SQL tests (test/sql/realtime.test.ts) share besides
// the fixtures of sql-fixtures.ts and event-fixtures.ts: the public URL the
// feed's links are built from, and the change log's head.
import { db } from '../helpers.ts';

export const PUBLIC = 'https://app.example.com';

/** The newest change id. */
export async function head(): Promise<number> {
  const [row] = await db()`select head from private.change_log_position()`;
  return Number(row!.head);
}
