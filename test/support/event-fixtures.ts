// Fixtures for the events, check-in, connection and deep-link tests:
// communities with their node, venues and events made directly in SQL (as an
// operator would), with times relative to the database's now(), and hats
// made through the API. Users, plain communities and memberships:
// sql-fixtures.ts.
import crypto from 'node:crypto';
import { api, db, type TestUser } from '../helpers.ts';
import { newCommunity } from './sql-fixtures.ts';

/** A uuid that names nothing (and is a valid RFC 4122 v4 uuid). */
export const unknownId = () => crypto.randomUUID();

export interface Community {
  id: string;
  nodeId: string;
}

/** A community and its node; `manager` (a user's e-mail) becomes its manager. */
export async function createCommunity(manager?: string): Promise<Community> {
  const id = await newCommunity({ manager });
  const [row] = await db()`select c.node_id from app.communities c where c.id = ${id}`;
  return { id, nodeId: row!.node_id as string };
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
