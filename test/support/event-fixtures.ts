// Fixtures for the events, check-in, connection and deep-link tests:
// communities, memberships, venues and events made directly in SQL (as an
// operator would), with times relative to the database's now().
import crypto from 'node:crypto';
import { api, db, type TestUser } from '../helpers.ts';

export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
export const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/** A uuid that names nothing (and is a valid RFC 4122 v4 uuid). */
export const unknownId = () => crypto.randomUUID();

export async function nodeOf(userId: string): Promise<string> {
  const [row] = await db()`select node_id from app.profiles where id = ${userId}`;
  return row!.node_id as string;
}

export interface Community {
  id: string;
  nodeId: string;
}

/** A community; `manager` (a user's e-mail) becomes its manager. */
export async function createCommunity(manager?: string): Promise<Community> {
  const name = `Community ${crypto.randomBytes(3).toString('hex')}`;
  const [made] = await db()`select admin.create_community(${name}, null, '{}', ${manager ?? null}) as id`;
  const [row] = await db()`select c.id, c.node_id from app.communities c where c.id = ${made!.id}`;
  return { id: row!.id as string, nodeId: row!.node_id as string };
}

export async function addMember(communityId: string, userId: string, role: 'member' | 'manager' = 'member'): Promise<void> {
  await db()`
    insert into app.community_members (community_id, member_node_id, role)
    values (${communityId}, (select node_id from app.profiles where id = ${userId}), ${role})`;
}

export async function createVenue(name = 'The Hall'): Promise<string> {
  const [row] = await db()`select admin.create_venue(${name}, '1 Main St') as id`;
  return row!.id as string;
}

export interface EventRow {
  id: string;
  nodeId: string;
  shortlink: string;
  title: string;
}

export interface EventOptions {
  communityId: string;
  title?: string;
  /** Interval relative to now(), e.g. '-3 hours', '2 days'. Each unit carries its own sign: write '-119 minutes', not '-1 hour 59 minutes'. */
  starts: string;
  /** Interval relative to now(); null or absent: no end_time. */
  ends?: string | null;
  venueNodeId?: string | null;
  description?: string | null;
}

export async function createEvent(options: EventOptions): Promise<EventRow> {
  const title = options.title ?? `Event ${crypto.randomBytes(3).toString('hex')}`;
  const [made] = await db()`
    select admin.create_event(
      ${options.communityId}, ${title},
      now() + ${options.starts}::interval,
      now() + ${options.ends ?? null}::interval,
      ${options.venueNodeId ?? null}, ${options.description ?? null}) as id`;
  const [row] = await db()`select e.id, e.node_id, e.shortlink, e.title from app.events e where e.id = ${made!.id}`;
  return { id: row!.id, nodeId: row!.node_id, shortlink: row!.shortlink, title: row!.title };
}

/** A hat of the user, made through the API. */
export async function createHat(user: TestUser, name = 'At work'): Promise<string> {
  const res = await api('POST', '/api/mobile/hats', { token: user.accessToken, body: { hat: { name, hat_type: 'professional' } } });
  if (res.status !== 201) throw new Error(`hat: ${res.status} ${res.text}`);
  return res.body.data.id as string;
}
