// A client process of the realtime bench (realtime.bench.ts): holds many SSE
// streams of GET /api/mobile/events/upcoming/stream over plain sockets (a
// minimal HTTP/1.1 client: no per-stream parser beyond what the bench needs)
// and reports, over IPC, when each stream is ready and when each marked
// change ("title":"mark-N") reached it (wall clock, ms, high resolution).
import net from 'node:net';

interface OpenCommand {
  type: 'open';
  host: string;
  port: number;
  path: string;
  tokens: string[];
  /** Streams being opened at once by this process. */
  concurrency: number;
}

type Command = OpenCommand | { type: 'collect' } | { type: 'close' };

const now = () => performance.timeOrigin + performance.now();

const sockets: net.Socket[] = [];

function record(mark: number, at: number): void {
  let list = arrivals.get(mark);
  if (!list) arrivals.set(mark, (list = []));
  list.push(at);
}
/** marker → arrival times (one per stream that got it) */
const arrivals = new Map<number, number[]>();
let failures = 0;
/** Why opens failed: the status line or the socket error code, with counts. */
const failureReasons = new Map<string, number>();
function failed(reason: string): void {
  failures++;
  failureReasons.set(reason, (failureReasons.get(reason) ?? 0) + 1);
}

function openOne(cmd: OpenCommand, token: string): Promise<number> {
  return new Promise((resolve) => {
    const started = now();
    const socket = net.connect({ host: cmd.host, port: cmd.port });
    socket.setNoDelay(true);
    sockets.push(socket);
    let ready = false;
    let tail = '';
    // latin1: no UTF-8 decoding; the markers and SSE fields are ASCII.
    socket.setEncoding('latin1');
    socket.on('connect', () => {
      socket.write(
        `GET ${cmd.path} HTTP/1.1\r\nHost: ${cmd.host}:${cmd.port}\r\nAuthorization: Bearer ${token}\r\nAccept: text/event-stream\r\n\r\n`,
      );
    });
    socket.on('data', (chunk: string) => {
      const at = now();
      if (!ready) {
        const text = tail + chunk;
        tail = text.slice(-16);
        if (text.startsWith('HTTP/1.1 ') && !text.startsWith('HTTP/1.1 200')) {
          failed(text.slice(9, 12));
          ready = true;
          resolve(-1);
          socket.destroy();
          return;
        }
        if (text.includes('event: ready')) {
          ready = true;
          tail = '';
          resolve(at - started);
        }
        return;
      }
      // Cheap scan (a client process holds thousands of streams): the
      // markers in this chunk, plus one split across the previous chunk.
      const text = tail.length > 0 ? tail + chunk : chunk;
      let from = 0;
      for (;;) {
        const i = text.indexOf('"mark-', from);
        if (i < 0) break;
        let j = i + 6;
        while (j < text.length && text.charCodeAt(j) >= 48 && text.charCodeAt(j) <= 57) j++;
        if (j >= text.length) break; // cut off: completed by the next chunk
        if (j > i + 6) record(Number(text.slice(i + 6, j)), at);
        from = j;
      }
      const cut = text.lastIndexOf('"mark-');
      tail = cut >= 0 && cut >= from ? text.slice(cut) : text.slice(-5);
    });
    socket.on('error', (err: NodeJS.ErrnoException) => {
      if (!ready) {
        failed(err.code ?? err.message);
        ready = true;
        resolve(-1);
      }
    });
  });
}

async function open(cmd: OpenCommand): Promise<void> {
  const times: number[] = [];
  let next = 0;
  const lane = async () => {
    while (next < cmd.tokens.length) {
      const token = cmd.tokens[next++]!;
      times.push(await openOne(cmd, token));
    }
  };
  await Promise.all(Array.from({ length: Math.min(cmd.concurrency, cmd.tokens.length) }, lane));
  process.send!({ type: 'opened', times, failures, reasons: [...failureReasons] });
}

process.on('message', (cmd: Command) => {
  if (cmd.type === 'open') void open(cmd);
  else if (cmd.type === 'collect') {
    process.send!({ type: 'arrivals', arrivals: [...arrivals.entries()] });
    arrivals.clear();
  } else {
    for (const s of sockets) s.destroy();
    process.exit(0);
  }
});
process.send!({ type: 'started' });
