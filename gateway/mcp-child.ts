// `npm start` runs the MCP server as a child process beside the gateway (the
// gateway proxies /mcp to it). The child has an IPC channel and exits when
// the parent goes away (even on SIGKILL), so it is never orphaned.
//
// Without MCP_PORT the child listens on a free port of MCP_HOST and tells
// this process which ({ ready, port } over IPC): the gateway sends /mcp
// there and nowhere else, so a PORT + 1 taken by another program (an
// ADMIN_PORT, anything) neither stops the MCP server nor gets its requests.
// With MCP_PORT the child listens there, and a port already taken is its
// start failing.
//
// A child that fails to start says why ({ failed: why }); one that exits is
// started again, after 1 s, doubling to 30 s while it keeps failing (every
// failure is one error line with its reason, and /ready's `mcp` check says
// it). `started` settles with the first attempt: the caller fails the whole
// start when it does not come up. stop() ends it with SIGTERM (SIGKILL after
// 10 s).
import { fork, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { mcpAddress, projectRoot, type Config } from './core/process/config.ts';
import type { Logger } from './core/process/log.ts';

export interface McpChild {
  stop(): Promise<void>;
  /** The running child (its metrics are asked over its IPC channel), if any. */
  current(): ChildProcess | undefined;
  /** Where the gateway sends /mcp: MCP_UPSTREAM_URL, or the address the child said it listens on (undefined while it is not up). */
  url(): string | undefined;
  /** Calls `listener` whenever url() changes (the child listening, exiting, listening again elsewhere). */
  onUrlChange(listener: () => void): void;
  /** Resolves once the child first listens; rejects with why its first start failed. */
  readonly started: Promise<void>;
  /** Null when the MCP server answers GET /health within 2 s; else why not (the admin server's /ready). */
  notAnswering(): Promise<string | null>;
}

/** The wait before starting a child again: 1 s, doubling while it keeps failing, at most this. */
const MAX_RESTART_DELAY_MS = 30_000;

/** A child message (mcp-server/main.ts). */
type ChildMessage = { ready?: boolean; port?: number; failed?: string } | null;

export function startMcpChild(config: Config, databaseUrl: string, log: Logger): McpChild {
  let child: ChildProcess | undefined;
  let listening: string | undefined;
  /** Why the last start failed (or how the child exited), while it is not up. */
  let lastFailure: string | undefined;
  let failures = 0;
  let stopping = false;
  let restart: NodeJS.Timeout | undefined;
  let settle: { resolve: () => void; reject: (err: Error) => void } | undefined;
  const listeners: (() => void)[] = [];
  const listen = (address: string | undefined) => {
    if (address === listening) return;
    listening = address;
    for (const listener of listeners) listener();
  };
  const started = new Promise<void>((resolve, reject) => (settle = { resolve, reject }));
  // Handled by whoever awaits it; never an unhandled rejection.
  started.catch(() => {});

  const spawn = () => {
    let failed: string | undefined;
    const current = fork(path.join(projectRoot(), 'mcp-server', 'main.ts'), [], {
      execArgv: process.execArgv,
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      env: {
        ...process.env,
        DATABASE_URL: databaseUrl,
        PORT: String(config.port),
        PUBLIC_URL: config.publicUrl,
        // Unset: any free port, which the child tells (a taken PORT + 1 is no obstacle).
        MCP_PORT: String(config.mcp.port ?? 0),
        MCP_HOST: config.mcp.host,
        // It believes X-Forwarded-For only from this gateway (loopback, or
        // MCP_PROXY_SECRET when set), whatever TRUST_PROXY says for the gateway.
      },
    });
    child = current;
    current.on('message', (message: ChildMessage) => {
      if (message?.failed) failed = message.failed;
      if (message?.ready && typeof message.port === 'number') {
        listen(mcpAddress(config.mcp.host, message.port));
        lastFailure = undefined;
        failures = 0;
        settle?.resolve();
        settle = undefined;
      }
    });
    current.on('exit', (code, signal) => {
      if (child === current) listen(undefined);
      if (stopping) return;
      lastFailure = failed ?? `it exited (${signal ?? `code ${code}`})`;
      if (settle) {
        settle.reject(new Error(lastFailure));
        settle = undefined;
      }
      const delay = Math.min(MAX_RESTART_DELAY_MS, 1_000 * 2 ** failures++);
      log.error({ code, signal, reason: lastFailure }, `the MCP server exited: ${lastFailure}; starting it again in ${delay / 1000} s`);
      restart = setTimeout(() => {
        if (!stopping) spawn();
      }, delay);
    });
  };
  spawn();

  const url = () => config.mcp.upstreamUrl ?? listening;
  return {
    current: () => (child && child.exitCode === null && child.signalCode === null && child.connected ? child : undefined),
    url,
    onUrlChange: (listener) => void listeners.push(listener),
    started,
    async notAnswering() {
      const upstream = url();
      if (!upstream) return lastFailure ? `the MCP server is not running: ${lastFailure}` : 'the MCP server is starting';
      try {
        const res = await fetch(`${upstream}/health`, { signal: AbortSignal.timeout(2_000) });
        await res.body?.cancel();
        return res.ok ? null : `the MCP server answered ${res.status}`;
      } catch (err) {
        return `the MCP server does not answer (${(err as Error).message})`;
      }
    },
    async stop() {
      stopping = true;
      clearTimeout(restart);
      const current = child;
      if (!current || current.exitCode !== null || current.signalCode !== null) return;
      await new Promise<void>((resolve) => {
        const kill = setTimeout(() => current.kill('SIGKILL'), 10_000);
        current.once('exit', () => {
          clearTimeout(kill);
          resolve();
        });
        current.kill('SIGTERM');
      });
    },
  };
}
