// Graceful stop of the HTTP server (SIGTERM, SIGINT): requests being served
// finish and get their answers; connections with nothing in flight (idle
// keep-alive sockets, or sockets whose request has not started) are closed at
// once, and every other one right after its last answer. A client whose
// connection is closed before its request started may retry it: nothing of it
// ran. Long-lived streams are ended by their owners (realtime hub, websocket)
// before this runs.
import type { Server } from 'node:http';
import type { Socket } from 'node:net';

export interface Drain {
  /** Stops accepting, and resolves once every in-flight request has been answered (or after `forceAfterMs`). */
  close(forceAfterMs: number): Promise<void>;
}

export function trackConnections(server: Server): Drain {
  const inFlight = new Map<Socket, number>();
  let closing = false;
  server.on('connection', (socket: Socket) => {
    inFlight.set(socket, 0);
    socket.once('close', () => inFlight.delete(socket));
  });
  server.on('request', (req, res) => {
    const socket = req.socket;
    inFlight.set(socket, (inFlight.get(socket) ?? 0) + 1);
    if (closing) res.setHeader('Connection', 'close');
    res.once('close', () => {
      const left = (inFlight.get(socket) ?? 1) - 1;
      inFlight.set(socket, left);
      if (closing && left === 0) socket.destroySoon();
    });
  });
  return {
    close: (forceAfterMs) =>
      new Promise<void>((resolve) => {
        closing = true;
        server.close(() => resolve());
        for (const [socket, count] of inFlight) if (count === 0) socket.destroy();
        setTimeout(() => server.closeAllConnections(), forceAfterMs).unref();
      }),
  };
}
