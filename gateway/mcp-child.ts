// `npm start` runs the MCP server as a child process beside the gateway (the
// gateway proxies /mcp to it). The child has an IPC channel and exits when
// the parent goes away (even on SIGKILL), so it is never orphaned; if it
// dies on its own it is restarted after a second. stop() ends it with
// SIGTERM (SIGKILL after 10 s).
import { fork, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { projectRoot, type Config } from './core/process/config.ts';
import type { Logger } from './core/process/log.ts';

export interface McpChild {
  stop(): Promise<void>;
  /** The running child (its metrics are asked over its IPC channel), if any. */
  current(): ChildProcess | undefined;
  /** Null when the MCP server answers GET /health within 2 s; else why not (the admin server's /ready). */
  notAnswering(): Promise<string | null>;
}

export function startMcpChild(config: Config, databaseUrl: string, log: Logger): McpChild {
  let child: ChildProcess | undefined;
  let stopping = false;
  let restart: NodeJS.Timeout | undefined;

  const spawn = () => {
    child = fork(path.join(projectRoot(), 'mcp-server', 'main.ts'), [], {
      execArgv: process.execArgv,
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      env: {
        ...process.env,
        DATABASE_URL: databaseUrl,
        PORT: String(config.port),
        PUBLIC_URL: config.publicUrl,
        MCP_PORT: String(config.mcp.port),
        MCP_HOST: config.mcp.host,
        // It believes X-Forwarded-For only from this gateway (loopback, or
        // MCP_PROXY_SECRET when set), whatever TRUST_PROXY says for the gateway.
      },
    });
    const current = child;
    current.on('exit', (code, signal) => {
      if (stopping) return;
      log.error({ code, signal }, 'the MCP server exited; restarting it in 1 s');
      restart = setTimeout(() => {
        if (!stopping) spawn();
      }, 1_000);
    });
  };
  spawn();

  return {
    current: () => (child && child.exitCode === null && child.signalCode === null && child.connected ? child : undefined),
    async notAnswering() {
      try {
        const res = await fetch(`${config.mcp.upstreamUrl}/health`, { signal: AbortSignal.timeout(2_000) });
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
