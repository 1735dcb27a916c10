// supabase-js against a gateway of its own (a test's dedicated gateway, with
// TRUST_PROXY=1): made as Supabase's docs make it (createClient(URL,
// ANON_KEY)), sending X-Forwarded-For so that each client is its own client
// address, with every answer checked against the served OpenAPI document.
import crypto from 'node:crypto';
import { createClient, type SupabaseClient } from '@supabase/supabase-js';
import WebSocket from 'ws';
import { apiKey } from '../helpers.ts';
import { checkContract } from './contract.ts';

/** A random address of 10.0.0.0/8: a client of its own. */
export const randomIp = () => `10.${crypto.randomInt(256)}.${crypto.randomInt(256)}.${crypto.randomInt(1, 255)}`;

/** An answer supabase-js received, raw (for comparing two clients' answers). */
export interface SeenAnswer {
  path: string;
  status: number;
  body: string;
}

const ANON_KEY = await apiKey('anon');
const made: SupabaseClient[] = [];

/** A client of the gateway at `url`, from `ip`; `seen` collects every answer it receives. */
export function supabaseAt(url: string, ip = randomIp(), seen?: SeenAnswer[]): SupabaseClient {
  const checkedFetch: typeof fetch = async (input, init) => {
    const res = await fetch(input, init);
    const at = new URL(typeof input === 'string' ? input : input instanceof URL ? input.href : input.url);
    const text = await res.clone().text();
    seen?.push({ path: at.pathname, status: res.status, body: text });
    await checkContract(url, init?.method ?? 'GET', at.pathname + at.search, res.status, res.headers.get('content-type'), text ? JSON.parse(text) : undefined);
    return res;
  };
  const client = createClient(url, ANON_KEY, {
    global: { fetch: checkedFetch, headers: { 'x-forwarded-for': ip } },
    auth: { persistSession: false },
    realtime: { transport: WebSocket as never },
  });
  made.push(client);
  return client;
}

/** Stops the automatic refresh of every client made (afterAll). */
export function stopSupabaseClients(): void {
  for (const client of made.splice(0)) client.auth.stopAutoRefresh();
}
