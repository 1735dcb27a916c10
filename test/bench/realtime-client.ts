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
const MARK = /"title": ?"mark-(\d+)"/g;

const sockets: net.Socket[] = [];
/** marker → arrival times (one per stream that got it) */
const arrivals = new Map<number, number[]>();
let failures = 0;

function openOne(cmd: OpenCommand, token: string): Promise<number> {
  return new Promise((resolve) => {
    const started = now();
    const socket = net.connect({ host: cmd.host, port: cmd.port });
    socket.setNoDelay(true);
    sockets.push(socket);
    let ready = false;
    let tail = '';
    socket.setEncoding('utf8');
    socket.on('connect', () => {
      socket.write(
        `GET ${cmd.path} HTTP/1.1\r\nHost: ${cmd.host}:${cmd.port}\r\nAuthorization: Bearer ${token}\r\nAccept: text/event-stream\r\n\r\n`,
      );
    });
    socket.on('data', (chunk: string) => {
      const at = now();
      const text = tail + chunk;
      if (!ready) {
        if (text.startsWith('HTTP/1.1 ') && !text.startsWith('HTTP/1.1 200')) {
          failures++;
          ready = true;
          resolve(-1);
          socket.destroy();
          return;
        }
        if (text.includes('event: ready')) {
          ready = true;
          resolve(at - started);
        }
      }
      MARK.lastIndex = 0;
      let m: RegExpExecArray | null;
      while ((m = MARK.exec(text)) !== null) {
        // Only matches that end in the new chunk (the tail was scanned before).
        if (m.index + m[0].length <= tail.length) continue;
        const mark = Number(m[1]);
        let list = arrivals.get(mark);
        if (!list) arrivals.set(mark, (list = []));
        list.push(at);
      }
      tail = text.slice(-120);
    });
    socket.on('error', () => {
      if (!ready) {
        failures++;
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
  process.send!({ type: 'opened', times, failures });
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
