// The architecture, checked on the import graph (madge): the code both
// processes share (gateway/core) imports no front door, and its rooms
// (process, web, database, auth) import only downwards; the MCP server
// imports only gateway/core; the gateway never imports the MCP server (it
// starts it by its file path); the HTTP layer imports no route, realtime
// module or composition root; and there is no import cycle anywhere.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import madge from 'madge';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../support/processes.ts';

const graph = await madge(['gateway', 'mcp-server', 'test'].map((dir) => path.join(projectRoot, dir)), {
  baseDir: projectRoot,
  fileExtensions: ['ts'],
  tsConfig: path.join(projectRoot, 'tsconfig.json'),
});
const imports = Object.entries(graph.obj());

/** The rooms of gateway/core, lowest first: a room may import only itself and the rooms before it. */
const CORE_ROOMS = ['process', 'web', 'database', 'auth'] as const;

/** Every import from a file under `from` to a file matching `to`. */
function edges(from: string, to: (target: string) => boolean): string[] {
  return imports.flatMap(([file, targets]) => (file.startsWith(from) ? targets.filter(to).map((t) => `${file} -> ${t}`) : []));
}

/** The TypeScript files of both processes, relative, with forward slashes. */
const sources = ['gateway', 'mcp-server'].flatMap((dir) =>
  fs
    .readdirSync(path.join(projectRoot, dir), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts'))
    .map((f) => path.posix.join(dir, f.split(path.sep).join('/'))),
);

/** The files, other than `allowed`, whose text matches `pattern`. */
const found = (pattern: RegExp, allowed: string[]) =>
  sources.filter((file) => !allowed.includes(file) && pattern.test(fs.readFileSync(path.join(projectRoot, file), 'utf8')));

/** The modules that declare routes (defineRoute). */
const routeModules = new Set(sources.filter((file) => /\bdefineRoute\(/.test(fs.readFileSync(path.join(projectRoot, file), 'utf8'))));

/** The rooms of the gateway that hold their own doors: services at the top, route modules below. */
const ROOMS = { 'gateway/auth/': ['gateway/auth/api/', 'gateway/auth/v1/'], 'gateway/storage/': ['gateway/storage/routes/'] } as const;
const inRoom = (file: string) => Object.keys(ROOMS).some((room) => file.startsWith(room));

describe('the layout', () => {
  it('has no import cycle', () => {
    expect(graph.circular()).toEqual([]);
  });

  it('gateway/core imports no front door (HTTP layer, routes, realtime, jobs, MCP server, composition roots)', () => {
    expect(edges('gateway/core/', (t) => !t.startsWith('gateway/core/'))).toEqual([]);
  });

  it('gateway/core is four rooms, each importing only itself and the rooms below it (process ← web ← database ← auth)', () => {
    const core = path.join(projectRoot, 'gateway', 'core');
    const rooms = fs.readdirSync(core, { withFileTypes: true });
    expect(rooms.filter((entry) => !entry.isDirectory()).map((entry) => entry.name)).toEqual([]);
    expect(rooms.map((entry) => entry.name).sort()).toEqual([...CORE_ROOMS].sort());
    const roomOf = (file: string) => CORE_ROOMS.indexOf(file.split('/')[2] as (typeof CORE_ROOMS)[number]);
    expect(edges('gateway/core/', (t) => t.startsWith('gateway/core/')).filter((edge) => {
      const [from, to] = edge.split(' -> ') as [string, string];
      return roomOf(to) > roomOf(from);
    })).toEqual([]);
  });

  it('the MCP server imports only gateway/core of the gateway', () => {
    expect(edges('mcp-server/', (t) => t.startsWith('gateway/') && !t.startsWith('gateway/core/'))).toEqual([]);
  });

  it('nothing under gateway/ imports the MCP server', () => {
    expect(edges('gateway/', (t) => t.startsWith('mcp-server/'))).toEqual([]);
  });

  it('the HTTP layer imports no route, realtime module or composition root', () => {
    const above = (t: string) => /^gateway\/(routes|realtime|jobs)\//.test(t) || /^gateway\/[^/]+\.ts$/.test(t);
    expect(edges('gateway/http/', above)).toEqual([]);
  });

  it('the request path does not load the development tooling', () => {
    const requestPath = (f: string) => /^gateway\/(http|routes|realtime)\//.test(f);
    expect(imports.filter(([file]) => requestPath(file)).flatMap(([file, targets]) => targets.filter((t) => t.startsWith('gateway/tooling/')).map((t) => `${file} -> ${t}`))).toEqual([]);
  });

  it("the caller's claims and the bearer header are each made in one place (core/auth/identity.ts, core/auth/bearer.ts)", () => {
    // A claims object is a role given as a value (not a type); jwt.ts signs the access token's own.
    expect(found(/\brole:\s*'(anon|authenticated|service_role)'\s*[,})]/, ['gateway/core/auth/identity.ts', 'gateway/core/auth/jwt.ts'])).toEqual([]);
    expect(found(/Bearer\\s/, ['gateway/core/auth/bearer.ts'])).toEqual([]);
  });

  it("a transaction takes on its caller in one place, and a request's transaction is opened in one (core/database/transaction.ts asCaller, core/database/request-transaction.ts)", () => {
    // role and request.jwt.claims are set by asCaller alone, for the request's transaction and the realtime hub's reads.
    expect(found(/set_config\(\s*'(role|request\.jwt\.claims)'/, ['gateway/core/database/transaction.ts'])).toEqual([]);
    // The primary or a replica, and the commit's consistency token, for the REST routes and the MCP tools alike.
    expect(found(/\.needOf\(|\.noteCommit\(/, ['gateway/core/database/request-transaction.ts'])).toEqual([]);
    // A caller's call opens its transaction there; the websocket's own calls (its registration, the columns) run on the primary.
    expect(found(/\bwithClaims\(/, ['gateway/core/database/transaction.ts', 'gateway/core/database/request-transaction.ts', 'gateway/realtime/websocket.ts'])).toEqual([]);
  });

  it('sign-in (gateway/auth/) and storage (gateway/storage/) are rooms: their route modules import the room, never another route module', () => {
    const between = imports.flatMap(([file, targets]) =>
      routeModules.has(file) ? targets.filter((t) => routeModules.has(t) && (inRoom(file) || inRoom(t))).map((t) => `${file} -> ${t}`) : [],
    );
    expect(between).toEqual([]);
    // The services below the doors import none of them; the HTTP layer and the core import neither room.
    for (const [room, doors] of Object.entries(ROOMS)) {
      const door = (t: string) => doors.some((d) => t.startsWith(d));
      expect(edges(room, door).filter((edge) => !door(edge))).toEqual([]);
    }
    expect(edges('gateway/http/', inRoom)).toEqual([]);
    expect(edges('gateway/core/', inRoom)).toEqual([]);
    // Each door is a folder of route modules (and what only they share).
    for (const doors of Object.values(ROOMS)) {
      for (const d of doors) expect(sources.filter((f) => f.startsWith(d) && routeModules.has(f)).length, d).toBeGreaterThan(0);
    }
  });

  it("is the README's (Where things live): every path it names exists, and it names every folder of gateway/ and of its rooms", () => {
    const readme = fs.readFileSync(path.join(projectRoot, 'README.md'), 'utf8');
    const section = readme.slice(readme.indexOf('## Where things live'));
    const block = /```\n([\s\S]*?)```/.exec(section)![1]!;
    const named = new Set<string>();
    const folders: string[] = [];
    for (const line of block.split('\n')) {
      // An entry: its names (`a.ts, b.ts` or `folder/`) at an indentation of two spaces a level, then its description.
      const entry = /^((?: {2})*)([\w.-]+\/?(?:, [\w.-]+\/?)*)(?: {2,}|$)/.exec(line);
      if (!entry) continue;
      const depth = entry[1]!.length / 2;
      folders.length = depth;
      for (const name of entry[2]!.split(', ')) named.add(path.posix.join(...folders, name));
      if (entry[2]!.endsWith('/')) folders.push(entry[2]!.slice(0, -1));
    }
    expect([...named].filter((p) => !fs.existsSync(path.join(projectRoot, p)))).toEqual([]);
    const foldersOf = (dir: string) =>
      fs
        .readdirSync(path.join(projectRoot, dir), { withFileTypes: true })
        .filter((e) => e.isDirectory() && !e.name.startsWith('.') && e.name !== 'node_modules')
        .map((e) => `${dir === '.' ? '' : `${dir}/`}${e.name}/`);
    const top = spawnSync('git', ['ls-files'], { cwd: projectRoot, encoding: 'utf8' })
      .stdout.split('\n')
      .filter((f) => f.includes('/') && !f.startsWith('.'))
      .map((f) => `${f.split('/')[0]}/`);
    const expected = new Set([...top, ...['gateway', 'gateway/core', ...Object.keys(ROOMS).map((r) => r.slice(0, -1))].flatMap(foldersOf)]);
    expect([...expected].filter((folder) => !named.has(folder)).sort()).toEqual([]);
  });

  it('is described in docs/development.md: its Layout names every module of gateway/', () => {
    const doc = fs.readFileSync(path.join(projectRoot, 'docs', 'development.md'), 'utf8');
    const layout = doc.slice(doc.indexOf('## Layout'), doc.indexOf('\n## ', doc.indexOf('## Layout') + 1));
    const words = new Set(layout.match(/[a-z][a-z0-9-]*(\.ts)?/g));
    const modules = fs
      .readdirSync(path.join(projectRoot, 'gateway'), { recursive: true, encoding: 'utf8' })
      .filter((f) => f.endsWith('.ts'))
      .map((f) => (f.includes('/') ? path.basename(f, '.ts') : f));
    expect(modules.filter((m) => !words.has(m))).toEqual([]);
  });
});
