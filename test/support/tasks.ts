// Tasks over HTTP, for the task and deal tests: a task made through
// POST /api/mobile/tasks, and GET/POST as a user.
import { api, type TestUser } from '../helpers.ts';

export interface Task {
  id: string;
  created_by: string;
  inserted_at: string;
  updated_at: string;
  meta: Record<string, any>;
}

/** A task of the user, made through the API (201 expected). */
export async function createTask(user: TestUser, body: Record<string, unknown> = {}): Promise<Task> {
  const res = await api('POST', '/api/mobile/tasks', { token: user.accessToken, body });
  if (res.status !== 201) throw new Error(`create failed: ${res.status} ${res.text}`);
  return res.body.task;
}

export const get = (user: TestUser, path: string) => api('GET', path, { token: user.accessToken });
export const post = (user: TestUser, path: string, body?: unknown) => api('POST', path, { token: user.accessToken, body });
