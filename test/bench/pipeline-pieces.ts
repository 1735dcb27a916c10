// Where a cheap request's database time goes (issue 25): the request's
// transaction as gateway/core/database/transaction.ts sends it (pipelined, one round trip), cut
// into pieces, each measured as Postgres CPU per transaction (all the
// server's processes, from /proc) over PIECES_CONNECTIONS connections:
//
//   skeleton            BEGIN, the settings statement with the session check, select 1, COMMIT
//   - session check     the same settings without private.check_session
//   + auth.uid()        the claims parsed for the caller's id
//   + RLS, one table    the caller's profile row through its policy
//   + RLS, the join     profile, user and plan rows, each through its policy
//   the route           select * from api.profile_get() (GET /api/mobile/profile)
import type postgres from 'postgres';
import { settings, type DirectClaims } from './gateway-sql.ts';
import type { PostgresCpu } from './postgres-cpu.ts';

const CONNECTIONS = 10;

interface Piece {
  label: string;
  statements(tx: postgres.ReservedSql, claims: DirectClaims): postgres.PendingQuery<postgres.Row[]>[];
}

const withoutSessionCheck = (tx: postgres.ReservedSql, claims: DirectClaims) => tx`
  select set_config('role', ${'authenticated'}, true),
         set_config('request.jwt.claims', ${claims.json}, true),
         set_config('statement_timeout', ${'15000'}, true)`;

const PIECES: Piece[] = [
  { label: 'skeleton', statements: (tx, c) => [settings(tx, c), tx`select 1`] },
  { label: 'skeleton without the session check', statements: (tx, c) => [withoutSessionCheck(tx, c), tx`select 1`] },
  { label: '+ auth.uid()', statements: (tx, c) => [settings(tx, c), tx`select auth.uid()`] },
  { label: '+ RLS, the profile row', statements: (tx, c) => [settings(tx, c), tx`select p.* from app.profiles p`] },
  {
    label: '+ RLS, profile, user and plan',
    statements: (tx, c) => [
      settings(tx, c),
      tx`select p.id, u.email, p.name, s.is_premium, p.subscription_type, s.max_hats, p.node_id, p.created_at, p.updated_at
           from app.profiles p join identity.users u on u.id = p.id join app.subscription_plans s on s.id = p.subscription_type`,
    ],
  },
  { label: 'GET /api/mobile/profile: api.profile_get()', statements: (tx, c) => [settings(tx, c), tx`select * from api.profile_get()`] },
];

export interface PieceResult {
  label: string;
  txPerSecond: number;
  pgCpuUs: number;
  /** pgCpuUs ÷ the skeleton's. */
  ratio: number;
}

async function load(sql: postgres.Sql, pg: PostgresCpu, claims: DirectClaims, piece: Piece, seconds: number) {
  let n = 0;
  const cpu0 = pg.cpuUs();
  const end = Date.now() + seconds * 1000;
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      while (Date.now() < end) {
        const tx = await sql.reserve();
        try {
          const sent = [tx.unsafe('begin read only'), ...piece.statements(tx, claims), tx`commit`].map((q) => q.execute());
          await Promise.all(sent);
        } finally {
          tx.release();
        }
        n++;
      }
    }),
  );
  return { txPerSecond: n / seconds, pgCpuUs: (pg.cpuUs() - cpu0) / n };
}

/** Each piece `repeat` times (alternating), `seconds` each; medians. */
export async function measurePipelinePieces(sql: postgres.Sql, pg: PostgresCpu, claims: DirectClaims, seconds: number, repeat: number): Promise<PieceResult[]> {
  const runs = new Map<string, { txPerSecond: number; pgCpuUs: number }[]>(PIECES.map((p) => [p.label, []]));
  for (const piece of PIECES) await load(sql, pg, claims, piece, 1); // warm up (prepared statements, plans)
  for (let i = 0; i < repeat; i++) {
    for (const piece of PIECES) runs.get(piece.label)!.push(await load(sql, pg, claims, piece, seconds));
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const results = PIECES.map((p) => ({
    label: p.label,
    txPerSecond: median(runs.get(p.label)!.map((r) => r.txPerSecond)),
    pgCpuUs: median(runs.get(p.label)!.map((r) => r.pgCpuUs)),
    ratio: 0,
  }));
  for (const r of results) r.ratio = r.pgCpuUs / results[0]!.pgCpuUs;
  return results;
}
