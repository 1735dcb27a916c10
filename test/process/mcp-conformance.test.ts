// The MCP conformance suite (@modelcontextprotocol/conformance, pinned in
// package.json) against /mcp through the gateway: its active server scenarios,
// at the revisions it tests (2025-06-18 and 2025-11-25). The suite needs Node
// 22 or later (fs.globSync), so it runs under Node 22 from the npm registry's
// `node` package (`npm exec --package=node@22`), whatever Node runs the tests.
//
// The suite's client sends no credential, so it talks to a forwarder on
// 127.0.0.1 that adds an agent's API token and names the gateway's port in
// Host and Origin when the suite names the forwarder's (so its DNS-rebinding
// scenario still sees a foreign Host refused). Scenarios for features this
// server does not offer are listed in conformance-baseline.yml; the suite
// fails on any other failure and on a listed scenario that passes.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { projectRoot } from '../../gateway/core/process/config.ts';
import { baseUrl } from '../helpers.ts';
import { createAgent } from '../mcp/support.ts';

const SUITE = path.join(projectRoot(), 'node_modules', '@modelcontextprotocol', 'conformance', 'dist', 'index.js');
const BASELINE = path.join(projectRoot(), 'test', 'mcp', 'conformance-baseline.yml');

let forwarder: http.Server;
let forwarderUrl: string;

beforeAll(async () => {
  const agent = await createAgent('conformance');
  const gateway = new URL(baseUrl);
  forwarder = http.createServer((req, res) => {
    const own = [`127.0.0.1:${port()}`, `localhost:${port()}`];
    const headers = { ...req.headers, authorization: `Bearer ${agent.apiToken}` };
    if (own.includes(headers.host ?? '')) headers.host = `127.0.0.1:${gateway.port}`;
    if (own.some((h) => headers.origin === `http://${h}`)) headers.origin = `http://127.0.0.1:${gateway.port}`;
    const upstream = http.request({ host: gateway.hostname, port: gateway.port, path: req.url, method: req.method, headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => forwarder.listen(0, '127.0.0.1', () => resolve()));
  forwarderUrl = `http://127.0.0.1:${port()}/mcp`;
});

afterAll(async () => {
  forwarder.closeAllConnections();
  await new Promise((resolve) => forwarder.close(resolve));
});

function port(): number {
  return (forwarder.address() as { port: number }).port;
}

/** Runs the suite under Node 22 from the registry; its exit code and output. */
function runSuite(): Promise<{ code: number | null; output: string; node: string }> {
  const results = fs.mkdtempSync(path.join(os.tmpdir(), 'mcp-conformance-'));
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const args = ['exec', '--yes', '--package=node@22', '--', 'node', '-e', 'process.stdout.write(process.version)'];
  return new Promise((resolve, reject) => {
    // First which Node runs it, then the suite.
    const version = spawn(npm, args, { cwd: projectRoot(), stdio: ['ignore', 'pipe', 'pipe'] });
    let node = '';
    version.stdout.on('data', (d) => (node += String(d)));
    version.on('error', reject);
    version.on('exit', () => {
      const suite = spawn(
        npm,
        ['exec', '--yes', '--package=node@22', '--', 'node', SUITE, 'server', '--url', forwarderUrl, '--expected-failures', BASELINE, '-o', results],
        { cwd: projectRoot(), stdio: ['ignore', 'pipe', 'pipe'] },
      );
      let text = '';
      suite.stdout.on('data', (d) => (text += String(d)));
      suite.stderr.on('data', (d) => (text += String(d)));
      suite.on('error', reject);
      suite.on('exit', (code) => {
        fs.rmSync(results, { recursive: true, force: true });
        resolve({ code, output: text, node: node.trim() });
      });
    });
  });
}

describe('the MCP conformance suite (server scenarios) under Node 22', () => {
  it('passes every scenario of what this server offers, and fails only the baseline ones', async () => {
    const run = await runSuite();
    const output = run.output;
    expect(run.node).toMatch(/^v22\./);
    const summary = output.slice(output.indexOf('=== SUMMARY ==='));
    expect(run.code, summary || output.slice(-4000)).toBe(0);
    // What it checks of this server, by name (so a scenario that silently disappears is noticed).
    for (const scenario of ['server-initialize', 'ping', 'tools-list', 'tools-call-error', 'server-sse-multiple-streams', 'dns-rebinding-protection']) {
      expect(summary).toMatch(new RegExp(`✓ ${scenario}: \\d+ passed, 0 failed`));
    }
  }, 240_000);
});
