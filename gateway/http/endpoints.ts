// GET /api/docs/endpoints is read from app.api_endpoints; this module fills
// it. At every start the gateway reads the routes its route table actually
// serves (gateway/app.ts), names each (section and action,
// as the OpenAPI document does; the summary from the route table when the
// route is one) and hands the set to private.sync_api_endpoints, which keeps
// discovered_at, moves last_updated on a change and flags routes no longer
// served as deprecated.
import type { Route } from './route.ts';
import type { Sql } from '../core/database/pool.ts';
import type { Logger } from '../core/process/log.ts';
import { actionOf, openApiPath, sectionOf } from './openapi.ts';

export interface DiscoveredEndpoint {
  http_method: string;
  path: string;
  controller: string;
  action: string;
  description: string | null;
  tags: string[];
}

const METHODS = new Set(['GET', 'POST', 'PUT', 'DELETE', 'PATCH']);

/** The routes the app serves (its route table's method and path list), described for app.api_endpoints. */
export function discoverEndpoints(served: readonly { method: string; path: string }[], routes: readonly Route[]): DiscoveredEndpoint[] {
  const found: DiscoveredEndpoint[] = [];
  for (const { method, path } of served) {
    const httpMethod = method.toUpperCase();
    if (!METHODS.has(httpMethod)) continue;
    const route = routes.find((r) => r.method === method && r.path === path);
    const section = sectionOf(path);
    found.push({
      http_method: httpMethod,
      path: openApiPath(path),
      controller: section,
      action: actionOf(method, path),
      description: route?.summary ?? null,
      tags: [section],
    });
  }
  return found;
}

export interface SyncResult {
  added: number;
  changed: number;
  retired: number;
  unchanged: number;
}

/** Records the served routes (one short transaction as the connection's owner role). */
export async function syncEndpoints(sql: Sql, endpoints: DiscoveredEndpoint[], log: Logger): Promise<SyncResult> {
  const [result] = await sql.begin(
    (tx) => tx<SyncResult[]>`select * from private.sync_api_endpoints(${tx.json(endpoints as never)}::jsonb)`,
  );
  log.info({ ...result, served: endpoints.length }, 'api endpoints discovered');
  return result!;
}
