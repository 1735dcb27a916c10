// Fixtures for the realtime feed's SQL tests (test/sql/event-*.test.ts):
// users, communities, memberships and events made directly in SQL, and the
// change log's head.
import crypto from 'node:crypto';
import { db } from '../helpers.ts';

export const PUBLIC = 'https://app.example.com';

export interface FeedUser {
  id: string;
  nodeId: string;
}

export async function newUser(): Promise<FeedUser> {
  const email = `feed-${crypto.randomBytes(6).toString('hex')}@example.com`;
  const [row] = await db()`select admin.create_user(${email}, 'correct horse', 'Feed') as id`;
  const [profile] = await db()`select node_id from app.profiles where id = ${row!.id}`;
  return { id: row!.id, nodeId: profile!.node_id };
}

export async function newCommunity(): Promise<string> {
  const [row] = await db()`select admin.create_community(${`Feed ${crypto.randomBytes(3).toString('hex')}`}) as id`;
  return row!.id;
}

export async function join(communityId: string, nodeId: string, role: 'member' | 'manager' = 'member'): Promise<void> {
  await db()`insert into app.community_members (community_id, member_node_id, role) values (${communityId}, ${nodeId}, ${role})`;
}

/** An event of the community starting (and ending, if given) at now() + the intervals. */
export async function newEvent(communityId: string, starts: string, ends: string | null = null, title = 'Event'): Promise<string> {
  const [row] = await db()`
    select admin.create_event(${communityId}, ${title}, now() + ${starts}::interval, now() + ${ends}::interval) as id`;
  return row!.id;
}

/** The newest change id. */
export async function head(): Promise<number> {
  const [row] = await db()`select head from private.change_log_position()`;
  return Number(row!.head);
}
