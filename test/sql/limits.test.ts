// The limits the edge copies from SQL (gateway/core/web/limits.ts, and the enums
// the routes export) agree with the database: each is compared with the check
// constraints and function bodies that enforce it, read from the catalog of
// the migrated test database. Changing a number on one side only fails here.
import { describe, expect, it } from 'vitest';
import { LIMITS } from '../../gateway/core/web/limits.ts';
import { EXTERNAL_PLATFORMS } from '../../gateway/routes/platform.ts';
import { TASK_STATUSES } from '../../gateway/routes/tasks.ts';
import { db } from '../helpers.ts';

/** Where SQL states a limit: a check constraint or a function body that must contain `text`, or a query that must answer it. */
type Witness =
  | { constraint: string; table: string; text: string }
  | { function: string; text: string }
  | { query: string; equals: number }
  | { constraint: string; table: string; atLeast: RegExp };

const check = (table: string, constraint: string, text: string): Witness => ({ table, constraint, text });
const body = (fn: string, text: string): Witness => ({ function: fn, text });
const textArray = (values: readonly string[]) => `ARRAY[${values.map((v) => `'${v}'::text`).join(', ')}]`;

const WITNESSES: Record<keyof typeof LIMITS, Witness[]> = {
  emailMaxLength: [
    check('identity.users', 'users_email_shape', `(length(email) <= ${LIMITS.emailMaxLength})`),
    body('api.platform_attendee_register', `length(normalised_email) > ${LIMITS.emailMaxLength}`),
  ],
  passwordMinLength: [
    // SQL sees a password only from psql (admin.create_user); the processes hash it after the edge checked it.
    body('private.create_account', `length(create_account.password) < ${LIMITS.passwordMinLength}`),
  ],
  profileNameMaxLength: [
    check('app.profiles', 'profiles_name_check', `(length(btrim(name)) <= ${LIMITS.profileNameMaxLength})`),
    body('private.create_account_with_hash', `length(chosen_name) > ${LIMITS.profileNameMaxLength}`),
    body('api.mcp_member_create', `length(chosen_name) > ${LIMITS.profileNameMaxLength}`),
    body('api.profile_update', `length(new_name) not between 1 and ${LIMITS.profileNameMaxLength}`),
  ],
  hatNameMaxLength: [check('app.hats', 'hats_name_check', `(length(btrim(name)) <= ${LIMITS.hatNameMaxLength})`)],
  hatDescriptionMaxLength: [check('app.hats', 'hats_description_check', `(length(description) <= ${LIMITS.hatDescriptionMaxLength})`)],
  connectionNotesMaxLength: [check('app.connections', 'connections_notes_check', `(length(notes) <= ${LIMITS.connectionNotesMaxLength})`)],
  connectionTagsMaxCount: [check('app.connections', 'connections_tags_check', `(cardinality(tags) <= ${LIMITS.connectionTagsMaxCount})`)],
  pageLimitMax: [
    body('app.check_page', `page_limit > ${LIMITS.pageLimitMax}`),
    body('api.tasks_list', `page_size not between 1 and ${LIMITS.pageLimitMax}`),
    body('api.mcp_tool_calls_mine', `page_limit > ${LIMITS.pageLimitMax}`),
  ],
  taskChainMaxDepth: [{ query: 'select private.task_chain_max_depth() as value', equals: LIMITS.taskChainMaxDepth }],
  transitionMetaMaxBytes: [
    { table: 'app.task_transitions', constraint: 'task_transitions_meta_size', atLeast: /octet_length\(\(meta\)::text\) <= (\d+)/ },
  ],
  companyMaxLength: [check('app.deals', 'deals_company_check', `(length(btrim(company)) <= ${LIMITS.companyMaxLength})`)],
  apiTokenNameMaxLength: [
    check('app.api_tokens', 'api_tokens_name_check', `(length(btrim(name)) <= ${LIMITS.apiTokenNameMaxLength})`),
    body('api.api_token_create', `length(btrim(name)) not between 1 and ${LIMITS.apiTokenNameMaxLength}`),
  ],
  apiTokenPermissionsMaxCount: [
    check('app.api_tokens', 'api_tokens_permissions_check', `(cardinality(permissions) <= ${LIMITS.apiTokenPermissionsMaxCount})`),
    body('api.api_token_create', `cardinality(permissions) not between 1 and ${LIMITS.apiTokenPermissionsMaxCount}`),
  ],
  apiTokenPatternMaxLength: [body('private.api_token_pattern_valid', `length(pattern) <= ${LIMITS.apiTokenPatternMaxLength}`)],
  externalIdMaxLength: [
    check('app.events', 'events_external_platform_check', `(length(external_id) <= ${LIMITS.externalIdMaxLength})`),
    body('api.platform_event_create', `length(external_id) not between 1 and ${LIMITS.externalIdMaxLength}`),
  ],
  eventTitleMaxLength: [
    check('app.events', 'events_title_check', `(length(btrim(title)) <= ${LIMITS.eventTitleMaxLength})`),
    body('private.platform_event_check', `length(btrim(title)) not between 1 and ${LIMITS.eventTitleMaxLength}`),
  ],
  venueNameMaxLength: [
    check('app.venues', 'venues_name_check', `(length(btrim(name)) <= ${LIMITS.venueNameMaxLength})`),
    body('private.platform_venue', `length(wanted_name) not between 1 and ${LIMITS.venueNameMaxLength}`),
  ],
  liveTestPathMaxLength: [
    check('app.api_test_results', 'api_test_results_request_path_check', `(length(request_path) <= ${LIMITS.liveTestPathMaxLength})`),
  ],
};

const ENUM_WITNESSES: { name: string; witness: Witness }[] = [
  { name: 'TASK_STATUSES (routes/tasks.ts)', witness: check('app.tasks', 'tasks_status_is_valid', textArray(TASK_STATUSES)) },
  {
    name: 'EXTERNAL_PLATFORMS (routes/platform.ts)',
    witness: check('app.events', 'events_external_platform_check', textArray(EXTERNAL_PLATFORMS)),
  },
];

const squash = (text: string) => text.replace(/\s+/g, ' ');

async function constraintDef(table: string, constraint: string): Promise<string> {
  const rows = await db()<{ def: string }[]>`
    select pg_get_constraintdef(c.oid) as def from pg_constraint c
     where c.conrelid = ${table}::regclass and c.conname = ${constraint}`;
  if (rows.length !== 1) throw new Error(`no constraint ${constraint} on ${table}`);
  return rows[0]!.def;
}

async function functionSource(qualified: string): Promise<string> {
  const [schema, name] = qualified.split('.');
  const rows = await db()<{ src: string }[]>`
    select p.prosrc as src from pg_proc p join pg_namespace n on n.oid = p.pronamespace
     where n.nspname = ${schema!} and p.proname = ${name!}`;
  if (rows.length === 0) throw new Error(`no function ${qualified}`);
  return squash(rows.map((row) => row.src).join('\n'));
}

/** Why the witness disagrees with the edge, or null. */
async function disagreement(witness: Witness, value: number | null): Promise<string | null> {
  if ('query' in witness) {
    const [row] = await db().unsafe<{ value: number }[]>(witness.query);
    return row!.value === witness.equals ? null : `${witness.query} answers ${row!.value}, the edge has ${witness.equals}`;
  }
  if ('function' in witness) {
    return (await functionSource(witness.function)).includes(witness.text) ? null : `${witness.function} has no \`${witness.text}\``;
  }
  const def = await constraintDef(witness.table, witness.constraint);
  if ('atLeast' in witness) {
    const sqlLimit = Number(witness.atLeast.exec(def)?.[1]);
    return value !== null && sqlLimit >= value ? null : `${witness.table} ${witness.constraint} (${def}) allows less than the edge's ${value}`;
  }
  return def.includes(witness.text) ? null : `${witness.table} ${witness.constraint} is ${def}, not \`${witness.text}\``;
}

describe('limits the edge copies from SQL', () => {
  it('every limit of gateway/core/web/limits.ts names where SQL enforces it', () => {
    for (const [name, witnesses] of Object.entries(WITNESSES)) expect(witnesses.length, name).toBeGreaterThan(0);
    expect(Object.keys(WITNESSES).sort()).toEqual(Object.keys(LIMITS).sort());
  });

  it('agree with the check constraints and function bodies of the database', async () => {
    const problems: string[] = [];
    for (const [name, witnesses] of Object.entries(WITNESSES) as [keyof typeof LIMITS, Witness[]][]) {
      for (const witness of witnesses) {
        const problem = await disagreement(witness, LIMITS[name]);
        if (problem) problems.push(`${name} (${LIMITS[name]}): ${problem}`);
      }
    }
    expect(problems).toEqual([]);
  });

  it('the enums the routes share with check constraints list the same values, in the same order', async () => {
    const problems: string[] = [];
    for (const { name, witness } of ENUM_WITNESSES) {
      const problem = await disagreement(witness, null);
      if (problem) problems.push(`${name}: ${problem}`);
    }
    expect(problems).toEqual([]);
  });
});
