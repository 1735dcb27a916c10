// GET /api/docs/endpoints is read from app.api_endpoints; this module fills
// it. At every start the gateway reads the routes its Express router actually
// serves (method + path of every route layer, and of every route the dispatcher
// of http/dispatch.ts serves), names each (section and action,
// as the OpenAPI document does; the summary from the route table when the
// route is one) and hands the set to private.sync_api_endpoints, which keeps
// discovered_at, moves last_updated on a change and flags routes no longer
// served as deprecated.
import type express from 'express';
import type { Route } from '../http/route.ts';
import type { Sql } from './db.ts';
import type { Logger } from './log.ts';
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

interface RouterLayer {
  route?: { path?: unknown; methods?: Record<string, boolean> };
  /** The route dispatcher (http/dispatch.ts) lists the routes it serves. */
  handle?: { served?: readonly { method: string; path: string }[] };
}

/** Method and path of every route an Express router layer serves: a route layer, or the dispatcher. */
function servedBy(layer: RouterLayer): { method: string; path: string }[] {
  if (layer.handle?.served) return [...layer.handle.served];
  const path = layer.route?.path;
  if (typeof path !== 'string') return [];
  return Object.entries(layer.route?.methods ?? {})
    .filter(([, on]) => on)
    .map(([method]) => ({ method, path }));
}

/** The routes an Express app serves, described for app.api_endpoints. */
export function discoverEndpoints(app: express.Express, routes: readonly Route[]): DiscoveredEndpoint[] {
  const stack = (app.router as unknown as { stack?: RouterLayer[] }).stack ?? [];
  const found: DiscoveredEndpoint[] = [];
  for (const layer of stack) {
    for (const { method, path } of servedBy(layer)) {
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
