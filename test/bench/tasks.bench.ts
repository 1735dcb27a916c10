// Tasks at scale (issue item 7): one user with 100k tasks, of which 10k form
// one chain (task 1 → 2 → … → 10000), plus 20k other links among the rest.
// Cycle checks and chain walks must cost what they walk, not the table:
// linking onto the chain's end and reading a depth-50 chain stay near the
// baseline; the cycle-rejected link from the end back to task 2 walks the
// whole chain (10k links), the one case expected to cost more.
import type { Bench } from './harness.ts';

const TASKS = 100_000;
const CHAIN = 10_000;
const OTHER_LINKS = 20_000;
const COMPANIES = 50;
const COMPANY_TASKS = 1_000;

const bench: Bench = {
  name: 'tasks',
  description: `tasks: ${TASKS / 1000}k tasks of one user, a ${CHAIN / 1000}k-long chain, ${OTHER_LINKS / 1000}k other links`,
  async run(ctx) {
    const { token, userId } = await ctx.user();
    const sql = ctx.sql;

    ctx.progress(`loading ${TASKS} tasks`);
    await sql`create table public.bench_tasks (n integer primary key, id uuid not null default gen_random_uuid())`;
    await sql`insert into public.bench_tasks (n) select generate_series(1, ${TASKS})`;
    // Tasks 1..CHAIN are the chain; COMPANY_TASKS of the rest carry a company.
    await sql`
      insert into app.tasks (id, created_by, meta, inserted_at, updated_at)
      select b.id, ${userId},
             jsonb_build_object('title', 'task ' || b.n, 'status', (array['pending', 'in_progress', 'completed'])[1 + b.n % 3])
               || case when b.n > ${TASKS - COMPANY_TASKS}
                       then jsonb_build_object('deal_context', jsonb_build_object('company', 'Company ' || (b.n % ${COMPANIES}), 'deal_value', b.n))
                       else '{}' end,
             now() - (${TASKS} - b.n) * interval '1 ms',
             now() - (${TASKS} - b.n) * interval '1 ms'
        from public.bench_tasks b`;
    ctx.progress(`linking a ${CHAIN}-long chain and ${OTHER_LINKS} other links`);
    await sql`
      insert into app.task_transitions (created_by, origin_id, destination_id, inserted_at)
      select ${userId}, a.id, b.id, now() - (${CHAIN} - a.n) * interval '1 ms'
        from public.bench_tasks a
        join public.bench_tasks b on b.n = a.n + 1
       where a.n < ${CHAIN}`;
    // Other links only go from a lower to a higher task number: no cycles.
    await sql`
      insert into app.task_transitions (created_by, origin_id, destination_id)
      select ${userId}, a.id, b.id
        from generate_series(1, ${OTHER_LINKS}) k
        join public.bench_tasks a on a.n = ${CHAIN + 1} + (k * 7919) % ${TASKS - CHAIN - 100}
        join public.bench_tasks b on b.n = a.n + 1 + k % 50`;
    await sql`analyze app.tasks`;
    await sql`analyze app.task_transitions`;
    await sql`analyze app.deals`;

    const idOf = async (n: number) => (await sql`select id from public.bench_tasks where n = ${n}`)[0]!.id as string;
    const start = await idOf(1);
    const second = await idOf(2);
    const end = await idOf(CHAIN);
    const counts = await sql`
      select (select count(*)::int from app.tasks) as tasks, (select count(*)::int from app.task_transitions) as links,
             (select count(*)::int from app.deals) as deals`;
    ctx.progress(`loaded: ${JSON.stringify(counts[0])}`);

    // Fresh tasks to append to the chain, one per timed call (warm-up included).
    const appendCount = 220;
    const fresh = (
      await sql`
        insert into app.tasks (created_by, meta)
        select ${userId}, jsonb_build_object('title', 'appended ' || i, 'status', 'pending') from generate_series(1, ${appendCount}) i
        returning id`
    ).map((r) => r.id as string);
    let tail = end;
    let appended = 0;

    const chainOk = (expected: number) => (body: unknown) => {
      const chain = (body as { chain: unknown[] }).chain;
      if (chain.length !== expected) throw new Error(`chain of ${chain.length}, expected ${expected}`);
    };

    const results = [
      await ctx.measure('POST link onto the chain\'s end (extends the chain)', 200, async () => {
        const next = fresh[appended++]!;
        await ctx.call('POST', `/api/mobile/tasks/${tail}/link`, { token, body: { destination_task_id: next }, expect: 200 });
        tail = next;
      }),
      await ctx.measure('GET chain depth 50 forward from the chain\'s start', 200, async () =>
        chainOk(51)(await ctx.call('GET', `/api/mobile/tasks/${start}/chain?depth=50`, { token })),
      ),
      await ctx.measure('GET chain depth 50 backward from the chain\'s end', 200, async () =>
        chainOk(51)(await ctx.call('GET', `/api/mobile/tasks/${tail}/chain?direction=backward&depth=50`, { token })),
      ),
      await ctx.measure(`POST link end → task 2, rejected as a cycle (walks ~${CHAIN} links)`, 50, () =>
        ctx.call('POST', `/api/mobile/tasks/${tail}/link`, { token, body: { destination_task_id: second }, expect: 422 }),
      ),
      await ctx.measure(`GET chain depth ${CHAIN + appendCount} forward (the whole chain)`, 20, async () =>
        chainOk(CHAIN + appended)(await ctx.call('GET', `/api/mobile/tasks/${start}/chain?depth=${CHAIN + appendCount}`, { token })),
      ),
      await ctx.measure('GET next of a chain task', 200, () => ctx.call('GET', `/api/mobile/tasks/${start}/next`, { token })),
      await ctx.measure('GET /api/mobile/tasks (page 1 of 100k, limit 20)', 200, () => ctx.call('GET', '/api/mobile/tasks', { token })),
      await ctx.measure('GET /api/mobile/tasks?status=completed&page=50&limit=100', 100, () =>
        ctx.call('GET', '/api/mobile/tasks?status=completed&page=50&limit=100', { token }),
      ),
      await ctx.measure(`GET by_company (${COMPANIES} companies, ${COMPANY_TASKS} tasks)`, 50, () =>
        ctx.call('GET', '/api/mobile/tasks/by_company', { token }),
      ),
      await ctx.measure('GET search?company=company 1', 100, () => ctx.call('GET', '/api/mobile/tasks/search?company=company%201', { token })),
      await ctx.measure('POST /api/mobile/tasks', 200, () => ctx.call('POST', '/api/mobile/tasks', { token, body: { title: 'bench' }, expect: 201 })),
    ];
    return results;
  },
};
export default bench;
