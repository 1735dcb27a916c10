// The register of error codes (gateway/core/web/error-codes.ts) against what can
// answer a code: the SQL migrations' `raise ... using errcode = 'PTxxx',
// hint = 'code'` (core/web/errors.ts turns the hint into the `error` code and the
// digits into the status), the route table's declared responses and the
// pipeline's (http/openapi.ts routeErrors), the gateway's and MCP server's
// sources, and the MCP SDK's OAuth errors. No entry may be dead, and
// docs/errors.md must be what `npm run docs:errors` writes.
import fs from 'node:fs';
import path from 'node:path';
import { OAUTH_ERRORS } from '@modelcontextprotocol/sdk/server/auth/errors.js';
import { describe, expect, it } from 'vitest';
import { routes } from '../../gateway/app.ts';
import { projectRoot } from '../../gateway/core/process/config.ts';
import { ERROR_CODES, errorCodeEntries, isErrorCode } from '../../gateway/core/web/error-codes.ts';
import { openApiPath, routeErrors } from '../../gateway/http/openapi.ts';
import { ERROR_DOCS_FILE, renderErrorDocs } from '../../gateway/tooling/error-docs.ts';

const root = projectRoot();

function files(dir: string, extension: string): string[] {
  const full = path.join(root, dir);
  if (!fs.existsSync(full)) return [];
  return (fs.readdirSync(full, { recursive: true }) as string[])
    .filter((name) => name.endsWith(extension))
    .map((name) => path.join(full, name));
}

interface Raised {
  file: string;
  errcode: string | null;
  hint: string;
}

/** Every `using errcode = '...', hint = '...'` (in any order) of the migrations, committed and current. */
function raisedHints(): { raised: Raised[]; hintAssignments: number } {
  const raised: Raised[] = [];
  let hintAssignments = 0;
  for (const file of [...files('sql/migrations/committed', '.sql'), ...files('sql/migrations/current', '.sql')]) {
    // Comments and string constants are not options; dropping comments keeps a
    // stray "hint = " in prose from being counted.
    const text = fs.readFileSync(file, 'utf8').replace(/--[^\n]*/g, '');
    hintAssignments += (text.match(/\bhint\s*=/gi) ?? []).length;
    for (const using of text.matchAll(/\busing\s+((?:\s*,?\s*[a-z_]+\s*=\s*'(?:[^']|'')*')+)/gi)) {
      const options = Object.fromEntries([...using[1]!.matchAll(/([a-z_]+)\s*=\s*'((?:[^']|'')*)'/gi)].map((m) => [m[1]!.toLowerCase(), m[2]!]));
      if (options.hint !== undefined) raised.push({ file: path.relative(root, file), errcode: options.errcode ?? null, hint: options.hint });
    }
  }
  return { raised, hintAssignments };
}

const { raised, hintAssignments } = raisedHints();
/** The hints that become `error` codes (core/web/errors.ts toHttpError: PTxxx and a snake_case hint). */
const codeHints = raised.filter((r) => r.errcode !== null && /^PT\d{3}$/.test(r.errcode) && /^[a-z][a-z0-9_]*$/.test(r.hint));

describe('the register of error codes', () => {
  it('reads every hint of the migrations (no hint is set in a form the test does not parse)', () => {
    expect(raised.length).toBeGreaterThan(100);
    expect(raised.length).toBe(hintAssignments);
  });

  it('holds every snake_case hint the SQL raises with a PTxxx SQLSTATE, with that status', () => {
    const missing = codeHints.filter((r) => !isErrorCode(r.hint)).map((r) => `${r.hint} (${r.errcode}, ${r.file})`);
    expect(missing, 'add these codes to gateway/core/web/error-codes.ts').toEqual([]);
    const wrongStatus = codeHints
      .filter((r) => isErrorCode(r.hint) && !(ERROR_CODES[r.hint].status as readonly number[]).includes(Number(r.errcode!.slice(2))))
      .map((r) => `${r.hint} raised as ${r.errcode} in ${r.file}`);
    expect(wrongStatus, 'add the status to the code in gateway/core/web/error-codes.ts').toEqual([]);
  });

  it('holds every code a route can answer in the Error body, with the status it answers it at', () => {
    const problems: string[] = [];
    for (const route of routes) {
      for (const [status, list] of routeErrors(route)) {
        for (const code of list.flatMap((entry) => [...entry.codes])) {
          if (!isErrorCode(code)) problems.push(`${route.method.toUpperCase()} ${route.path}: ${code} is not registered`);
          else if (!(ERROR_CODES[code].status as readonly number[]).includes(status)) {
            problems.push(`${route.method.toUpperCase()} ${openApiPath(route.path)}: ${code} at ${status}, registered with ${ERROR_CODES[code].status.join(', ')}`);
          }
        }
      }
    }
    expect(problems).toEqual([]);
  });

  it('has no dead entry: each code is answered somewhere, or its note says why not', () => {
    const byRoutes = new Set(routes.flatMap((route) => [...routeErrors(route).values()].flatMap((list) => list.flatMap((entry) => [...entry.codes]))));
    const bySql = new Set(codeHints.map((r) => r.hint));
    const sources = [...files('gateway', '.ts'), ...files('mcp-server', '.ts')]
      .filter((file) => !file.endsWith(path.join('core', 'web', 'error-codes.ts')) && !file.endsWith(path.join('tooling', 'error-docs.ts')))
      .map((file) => fs.readFileSync(file, 'utf8'))
      .join('\n');
    const oauth = new Set(Object.keys(OAUTH_ERRORS));
    const dead = errorCodeEntries()
      .filter(([code, entry]) => {
        if (entry.note || byRoutes.has(code) || bySql.has(code) || sources.includes(`'${code}'`)) return false;
        return !(entry.also?.includes('oauth') && oauth.has(code));
      })
      .map(([code]) => code);
    expect(dead, 'remove these from gateway/core/web/error-codes.ts, or say in `note` why they stay').toEqual([]);
  });

  it('names as OAuth codes only codes of the OAuth errors the MCP SDK answers', () => {
    const oauth = new Set(Object.keys(OAUTH_ERRORS));
    const unknown = errorCodeEntries().filter(([code, entry]) => entry.also?.includes('oauth') && !oauth.has(code)).map(([code]) => code);
    expect(unknown).toEqual([]);
  });

  it('docs/errors.md is what `npm run docs:errors` writes', () => {
    const current = fs.existsSync(ERROR_DOCS_FILE) ? fs.readFileSync(ERROR_DOCS_FILE, 'utf8') : '';
    expect(current === renderErrorDocs(), 'docs/errors.md is stale: run `npm run docs:errors`').toBe(true);
  });
});
