// CPU time of a Postgres server on this machine, read from /proc: the
// postmaster's own time, the time of its children that have exited (the
// kernel adds it to the postmaster's cutime/cstime when they are reaped), and
// that of the children still running (backends, autovacuum, WAL writer, ...).
// The benches report it per request, beside the gateway's own CPU.
import fs from 'node:fs';
import type postgres from 'postgres';

/** Clock ticks per second of /proc/<pid>/stat (USER_HZ; 100 on Linux). */
const CLOCK_TICKS = 100;

/** utime, stime, cutime, cstime of a process, in µs; null when it is gone. */
function times(pid: number): [number, number, number, number] | null {
  let stat: string;
  try {
    stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null;
  }
  // Fields after the command name (which may contain spaces): state is field 3.
  const fields = stat.slice(stat.lastIndexOf(') ') + 2).split(' ');
  const us = (i: number) => (Number(fields[i]) * 1e6) / CLOCK_TICKS;
  return [us(11), us(12), us(13), us(14)];
}

/** CPU µs a process has used so far (user + system), without its children. */
export function processCpuUs(pid: number): number {
  const t = times(pid);
  return t ? t[0] + t[1] : 0;
}

function childrenOf(pid: number): number[] {
  try {
    return fs
      .readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8')
      .trim()
      .split(/\s+/)
      .filter(Boolean)
      .map(Number);
  } catch {
    return [];
  }
}

export interface PostgresCpu {
  postmasterPid: number;
  /** CPU µs the whole server (postmaster, live and exited children) has used so far. */
  cpuUs(): number;
}

/**
 * The server behind `sql`, found through a backend's parent process; null when
 * the server does not run on this machine (or /proc is not readable).
 */
export async function postgresCpu(sql: postgres.Sql): Promise<PostgresCpu | null> {
  const [row] = await sql<{ pid: number }[]>`select pg_backend_pid() as pid`;
  let stat: string;
  try {
    stat = fs.readFileSync(`/proc/${row!.pid}/stat`, 'utf8');
  } catch {
    return null;
  }
  const postmasterPid = Number(stat.slice(stat.lastIndexOf(') ') + 2).split(' ')[1]);
  return {
    postmasterPid,
    cpuUs() {
      const own = times(postmasterPid);
      if (!own) return NaN;
      return own[0] + own[1] + own[2] + own[3] + childrenOf(postmasterPid).reduce((sum, pid) => sum + processCpuUs(pid), 0);
    },
  };
}
