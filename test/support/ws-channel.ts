// A raw websocket of /realtime/v1/websocket with one channel joined with an
// access token (postgres_changes on app.events), its frames kept: for the
// tests that end a credential and watch the channel close.
import { expect } from 'vitest';
import WebSocket from 'ws';
import { baseUrl } from '../helpers.ts';
import { waitFor } from './wait.ts';

export interface JoinedSocket {
  ws: WebSocket;
  /** Every frame received, parsed ([join_ref, ref, topic, event, payload]). */
  frames: unknown[][];
  isClosed(): boolean;
}

/** Opens the websocket and joins channel `realtime:feed` with the token (the join must be accepted). */
export async function joinedSocket(token: string): Promise<JoinedSocket> {
  const ws = new WebSocket(`${baseUrl.replace('http', 'ws')}/realtime/v1/websocket?apikey=x&vsn=2.0.0`);
  const frames: unknown[][] = [];
  let closed = false;
  ws.on('message', (data) => frames.push(JSON.parse(String(data))));
  ws.on('close', () => (closed = true));
  await new Promise((resolve, reject) => {
    ws.on('open', resolve);
    ws.on('error', reject);
  });
  ws.send(
    JSON.stringify(['1', '1', 'realtime:feed', 'phx_join', { config: { postgres_changes: [{ event: '*', schema: 'app', table: 'events' }] }, access_token: token }]),
  );
  const reply = (await waitFor(() => frames.find((f) => f[1] === '1'), 'the join reply')) as [string, string, string, string, { status: string }];
  expect(reply[4].status).toBe('ok');
  return { ws, frames, isClosed: () => closed };
}

/** Resolves once the server closed the channel (phx_close). */
export function channelClosed(socket: JoinedSocket): Promise<unknown[]> {
  return waitFor(() => socket.frames.find((f) => f[3] === 'phx_close'), 'the channel to close');
}
