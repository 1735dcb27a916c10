// Fixtures made directly in SQL, as an operator would (the admin.* functions
// and, where no function exists, inserts as the table owner): users,
// communities, memberships and task graphs. One definition of each, used by
// the SQL tests and by the HTTP tests that need a state no endpoint makes.
// Events and venues: event-fixtures.ts.
import postgres from 'postgres';
import { afterAll } from 'vitest';
import { databaseUrl, db, uniqueEmail } from '../helpers.ts';

const sessions: postgres.Sql[] = [];
afterAll(async () => {
  await Promise.all(sessions.splice(0).map((s) => s.end({ timeout: 5 })));
});

/** A connection of its own (a worker's or a backup's session, where session-level locks hold), ended after the test file. */
export function ownSession(): postgres.Sql {
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} });
  sessions.push(sql);
  return sql;
}

/** A user made by admin.create_user (as POST /api/auth/register makes one). */
export interface SqlUser {
  id: string;
  email: string;
  password: string;
  /** The user's node (app.profiles.node_id). */
  nodeId: string;
}

export interface NewUserOptions {
  /** Before the random part of the e-mail (which test made the user). */
  prefix?: string;
  password?: string;
  /** The profile name; by default the e-mail's local part. */
  name?: string;
}

export async function newUser(options: NewUserOptions = {}): Promise<SqlUser> {
  const email = uniqueEmail(options.prefix ?? 'sql');
  const password = options.password ?? 'password123';
  const [row] = await db()`select admin.create_user(${email}, ${password}, ${options.name ?? null}) as id`;
  const id = row!.id as string;
  return { id, email, password, nodeId: await nodeOf(id) };
}

/** The user's node (app.profiles.node_id). */
export async function nodeOf(userId: string): Promise<string> {
  const [row] = await db()`select node_id from app.profiles where id = ${userId}`;
  return row!.node_id as string;
}

export interface NewCommunityOptions {
  /** By default a unique name. */
  name?: string;
  description?: string | null;
  tags?: string[];
  /** The manager: an e-mail, or a user with one. */
  manager?: string | { email: string } | null;
}

/** A community made by admin.create_community; its id. */
export async function newCommunity(options: NewCommunityOptions = {}): Promise<string> {
  const name = options.name ?? `Community ${crypto.randomUUID().slice(0, 8)}`;
  const manager = typeof options.manager === 'object' ? (options.manager?.email ?? null) : options.manager;
  const [row] = await db()`
    select admin.create_community(${name}, ${options.description ?? null}, ${options.tags ?? []}, ${manager ?? null}) as id`;
  return row!.id as string;
}

/** Makes the user a member (or manager) of the community, as the table owner. */
export async function addMember(communityId: string, userId: string, role: 'member' | 'manager' = 'member'): Promise<void> {
  await db()`
    insert into app.community_members (community_id, member_node_id, role)
    values (${communityId}, (select node_id from app.profiles where id = ${userId}), ${role})`;
}

/**
 * n tasks of the user ('t0' … 't<n-1>', pending, inserted a second apart) and
 * the ladder links i -> i+1, i -> i+2 (2^n paths), inserted as the table
 * owner; the task ids in order.
 */
export async function ladder(userId: string, n: number): Promise<string[]> {
  const rows = await db()`
    insert into app.tasks (created_by, meta, inserted_at)
    select ${userId}, jsonb_build_object('title', 't' || i, 'status', 'pending'), now() + make_interval(secs => i)
      from generate_series(0, ${n - 1}) i
    returning id, (meta->>'title') as title`;
  const byTitle = new Map(rows.map((r) => [r.title as string, r.id as string]));
  const ids = Array.from({ length: n }, (_, i) => byTitle.get(`t${i}`)!);
  await db()`
    insert into app.task_transitions (created_by, origin_id, destination_id, inserted_at)
    select ${userId}, (${ids}::uuid[])[i], (${ids}::uuid[])[i + s], now() + make_interval(secs => 2 * i + s)
      from generate_series(1, ${n}) i, (values (1), (2)) step(s)
     where i + s <= ${n}`;
  return ids;
}
