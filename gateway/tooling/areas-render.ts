// Rendering an area file (sql/areas/<area>.sql) from the catalog: the
// hand-written prose at its top kept, then the area's code and pgTAP files,
// its tables and types, and its functions by schema, views, tables (comments,
// row-level security, policies, grants, triggers), types and schemas, each
// as the SQL that makes it so. `npm run db -- areas --write` (areas.ts).
import fs from 'node:fs';
import path from 'node:path';
import { AREA_SCHEMAS, type CatalogObject } from './areas-catalog.ts';
import { Placement, readAreaFiles, shown, AREAS_DIR, type AreaDef, type AreaMap } from './areas-map.ts';


const RULE = `-- ${'-'.repeat(77)}`;
const BANNER = `-- ${'='.repeat(77)}`;

const SCHEMA_SECTIONS: Record<string, string> = {
  api: 'Functions of api: what the gateway and the MCP server call, as the request\'s role',
  admin: 'Functions of admin: operator functions (psql, `npm run admin`)',
  app: 'Functions of app: helpers of policies and list functions',
  identity: 'Functions of identity: credential helpers',
  private: 'Functions of private: internal helpers and trigger functions (request roles run only those granted here)',
};

/** The hand-written prose of an existing area file: the lines between its title banner and `-- Code:`. */
export function areaProse(text: string | null): string[] {
  if (!text) return [];
  const lines = text.split('\n');
  const end = lines.findIndex((l) => l.startsWith('-- Code:'));
  if (lines[0] !== BANNER || lines[2] !== BANNER || end < 0) return [];
  const prose = lines.slice(3, end);
  while (prose.length > 0 && prose[0] === '--') prose.shift();
  while (prose.length > 0 && prose.at(-1) === '--') prose.pop();
  return prose;
}

const wrap = (words: string, indent: string, width = 80): string[] => {
  const lines: string[] = [];
  let line = indent;
  for (const word of words.split(' ')) {
    if (line.length > indent.length && line.length + 1 + word.length > width) {
      lines.push(line);
      line = indent;
    }
    line += (line.length > indent.length ? ' ' : '') + word;
  }
  if (line.length > indent.length) lines.push(line);
  return lines;
};

/** The text of sql/areas/<area>.sql for these objects (all placed in that area). */
export function renderArea(area: AreaDef, objects: CatalogObject[], prose: string[]): string {
  const blocks = new Map<string, CatalogObject[]>();
  const blockKey = (o: CatalogObject) => `${o.block.kind}\u0000${o.block.name}`;
  for (const o of objects) blocks.set(blockKey(o), [...(blocks.get(blockKey(o)) ?? []), o]);
  for (const list of blocks.values()) list.sort((a, b) => (a.rank < b.rank ? -1 : a.rank > b.rank ? 1 : a.key < b.key ? -1 : 1));
  const ofKind = (kind: string) => [...blocks.entries()].filter(([k]) => k.startsWith(`${kind}\u0000`)).map(([, list]) => list);

  // Tables in the order the map lists them exactly, then by name.
  const listed = (name: string) => {
    const i = area.objects.indexOf(name);
    return i < 0 ? Number.MAX_SAFE_INTEGER : i;
  };
  const mapNameOf = (list: CatalogObject[]) => list[0]!.mapName;
  const byName = (a: CatalogObject[], b: CatalogObject[]) => (a[0]!.block.name < b[0]!.block.name ? -1 : 1);
  const tables = ofKind('table').sort((a, b) => listed(mapNameOf(a)) - listed(mapNameOf(b)) || byName(a, b));
  const types = ofKind('type').sort(byName);
  const views = ofKind('view').sort(byName);
  const schemas = ofKind('schema').sort(byName);
  const functions = ofKind('function').sort(byName);

  const header = [
    BANNER,
    `-- ${area.title}`,
    BANNER,
    ...(prose.length > 0 ? prose : ['-- (What this area is, in a few lines: `npm run db -- areas --write` keeps this text.)']),
    '--',
    ...wrap(`-- Code: ${area.code.length > 0 ? area.code.join(', ') : '(none)'}`, '', 80).map((l, i) => (i === 0 ? l : `--   ${l}`)),
    ...wrap(`-- pgTAP: ${area.tests.length > 0 ? area.tests.join(', ') : '(none)'}`, '', 80).map((l, i) => (i === 0 ? l : `--   ${l}`)),
  ];
  if (tables.length > 0) {
    header.push('--', '-- Its tables (created and altered by the migrations; their comments, row-level');
    header.push('-- security, policies, grants and triggers are below):');
    header.push(...wrap(tables.map((t) => t[0]!.block.name).join(', '), '--   '));
  }
  if (types.length > 0) {
    header.push('--', '-- Its types (made by the migrations):');
    header.push(...wrap(types.map((t) => t[0]!.block.name).join(', '), '--   '));
  }
  header.push(
    '--',
    '-- The current definition of every function, view, policy, trigger, grant and',
    '-- comment of this area. To change a rule: edit it here, then',
    '-- `npm run db -- areas --diff` writes its migration (docs/dba.md, "Changing a',
    '-- rule"). CI (`npm run db -- areas --check`) fails while this file and the',
    '-- migrated database disagree. `npm run db -- areas --write` renders all below',
    '-- `-- Code:` again from a freshly migrated database.',
    BANNER,
  );

  const sections: string[] = [];
  const section = (title: string, lists: CatalogObject[][], label?: (list: CatalogObject[]) => string) => {
    const rendered = lists
      .map((list) => {
        const statements = list.map((o) => o.statement).filter((s) => s !== '');
        if (statements.length === 0) return '';
        return [...(label ? [label(list)] : []), ...statements].join('\n');
      })
      .filter((s) => s !== '');
    if (rendered.length === 0) return;
    sections.push([RULE, ...wrap(title, '-- '), RULE, '', rendered.join('\n\n')].join('\n'));
  };
  for (const schema of AREA_SCHEMAS) {
    section(SCHEMA_SECTIONS[schema] ?? `Functions of ${schema}`, functions.filter((f) => f[0]!.block.schema === schema));
  }
  section('Views', views);
  section('Tables: comments, row-level security, policies, grants, triggers', tables, (list) => `-- ${list[0]!.block.name}`);
  section('Types: comments', types);
  section('Schemas: comments and grants', schemas, (list) => `-- schema ${list[0]!.block.name}`);
  return `${header.join('\n')}\n\n${sections.join('\n\n')}\n`;
}

// ---------------------------------------------------------------------------
// --write

/** Renders every area file from the catalog of a migrated database; returns the problems (unplaced objects), writing nothing then. */
export function writeAreas(map: AreaMap, migrated: CatalogObject[], dir = AREAS_DIR): { written: string[]; problems: string[] } {
  const placement = new Placement(map);
  const byArea = new Map<string, CatalogObject[]>(map.areas.map((a) => [a.name, []]));
  const problems = new Set<string>();
  for (const o of migrated) {
    const placed = placement.place(o.mapName);
    if ('problem' in placed) problems.add(placed.problem);
    else byArea.get(placed.area)!.push(o);
  }
  if (problems.size > 0) return { written: [], problems: [...problems] };
  fs.mkdirSync(dir, { recursive: true });
  const written: string[] = [];
  for (const area of map.areas) {
    const file = path.join(dir, `${area.name}.sql`);
    const previous = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : null;
    const text = renderArea(area, byArea.get(area.name)!, areaProse(previous));
    if (text !== previous) {
      fs.writeFileSync(file, text);
      written.push(file);
    }
  }
  for (const f of readAreaFiles(dir)) {
    if (!byArea.has(f.area)) problems.add(`${shown(f.file)}: no area "${f.area}" in sql/areas/areas.json (delete the file, or add the area)`);
  }
  return { written, problems: [...problems] };
}
