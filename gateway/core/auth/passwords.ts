// Password hashing, in the process (gateway and MCP process), never in
// Postgres: the database's CPU is the one resource every process shares, and
// bcrypt at cost 10 is about 50 ms of CPU. @node-rs/bcrypt hashes and
// verifies on a few low-priority threads (hash-threads.ts: piscina), never on the
// event loop, and this process's FairQueue bounds how many run at once and
// how many wait, each client address taking its turn (fair-queue.ts).
//
// The format is the one pgcrypto's crypt(…, gen_salt('bf')) stores and
// admin.create_user still makes in psql (identity.hash_password): bcrypt of
// the base64 SHA-256 of the password (so bcrypt's 72-byte limit never
// truncates a password); $2a$, $2b$ and $2y$ all verify. New hashes are
// written $2a$: @node-rs/bcrypt names its hashes $2y$ (1.10.7, the release
// whose platform packages the registry has for every platform), and for a
// 44-character input $2a$, $2b$ and $2y$ are the same computation; pgcrypto
// verifies only the $2a$ name, so an operator can still check a password in
// psql (test/sql/auth.test.ts checks that it does).
//
// What is checked when, and what is counted, is SQL
// (private.password_attempt_start / _finish): this module only does the
// arithmetic. Neither a password nor a hash is ever logged or answered.
import crypto from 'node:crypto';
import type { PasswordOptions } from '../process/config.ts';
import { sqlRefusal } from '../web/errors.ts';
import { tooManyRequests } from '../web/throttle.ts';
import { HashThreads } from './hash-threads.ts';
import { FairQueue, type Place } from './fair-queue.ts';
import { hashingDuration, metricsOn, readHashingWith } from '../process/metrics.ts';

/** What bcrypt is given: the password reduced with SHA-256, base64 (as identity.hash_password does). */
function reduced(password: string): string {
  return crypto.createHash('sha256').update(password, 'utf8').digest('base64');
}

export class Passwords {
  readonly queue: FairQueue;
  private readonly threads: HashThreads;

  constructor(readonly options: PasswordOptions) {
    this.queue = new FairQueue({ concurrency: options.concurrency, maxQueued: options.maxQueued, what: 'sign-ins' });
    this.threads = new HashThreads(options.concurrency);
    readHashingWith(() => this.queue.depth);
  }

  /** Ends the hashing threads (when the process's server closes). */
  close(): Promise<void> {
    return this.threads.close();
  }

  get cost(): number {
    return this.options.cost;
  }

  /** A new hash at the configured cost, in `client`'s turn (503 when too many wait). */
  hash(client: string | undefined, password: string): Promise<string> {
    return this.queue.run(clientKey(client), () => this.hashNow(password));
  }

  /** Takes a place in `client`'s queue for the work of one sign-in (503 when too many wait), before its first SQL call. */
  enter(client: string | undefined): Place {
    return this.queue.enter(clientKey(client));
  }

  /** Whether the password matches the hash (false for anything that is not a bcrypt hash). Call in a place's turn. */
  async verifyNow(password: string, hash: string): Promise<boolean> {
    const started = performance.now();
    try {
      return await this.threads.verify(reduced(password), hash);
    } catch {
      return false;
    } finally {
      if (metricsOn()) hashingDuration.observe({ operation: 'verify' }, (performance.now() - started) / 1000);
    }
  }

  /** A new hash at the configured cost. Call in a place's turn. */
  hashNow(password: string): Promise<string> {
    if (!metricsOn()) return this.threads.hash(reduced(password), this.options.cost);
    const started = performance.now();
    return this.threads.hash(reduced(password), this.options.cost).finally(() => hashingDuration.observe({ operation: 'hash' }, (performance.now() - started) / 1000));
  }
}

/** Whose turn a hash is: the client address (requests without one share a turn). */
const clientKey = (client: string | undefined) => client ?? 'unknown';

/** A row of `private.password_set_start` (register, signup, set-password): throttled, refused, or hash. */
export interface PasswordSetStart {
  status: 'throttled' | 'refused' | 'hash';
  retry_after: number;
  error_state: string | null;
  error_hint: string | null;
  error_message: string | null;
}

/**
 * The hash of a new password at a door that sets one: `start` (SQL: the
 * door's throttling per client address, and what can be checked without the
 * password) first, so that a refused or throttled request costs no hash;
 * then the hash, in the client's turn.
 */
export async function hashNewPassword(
  passwords: Passwords,
  client: string | undefined,
  password: string,
  start: () => Promise<PasswordSetStart | undefined>,
): Promise<string> {
  const row = await start();
  if (row?.status === 'throttled') throw tooManyRequests(row.retry_after, 'too many requests from this address, try again later');
  if (row?.status !== 'hash') throw sqlRefusal(row?.error_state ?? '', row?.error_hint, row?.error_message ?? 'refused') ?? new Error('password_set_start answered nothing');
  return passwords.hash(client, password);
}

/** A row of `private.password_attempt_start` (login and the consent form): throttled, or the hash to check. */
export interface PasswordAttempt {
  status: 'throttled' | 'check';
  retry_after: number;
  attempt: string;
  password_hash: string;
  rehash: boolean;
}

/**
 * One sign-in's password work in its place (entered before the first SQL
 * call): compare the password with the hash SQL handed out, and when SQL
 * asks for it and the password is right, make the hash at the configured cost.
 */
export async function checkPassword(
  passwords: Passwords,
  place: Place,
  password: string,
  stored: { password_hash: string; rehash: boolean },
): Promise<{ matched: boolean; newHash: string | null }> {
  await place.turn;
  const matched = await passwords.verifyNow(password, stored.password_hash);
  const newHash = matched && stored.rehash ? await passwords.hashNow(password) : null;
  return { matched, newHash };
}
