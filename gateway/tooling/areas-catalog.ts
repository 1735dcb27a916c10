// The rules of the database as the area files state them, read from the
// catalog (`npm run db -- areas`, gateway/tooling/areas.ts): every function,
// view, policy, trigger, row-level-security switch, grant and comment of the
// application schemas, each with the text that is compared (its definition)
// and the SQL that makes it so (its statement), the SQL that removes it, and
// the name the area map places it by. Tables, indexes, constraints, types,
// sequences and default privileges stay in the migrations: only their
// comments and grants are read here.
//
// Everything is rendered with search_path = pg_catalog, so every name outside
// pg_catalog is written qualified and the text does not depend on the session.
import type postgres from 'postgres';

/** The application schemas (the Supabase compatibility layer, auth and extensions, is created only where missing: not ours to state). */
export const AREA_SCHEMAS = ['api', 'admin', 'app', 'identity', 'private'] as const;

export type ObjectKind = 'function' | 'view' | 'policy' | 'trigger' | 'rls' | 'grants' | 'comment' | 'type';
export type BlockKind = 'function' | 'view' | 'table' | 'type' | 'schema';

/** One definition of the catalog that an area file states. */
export interface CatalogObject {
  kind: ObjectKind;
  /** Unique: `function api.task_link(uuid,uuid,jsonb)`, `policy "…" on app.tasks`, `grants on table app.tasks`, `comment on column app.tasks.meta`. */
  key: string;
  /** The name the area map places it by: `api.task_link`, `app.tasks` (for its policies, triggers, grants and comments), `api` (a schema). */
  mapName: string;
  /** Where it is written in its area file: with its function, view, table, type or schema. */
  block: { kind: BlockKind; schema: string; name: string };
  /** Order inside the block. */
  rank: string;
  /** What is compared. */
  definition: string;
  /** The SQL that makes it so; empty when there is nothing to state (row-level security off). */
  statement: string;
  /** The SQL that removes it (a function is dropped; a grant revoked; a comment set to null). */
  removal: string;
  /** Grants only: one line per privilege, for revoking and granting the difference. */
  grants?: GrantLine[];
  /** Grants only: how the object is named in GRANT (`function api.x(uuid)`, `table app.t`, `schema api`). */
  grantTarget?: string;
}

export interface GrantLine {
  grantee: string;
  privilege: string;
  column: string | null;
  grantable: boolean;
}

type Tx = postgres.TransactionSql;

// Functions and procedures of the schemas, without those an extension owns.
const FUNCTIONS = `
  select p.oid::regprocedure::text as sig, n.nspname as schema, p.proname as name, p.prokind::text as prokind,
         pg_get_functiondef(p.oid) as def
    from pg_proc p join pg_namespace n on n.oid = p.pronamespace
   where n.nspname = any($1::text[]) and p.prokind in ('f', 'p')
     and not exists (select from pg_depend d where d.classid = 'pg_proc'::regclass and d.objid = p.oid and d.deptype = 'e')
   order by 1`;

const VIEWS = `
  select n.nspname as schema, c.relname as name, format('%I.%I', n.nspname, c.relname) as qualified,
         format('create or replace view %I.%I%s as%s', n.nspname, c.relname,
                case when c.reloptions is not null then ' with (' || array_to_string(c.reloptions, ', ') || ')' else '' end,
                E'\\n' || rtrim(pg_get_viewdef(c.oid, true), E';\\n ')) || ';' as def
    from pg_class c join pg_namespace n on n.oid = c.relnamespace
   where n.nspname = any($1::text[]) and c.relkind = 'v'
     and not exists (select from pg_depend d where d.classid = 'pg_class'::regclass and d.objid = c.oid and d.deptype = 'e')
   order by 1, 2`;

const POLICIES = `
  select n.nspname as schema, c.relname as "table", pol.polname as name, format('%I.%I', n.nspname, c.relname) as qualified,
         format('policy %I on %I.%I', pol.polname, n.nspname, c.relname) as target,
         format(E'create policy %I on %I.%I\\n  as %s for %s to %s%s%s;',
                pol.polname, n.nspname, c.relname,
                case when pol.polpermissive then 'permissive' else 'restrictive' end,
                case pol.polcmd when 'r' then 'select' when 'a' then 'insert' when 'w' then 'update' when 'd' then 'delete' else 'all' end,
                (select string_agg(case when r = 0 then 'public' else quote_ident(a.rolname) end, ', ' order by case when r = 0 then 'public' else a.rolname::text end)
                   from unnest(pol.polroles) r left join pg_roles a on a.oid = r),
                coalesce(E'\\n  using (' || pg_get_expr(pol.polqual, pol.polrelid) || ')', ''),
                coalesce(E'\\n  with check (' || pg_get_expr(pol.polwithcheck, pol.polrelid) || ')', '')) as def
    from pg_policy pol join pg_class c on c.oid = pol.polrelid join pg_namespace n on n.oid = c.relnamespace
   where n.nspname = any($1::text[])
   order by 1, 2, 3`;

const TRIGGERS = `
  select n.nspname as schema, c.relname as "table", t.tgname as name, format('%I.%I', n.nspname, c.relname) as qualified,
         quote_ident(t.tgname) as quoted,
         format('trigger %I on %I.%I', t.tgname, n.nspname, c.relname) as target,
         pg_get_triggerdef(t.oid, true) as def, t.tgenabled::text as enabled
    from pg_trigger t join pg_class c on c.oid = t.tgrelid join pg_namespace n on n.oid = c.relnamespace
   where n.nspname = any($1::text[]) and not t.tgisinternal
   order by 1, 2, 3`;

const TABLES = `
  select n.nspname as schema, c.relname as name, format('%I.%I', n.nspname, c.relname) as qualified, c.relrowsecurity as rls, c.relforcerowsecurity as force
    from pg_class c join pg_namespace n on n.oid = c.relnamespace
   where n.nspname = any($1::text[]) and c.relkind in ('r', 'p')
     and not exists (select from pg_depend d where d.classid = 'pg_class'::regclass and d.objid = c.oid and d.deptype = 'e')
   order by 1, 2`;

// Composite types, enums and domains: made by the migrations, listed here
// only so that each is placed in an area (and its comment written there).
const TYPES = `
  select n.nspname as schema, t.typname as name, format('%I.%I', n.nspname, t.typname) as qualified
    from pg_type t join pg_namespace n on n.oid = t.typnamespace
    left join pg_class c on c.oid = t.typrelid
   where n.nspname = any($1::text[]) and (t.typtype in ('e', 'd') or (t.typtype = 'c' and c.relkind = 'c'))
     and not exists (select from pg_depend d where d.classid = 'pg_type'::regclass and d.objid = t.oid and d.deptype = 'e')
   order by 1, 2`;

// The table a sequence belongs to (serial and identity columns), if any:
// its grants and comments are written with that table.
const OWNER_TABLE = `
  left join lateral (
    select tn.nspname as schema, t.relname as name
      from pg_depend d join pg_class t on t.oid = d.refobjid join pg_namespace tn on tn.oid = t.relnamespace
     where d.classid = 'pg_class'::regclass and d.objid = c.oid and d.refclassid = 'pg_class'::regclass and d.deptype in ('a', 'i')
     limit 1) o on c.relkind = 'S'`;

// Every privilege granted to someone other than the owner, one row each.
// block: the function (regprocedure) or the table, view or schema it is written with.
const GRANTS = `
  with targets as (
    select 'function' as kind, format('%s %s', case p.prokind when 'p' then 'procedure' else 'function' end, p.oid::regprocedure) as target,
           n.nspname as schema, format('%s.%s', n.nspname, p.proname) as map_name, p.oid::regprocedure::text as block,
           coalesce(p.proacl, acldefault('f', p.proowner)) as acl, p.proowner as owner, null::text as col
      from pg_proc p join pg_namespace n on n.oid = p.pronamespace
     where n.nspname = any($1::text[]) and p.prokind in ('f', 'p')
       and not exists (select from pg_depend d where d.classid = 'pg_proc'::regclass and d.objid = p.oid and d.deptype = 'e')
    union all
    select case c.relkind when 'S' then 'sequence' when 'v' then 'view' else 'table' end,
           format('%s %I.%I', case c.relkind when 'S' then 'sequence' else 'table' end, n.nspname, c.relname),
           coalesce(o.schema, n.nspname), format('%s.%s', coalesce(o.schema, n.nspname), coalesce(o.name, c.relname)),
           format('%I.%I', coalesce(o.schema, n.nspname), coalesce(o.name, c.relname)),
           coalesce(c.relacl, acldefault((case c.relkind when 'S' then 's' else 'r' end)::"char", c.relowner)), c.relowner, null
      from pg_class c join pg_namespace n on n.oid = c.relnamespace ${OWNER_TABLE}
     where n.nspname = any($1::text[]) and c.relkind in ('r', 'p', 'v', 'S')
       and not exists (select from pg_depend d where d.classid = 'pg_class'::regclass and d.objid = c.oid and d.deptype = 'e')
    union all
    select case c.relkind when 'v' then 'view' else 'table' end, format('table %I.%I', n.nspname, c.relname),
           n.nspname, format('%s.%s', n.nspname, c.relname), format('%I.%I', n.nspname, c.relname),
           a.attacl, c.relowner, quote_ident(a.attname)
      from pg_attribute a join pg_class c on c.oid = a.attrelid join pg_namespace n on n.oid = c.relnamespace
     where n.nspname = any($1::text[]) and c.relkind in ('r', 'p', 'v') and a.attnum > 0 and not a.attisdropped
       and a.attacl is not null
    union all
    select 'schema', format('schema %I', n.nspname), n.nspname, n.nspname::text, quote_ident(n.nspname),
           coalesce(n.nspacl, acldefault('n', n.nspowner)), n.nspowner, null
      from pg_namespace n
     where n.nspname = any($1::text[])
  )
  select t.kind, t.target, t.schema, t.map_name, t.block,
         case when x.grantee = 0 then 'public' else quote_ident(r.rolname) end as grantee,
         lower(x.privilege_type) as privilege, t.col as "column", x.is_grantable as grantable
    from targets t cross join lateral aclexplode(t.acl) x left join pg_roles r on r.oid = x.grantee
   where x.grantee <> t.owner
   order by t.target, grantee, t.col nulls first, privilege`;

// Every comment on an object of the schemas that an area file states.
const COMMENTS = `
  select d.description as text, x.kind, x.target, x.schema, x.block_kind, x.block, x.rank, x.map_name
    from pg_description d
    cross join lateral (
      select 'function' as kind, format('%s %s', case p.prokind when 'p' then 'procedure' else 'function' end, p.oid::regprocedure) as target,
             n.nspname as schema, 'function' as block_kind, p.oid::regprocedure::text as block, '1' as rank,
             format('%s.%s', n.nspname, p.proname) as map_name
        from pg_proc p join pg_namespace n on n.oid = p.pronamespace
       where d.classoid = 'pg_proc'::regclass and p.oid = d.objoid and d.objsubid = 0 and p.prokind in ('f', 'p')
         and not exists (select from pg_depend e where e.classid = 'pg_proc'::regclass and e.objid = p.oid and e.deptype = 'e')
      union all
      select case when d.objsubid > 0 then 'column' else 'relation' end,
             case when d.objsubid > 0 then format('column %I.%I.%I', n.nspname, c.relname, a.attname)
                  else format('%s %I.%I', case c.relkind when 'v' then 'view' when 'S' then 'sequence' when 'c' then 'type' else 'table' end, n.nspname, c.relname) end,
             coalesce(o.schema, n.nspname),
             case c.relkind when 'v' then 'view' when 'c' then 'type' else 'table' end,
             format('%I.%I', coalesce(o.schema, n.nspname), coalesce(o.name, c.relname)),
             case when c.relkind = 'S' then '8-' || c.relname when d.objsubid > 0 then '2-' || lpad(d.objsubid::text, 4, '0') else '1' end,
             format('%s.%s', coalesce(o.schema, n.nspname), coalesce(o.name, c.relname))
        from pg_class c join pg_namespace n on n.oid = c.relnamespace ${OWNER_TABLE}
        left join pg_attribute a on a.attrelid = c.oid and a.attnum = d.objsubid
       where d.classoid = 'pg_class'::regclass and c.oid = d.objoid and c.relkind in ('r', 'p', 'v', 'S', 'c')
         and not exists (select from pg_depend e where e.classid = 'pg_class'::regclass and e.objid = c.oid and e.deptype = 'e')
      union all
      select 'type', format('type %I.%I', n.nspname, t.typname), n.nspname, 'type', format('%I.%I', n.nspname, t.typname), '1',
             format('%s.%s', n.nspname, t.typname)
        from pg_type t join pg_namespace n on n.oid = t.typnamespace
       where d.classoid = 'pg_type'::regclass and t.oid = d.objoid
         and not exists (select from pg_depend e where e.classid = 'pg_type'::regclass and e.objid = t.oid and e.deptype = 'e')
      union all
      select 'schema', format('schema %I', n.nspname), n.nspname, 'schema', quote_ident(n.nspname), '1', n.nspname::text
        from pg_namespace n
       where d.classoid = 'pg_namespace'::regclass and n.oid = d.objoid
      union all
      select 'policy', format('policy %I on %I.%I', pol.polname, n.nspname, c.relname), n.nspname, 'table',
             format('%I.%I', n.nspname, c.relname), '4-' || pol.polname || '-comment', format('%s.%s', n.nspname, c.relname)
        from pg_policy pol join pg_class c on c.oid = pol.polrelid join pg_namespace n on n.oid = c.relnamespace
       where d.classoid = 'pg_policy'::regclass and pol.oid = d.objoid
      union all
      select 'trigger', format('trigger %I on %I.%I', t.tgname, n.nspname, c.relname), n.nspname, 'table',
             format('%I.%I', n.nspname, c.relname), '7-' || t.tgname || '-comment', format('%s.%s', n.nspname, c.relname)
        from pg_trigger t join pg_class c on c.oid = t.tgrelid join pg_namespace n on n.oid = c.relnamespace
       where d.classoid = 'pg_trigger'::regclass and t.oid = d.objoid and not t.tgisinternal
    ) x
   where x.schema = any($1::text[])
   order by x.target`;

const SQL_LITERAL = `select quote_literal(t) as q from unnest($1::text[]) with ordinality u(t, n) order by n`;


const PRIVILEGE_ORDER = ['select', 'insert', 'update', 'delete', 'truncate', 'references', 'trigger', 'maintain', 'execute', 'usage', 'create', 'temporary', 'connect'];
const privilegeRank = (p: string) => (PRIVILEGE_ORDER.indexOf(p) + 1 || 99);

/**
 * `grant select, insert (a, b) on table app.t to authenticated, anon;` for a
 * set of privileges of one object (or `revoke ... from ...`): one statement per
 * distinct set of privileges, naming every grantee that has exactly that set.
 */
export function grantStatements(target: string, lines: GrantLine[], verb: 'grant' | 'revoke' = 'grant'): string[] {
  const perGrantee = new Map<string, GrantLine[]>();
  for (const line of lines) {
    const key = `${line.grantee}\u0000${verb === 'grant' && line.grantable ? 'g' : ''}`;
    perGrantee.set(key, [...(perGrantee.get(key) ?? []), line]);
  }
  const byPrivileges = new Map<string, string[]>();
  for (const [key, own] of perGrantee) {
    const sorted = [...own].sort((a, b) => privilegeRank(a.privilege) - privilegeRank(b.privilege) || (a.column ?? '').localeCompare(b.column ?? ''));
    const whole = sorted.filter((l) => l.column === null).map((l) => l.privilege);
    const columns = new Map<string, string[]>();
    for (const l of sorted) if (l.column !== null) columns.set(l.privilege, [...(columns.get(l.privilege) ?? []), l.column]);
    const parts = [...whole, ...[...columns].map(([privilege, cols]) => `${privilege} (${cols.join(', ')})`)].join(', ');
    const [grantee, grantable] = key.split('\u0000') as [string, string];
    const group = `${parts}\u0000${grantable}`;
    byPrivileges.set(group, [...(byPrivileges.get(group) ?? []), grantee]);
  }
  return [...byPrivileges].map(([group, grantees]) => {
    const [parts, grantable] = group.split('\u0000') as [string, string];
    return `${verb} ${parts} on ${target} ${verb === 'grant' ? 'to' : 'from'} ${grantees.join(', ')}${grantable ? ' with grant option' : ''};`;
  });
}

/** Reads every definition the area files state, from the database `sql` is connected to. */
export async function readCatalog(sql: Tx, { schemas = AREA_SCHEMAS, only }: { schemas?: readonly string[]; only?: ObjectKind } = {}): Promise<CatalogObject[]> {
  const list = [...schemas];
  const q = <T extends object>(query: string) => sql.unsafe<T[]>(query, [list]) as unknown as Promise<T[]>;
  return inCatalogPath(sql, () => read(q, sql, only));
}

/**
 * Runs fn with search_path = pg_catalog in the transaction (so every name
 * outside pg_catalog comes out qualified), then puts back what it had.
 */
export async function inCatalogPath<T>(sql: Tx, fn: () => Promise<T>): Promise<T> {
  const [{ path }] = (await sql`select current_setting('search_path') as path`) as unknown as [{ path: string }];
  await sql`select set_config('search_path', 'pg_catalog', true)`;
  try {
    return await fn();
  } finally {
    await sql`select set_config('search_path', ${path}, true)`;
  }
}

async function read(q: <T extends object>(query: string) => Promise<T[]>, sql: Tx, only?: ObjectKind): Promise<CatalogObject[]> {
  const wanted = (kind: ObjectKind) => only === undefined || only === kind;
  const objects: CatalogObject[] = [];
  if (wanted('function')) objects.push(...(await functions(q)));
  if (wanted('view')) objects.push(...(await views(q)));
  if (wanted('type')) objects.push(...(await types(q)));
  if (wanted('rls')) objects.push(...(await rowLevelSecurity(q)));
  if (wanted('policy')) objects.push(...(await policies(q)));
  if (wanted('trigger')) objects.push(...(await triggers(q)));
  if (wanted('grants')) objects.push(...(await grants(q)));
  if (wanted('comment')) objects.push(...(await comments(q, sql)));
  return objects;
}

type Query = <T extends object>(query: string) => Promise<T[]>;

async function functions(q: Query): Promise<CatalogObject[]> {
  return (await q<{ sig: string; schema: string; name: string; prokind: string; def: string }>(FUNCTIONS)).map((f) => ({
    kind: 'function',
    key: `function ${f.sig}`,
    mapName: `${f.schema}.${f.name}`,
    block: { kind: 'function', schema: f.schema, name: f.sig },
    rank: '0',
    definition: f.def.trimEnd(),
    statement: `${f.def.trimEnd()};`,
    removal: `drop ${f.prokind === 'p' ? 'procedure' : 'function'} if exists ${f.sig};`,
  }));
}

async function views(q: Query): Promise<CatalogObject[]> {
  return (await q<{ schema: string; name: string; qualified: string; def: string }>(VIEWS)).map((v) => ({
    kind: 'view',
    key: `view ${v.qualified}`,
    mapName: `${v.schema}.${v.name}`,
    block: { kind: 'view', schema: v.schema, name: v.qualified },
    rank: '0',
    definition: v.def,
    statement: v.def,
    removal: `drop view if exists ${v.qualified};`,
  }));
}

async function types(q: Query): Promise<CatalogObject[]> {
  return (await q<{ schema: string; name: string; qualified: string }>(TYPES)).map((t) => ({
    kind: 'type',
    key: `type ${t.qualified}`,
    mapName: `${t.schema}.${t.name}`,
    block: { kind: 'type', schema: t.schema, name: t.qualified },
    rank: '0',
    definition: '',
    statement: '',
    removal: '',
  }));
}

async function rowLevelSecurity(q: Query): Promise<CatalogObject[]> {
  return (await q<{ schema: string; name: string; qualified: string; rls: boolean; force: boolean }>(TABLES)).map((t) => ({
    kind: 'rls',
    key: `row level security on ${t.qualified}`,
    mapName: `${t.schema}.${t.name}`,
    block: { kind: 'table', schema: t.schema, name: t.qualified },
    rank: '3',
    definition: `${t.rls ? 'enabled' : 'disabled'}${t.force ? ', forced' : ''}`,
    statement: [
      ...(t.rls ? [`alter table ${t.qualified} enable row level security;`] : []),
      ...(t.force ? [`alter table ${t.qualified} force row level security;`] : []),
    ].join('\n'),
    removal: t.rls || t.force ? `alter table ${t.qualified} disable row level security, no force row level security;` : '',
  }));
}

async function policies(q: Query): Promise<CatalogObject[]> {
  return (await q<{ schema: string; table: string; name: string; qualified: string; target: string; def: string }>(POLICIES)).map((p) => ({
    kind: 'policy',
    key: p.target,
    mapName: `${p.schema}.${p.table}`,
    block: { kind: 'table', schema: p.schema, name: p.qualified },
    rank: `4-${p.name}`,
    definition: p.def,
    statement: `drop ${p.target.replace(/^policy/, 'policy if exists')};\n${p.def}`,
    removal: `drop ${p.target.replace(/^policy/, 'policy if exists')};`,
  }));
}

async function triggers(q: Query): Promise<CatalogObject[]> {
  const rows = await q<{ schema: string; table: string; name: string; qualified: string; quoted: string; target: string; def: string; enabled: string }>(TRIGGERS);
  return rows.map((t) => {
    const state = { O: '', D: 'disable', R: 'enable replica', A: 'enable always' }[t.enabled] ?? '';
    return {
      kind: 'trigger',
      key: t.target,
      mapName: `${t.schema}.${t.table}`,
      block: { kind: 'table', schema: t.schema, name: t.qualified },
      rank: `7-${t.name}`,
      definition: `${t.def}${state ? ` (${state})` : ''}`,
      statement: [
        `drop ${t.target.replace(/^trigger/, 'trigger if exists')};`,
        `${t.def};`,
        ...(state ? [`alter table ${t.qualified} ${state} trigger ${t.quoted};`] : []),
      ].join('\n'),
      removal: `drop ${t.target.replace(/^trigger/, 'trigger if exists')};`,
    };
  });
}

async function grants(q: Query): Promise<CatalogObject[]> {
  const rows = await q<{
    kind: string; target: string; schema: string; map_name: string; block: string;
    grantee: string; privilege: string; column: string | null; grantable: boolean;
  }>(GRANTS);
  const byTarget = new Map<string, typeof rows>();
  for (const row of rows) byTarget.set(row.target, [...(byTarget.get(row.target) ?? []), row]);
  return [...byTarget].map(([target, list]) => {
    const first = list[0]!;
    const lines: GrantLine[] = list.map((r) => ({ grantee: r.grantee, privilege: r.privilege, column: r.column, grantable: r.grantable }));
    const blockKind: BlockKind = first.kind === 'function' || first.kind === 'view' || first.kind === 'schema' ? first.kind : 'table';
    return {
      kind: 'grants',
      key: `grants on ${target}`,
      mapName: first.map_name,
      block: { kind: blockKind, schema: first.schema, name: first.block },
      rank: first.kind === 'sequence' ? `8-${target}` : '5',
      definition: lines.map((l) => `${l.grantee} ${l.privilege}${l.column ? ` (${l.column})` : ''}${l.grantable ? ' with grant option' : ''}`).sort().join('\n'),
      statement: grantStatements(target, lines).join('\n'),
      removal: `revoke all on ${target} from ${[...new Set(lines.map((l) => l.grantee))].join(', ')};`,
      grants: lines,
      grantTarget: target,
    } satisfies CatalogObject;
  });
}

async function comments(q: Query, sql: Tx): Promise<CatalogObject[]> {
  const rows = await q<{ text: string; target: string; schema: string; block_kind: BlockKind; block: string; rank: string; map_name: string }>(COMMENTS);
  const literals = await sql.unsafe<{ q: string }[]>(SQL_LITERAL, [rows.map((c) => c.text)]);
  return rows.map((c, i) => ({
    kind: 'comment',
    key: `comment on ${c.target}`,
    mapName: c.map_name,
    block: { kind: c.block_kind, schema: c.schema, name: c.block },
    rank: c.rank,
    definition: c.text,
    statement: `comment on ${c.target} is ${literals[i]!.q};`,
    removal: `comment on ${c.target} is null;`,
  }));
}
