// Property-based fuzzing of every route in the route table (gateway/app.ts
// `routes`, so routes added later are covered without touching this file):
// with a valid access token, random bad path parameters, query strings,
// bodies and headers must never get a 5xx, and every error is a JSON body
// naming an `error` (or, for web pages, an HTML page).
//
// Seeded: the seed is printed; FUZZ_SEED=<n> repeats a run, FUZZ_RUNS=<n>
// sets the cases per route (default 50: every run, three in CI, draws new ones).
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { routes } from '../../gateway/app.ts';
import type { Route } from '../../gateway/http/route.ts';
import { apiKey, baseUrl, registerUser, type TestUser } from '../helpers.ts';

const SEED = Number(process.env.FUZZ_SEED ?? Math.floor(Math.random() * 2 ** 31));
const RUNS = Number(process.env.FUZZ_RUNS ?? 50);
const PER_ROUTE_CONCURRENCY = 4;
console.log(`fuzz: FUZZ_SEED=${SEED} FUZZ_RUNS=${RUNS}`);

// ---------------------------------------------------------------------------
// Generators
// ---------------------------------------------------------------------------

const percentEncodeBytes = (bytes: Uint8Array) => Array.from(bytes, (b) => '%' + b.toString(16).padStart(2, '0').toUpperCase()).join('');
const percentEncodeUtf8 = (s: string) => percentEncodeBytes(Buffer.from(s, 'utf8'));

/** Strings chosen to break things: NUL, lone surrogates, numbers out of range, long. */
const nastyString = (longest: number) => fc.oneof(
  fc.constantFrom(
    '',
    ' ',
    '\u0000',
    'a\u0000b',
    '\ud800',
    'x\udc00y',
    '%',
    '-1',
    '0',
    '2147483648',
    '-2147483649',
    '9223372036854775808',
    '1e309',
    'NaN',
    'Infinity',
    'null',
    'true',
    '[]',
    '{}',
    "'; drop table app.users; --",
    '00000000-0000-0000-0000-000000000000',
    'ffffffff-ffff-ffff-ffff-ffffffffffff',
    '../../etc/passwd',
    '<script>alert(1)</script>',
  ),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.string({ maxLength: 40 }),
  fc.uuid().map(String),
  fc.integer({ min: 1, max: longest }).map((n) => 'x'.repeat(n)),
);
/** URLs stay below Node's 16 KB header limit (beyond it Node itself answers 431). */
const urlString = nastyString(1200);
const bodyString = nastyString(20_000);

const nastyNumber = fc.oneof(
  fc.constantFrom(-1, 0, 2 ** 31, -(2 ** 31) - 1, 2 ** 53 + 2, -(2 ** 63), 1e308, -1e308, 5e-324, 0.5),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
);

const leaf = fc.oneof(bodyString, nastyNumber, fc.boolean(), fc.constant(null));
const nastyValue: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 4, arbitrary: leaf },
  { weight: 1, arbitrary: fc.array(leaf, { maxLength: 5 }) },
  { weight: 1, arbitrary: fc.dictionary(fc.string({ unit: 'binary', maxLength: 10 }), leaf, { maxKeys: 5 }) },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
);

/** A path segment, already percent-encoded (often invalid UTF-8 or a NUL). */
const nastySegment = fc.oneof(
  fc.constantFrom('%ED%A0%80', '%00', 'a%00b', '%', '%zz', '%C0%AF', '%FF%FE', '%E2%82', '%2F', '..', '%2e%2e', '-1', '2147483648', 'NaN'),
  urlString.map(percentEncodeUtf8),
  fc.uint8Array({ minLength: 1, maxLength: 24 }).map(percentEncodeBytes),
  fc.uuid().map(String),
);

/** Top-level keys a zod object schema (possibly wrapped) names. */
function schemaKeys(schema: unknown): string[] {
  let s = schema as { shape?: Record<string, unknown>; def?: Record<string, unknown> } | undefined;
  for (let i = 0; s && i < 10; i++) {
    if (s.shape) return Object.keys(s.shape);
    const def = s.def ?? {};
    s = (def.innerType ?? def.in ?? def.schema) as typeof s;
  }
  return [];
}

function queryArbitrary(route: Route): fc.Arbitrary<string> {
  const keys = [...schemaKeys(route.schemas.query), 'page', 'limit', 'offset'];
  const key = fc.oneof(fc.constantFrom(...keys), fc.string({ unit: 'binary', maxLength: 8 }));
  const value = fc.oneof(
    urlString.map(percentEncodeUtf8),
    fc.uint8Array({ maxLength: 12 }).map(percentEncodeBytes),
  );
  // Repeated keys (arrays from the query parser) come naturally from the key pool.
  return fc
    .array(fc.tuple(key, value), { maxLength: 6 })
    .map((pairs) => pairs.map(([k, v]) => `${percentEncodeUtf8(k)}=${v}`).join('&'));
}

/** A raw request body (text), mostly JSON, often hostile. */
function bodyArbitrary(route: Route): fc.Arbitrary<string | undefined> {
  const keys = schemaKeys(route.schemas.body);
  const objectOfKnownKeys =
    keys.length > 0
      ? fc.dictionary(fc.constantFrom(...keys), nastyValue, { maxKeys: keys.length }).map((o) => JSON.stringify(o))
      : fc.constant('{}');
  const nestedKnown =
    keys.length > 0
      ? fc.tuple(fc.constantFrom(...keys), fc.dictionary(fc.string({ maxLength: 6 }), nastyValue, { maxKeys: 4 })).map(([k, o]) => JSON.stringify({ [k]: o }))
      : fc.constant('{}');
  return fc.oneof(
    { weight: 6, arbitrary: objectOfKnownKeys },
    { weight: 2, arbitrary: nestedKnown },
    { weight: 2, arbitrary: nastyValue.map((v) => JSON.stringify(v) ?? 'null') },
    {
      weight: 2,
      arbitrary: fc.constantFrom(
        'null',
        '5',
        '"text"',
        '[]',
        '[{}]',
        'true',
        '{',
        '{"a":1e999}',
        `{"${keys[0] ?? 'a'}":1e999}`,
        `{"${keys[0] ?? 'a'}":"\\u0000"}`,
        `{"${keys[0] ?? 'a'}":"\\ud800"}`,
        '{"\\u0000":1}',
        '{"__proto__":{"x":1}}',
        '\u0000',
        'not json',
      ),
    },
    {
      weight: 1,
      arbitrary: fc.integer({ min: 10, max: 1000 }).map((n) => `{"${keys[0] ?? 'a'}":${'['.repeat(n)}${']'.repeat(n)}}`),
    },
    {
      weight: 1,
      arbitrary: fc.integer({ min: 10, max: 1000 }).map((n) => `${'{"a":'.repeat(n)}1${'}'.repeat(n)}`),
    },
    { weight: 1, arbitrary: fc.constant(undefined) },
  );
}

const printable = fc.string({ maxLength: 60 }).map((s) => s.replace(/[^\x20-\x7e]/g, ''));
const headersArbitrary = fc.record(
  {
    'content-type': fc.constantFrom(
      'application/json',
      'application/json; charset=utf-8',
      'application/json; charset=latin1',
      'application/json; charset=utf-16',
      'application/vnd.api+json',
      'text/plain',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x',
      'application/json; charset=nonsense',
    ),
    'content-encoding': fc.constantFrom('identity', 'gzip', 'br', 'nonsense'),
    'x-request-id': printable,
    'last-event-id': printable,
    'user-agent': printable,
    // Routes that take an Idempotency-Key run keyed (the key's claim, the stored answer) when it is valid.
    'idempotency-key': fc.oneof(printable, fc.uuid().map(String)),
    'if-none-match': fc.oneof(printable, fc.constantFrom('*', '"x"', 'W/"x", "y"')),
    'if-modified-since': fc.oneof(printable, fc.constant(new Date(0).toUTCString())),
    accept: fc.constantFrom('*/*', 'text/html', 'application/json', 'text/event-stream', 'nonsense'),
  },
  { requiredKeys: ['content-type'] },
);

// ---------------------------------------------------------------------------
// One request, checked
// ---------------------------------------------------------------------------

interface Case {
  segments: string[];
  query: string;
  body: string | undefined;
  headers: Record<string, string>;
}

function pathFor(route: Route, segments: string[]): string {
  let i = 0;
  return route.path.replace(/:[A-Za-z_]+/g, () => segments[i++] ?? 'x');
}

async function send(route: Route, token: string, c: Case): Promise<{ status: number; type: string; text: string }> {
  const url = `${baseUrl}${pathFor(route, c.segments)}${c.query ? '?' + c.query : ''}`;
  const method = route.method.toUpperCase();
  const controller = new AbortController();
  const res = await fetch(url, {
    method,
    // Routes that require an API key get the anon key, as the Supabase SDKs send it.
    headers: { ...c.headers, authorization: `Bearer ${token}`, ...(route.docs.apiKey ? { apikey: anonKey } : {}) },
    body: method === 'GET' || method === 'DELETE' ? undefined : c.body,
    redirect: 'manual',
    signal: controller.signal,
  });
  const type = res.headers.get('content-type') ?? '';
  if (type.startsWith('text/event-stream')) {
    controller.abort();
    return { status: res.status, type, text: '' };
  }
  return { status: res.status, type, text: await res.text() };
}

function check(route: Route, c: Case, r: { status: number; type: string; text: string }): void {
  const context = () => `${route.method.toUpperCase()} ${route.path} → ${r.status}\ncase: ${JSON.stringify(c).slice(0, 1500)}\nresponse: ${r.text.slice(0, 500)}`;
  if (r.status >= 500) throw new Error(`5xx\n${context()}`);
  if (r.status < 400) return;
  if (r.type.startsWith('text/html')) return; // a web page's HTML error page
  if (!r.type.startsWith('application/json')) throw new Error(`error without a JSON body\n${context()}`);
  const body = JSON.parse(r.text) as { error?: unknown; error_code?: unknown };
  // Supabase Auth's body on its route group (docs/supabase-sdks.md#errors); a body refused before the route is the Error body.
  if (route.docs.errorShape === 'supabase_auth' && typeof body.error_code === 'string') return;
  if (typeof body.error !== 'string') throw new Error(`error body without "error"\n${context()}`);
}

// ---------------------------------------------------------------------------

let user: TestUser;
let anonKey: string;
beforeAll(async () => {
  anonKey = await apiKey('anon');
  user = await registerUser('fuzz');
});

describe.concurrent('fuzz: every route, hostile input, never a 5xx', () => {
  routes.forEach((route, index) => {
    const paramCount = (route.path.match(/:[A-Za-z_]+/g) ?? []).length;
    it(`${route.method.toUpperCase()} ${route.path}`, { timeout: 300_000 }, async () => {
      const arbitrary = fc.record({
        segments: fc.array(nastySegment, { minLength: paramCount, maxLength: paramCount }),
        query: queryArbitrary(route),
        body: bodyArbitrary(route),
        headers: headersArbitrary as fc.Arbitrary<Record<string, string>>,
      });
      // Generated up front from the route's seed (repeatable), then sent a few at a time.
      const cases = fc.sample(arbitrary, { seed: SEED + index, numRuns: RUNS });
      let next = 0;
      const worker = async () => {
        while (next < cases.length) {
          const i = next++;
          const c = cases[i]!;
          try {
            check(route, c, await send(route, user.accessToken, c));
          } catch (err) {
            next = cases.length;
            throw new Error(`FUZZ_SEED=${SEED} case ${i} of route seed ${SEED + index}: ${(err as Error).message}`);
          }
        }
      };
      await Promise.all(Array.from({ length: PER_ROUTE_CONCURRENCY }, worker));
    });
  });

  it('the fuzzer covers every route of the table', () => {
    expect(routes.length).toBeGreaterThan(40);
  });
});

describe('hostile inputs found by hand (each was a 500)', () => {
  const call = async (method: string, path: string, body?: string) => {
    const res = await fetch(baseUrl + path, {
      method,
      headers: { authorization: `Bearer ${user.accessToken}`, 'content-type': 'application/json' },
      body,
    });
    return { status: res.status, body: (await res.json()) as { error?: string } };
  };

  it('a lone surrogate or a stray % in a path id is 404, not a URIError', async () => {
    for (const segment of ['%ED%A0%80', '%', '%E2%82', 'a%00b']) {
      const r = await call('GET', `/api/mobile/tasks/${segment}/next`);
      expect(r.status, segment).toBe(404);
      expect(typeof r.body.error).toBe('string');
    }
  });

  it('NUL characters and lone surrogates in JSON strings or query values are refused before SQL', async () => {
    const description = await call('POST', '/api/mobile/tasks', JSON.stringify({ title: 't', description: 'a\u0000b' }));
    expect(description.status).toBe(422);
    const surrogate = await call('POST', '/api/mobile/tasks', '{"title":"\\ud800"}');
    expect(surrogate.status).toBe(422);
    const key = await call('POST', '/api/mobile/tasks/00000000-0000-4000-8000-000000000000/link', JSON.stringify({ destination_task_id: '00000000-0000-4000-8000-000000000001', transition_meta: { 'a\u0000': 1 } }));
    expect(key.status).toBe(422);
    const search = await call('GET', '/api/mobile/tasks/search?company=%00');
    expect(search.status).toBe(422);
    expect(typeof search.body.error).toBe('string');
  });

  it('JSON nested too deep or with numbers beyond float range is refused', async () => {
    const deep = await call('POST', '/api/mobile/tasks/00000000-0000-4000-8000-000000000000/link', JSON.stringify({ destination_task_id: '00000000-0000-4000-8000-000000000001', transition_meta: JSON.parse('{"a":'.repeat(100) + '1' + '}'.repeat(100)) }));
    expect(deep.status).toBe(422);
    const huge = await call('POST', '/api/mobile/tasks', '{"deal_context":{"company":"x","deal_value":1e999}}');
    expect(huge.status).toBe(422);
  });

  it('a request line over 16 KB gets a JSON 431', async () => {
    const res = await fetch(`${baseUrl}/api/mobile/tasks?x=${'y'.repeat(20_000)}`, { headers: { authorization: `Bearer ${user.accessToken}` } });
    expect(res.status).toBe(431);
    expect(((await res.json()) as { error: string }).error).toBe('headers_too_large');
  });
});
