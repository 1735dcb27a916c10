// Password hashing, in the process (gateway and MCP process), never in
// Postgres: the database's CPU is the one resource every process shares, and
// bcrypt at cost 10 is about 50 ms of CPU. @node-rs/bcrypt hashes and
// verifies on a few low-priority threads (hash-threads.ts), never on the
// event loop, and this process's WorkLimiter bounds how many run at once and
// how many wait.
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
import { HashThreads } from './hash-threads.ts';
import { WorkLimiter, type Place } from './work-limiter.ts';

export interface PasswordOptions {
  /** BCRYPT_COST: the cost new hashes get; stored hashes below it are re-hashed at the next sign-in. */
  cost: number;
  /** PASSWORD_HASH_CONCURRENCY: hashes and verifications running at once in this process. */
  concurrency: number;
  /** PASSWORD_HASH_MAX_QUEUED: waiting at most; more are 503 with Retry-After. */
  maxQueued: number;
}

/** What bcrypt is given: the password reduced with SHA-256, base64 (as identity.hash_password does). */
function reduced(password: string): string {
  return crypto.createHash('sha256').update(password, 'utf8').digest('base64');
}

export class Passwords {
  readonly limiter: WorkLimiter;
  private readonly threads: HashThreads;

  constructor(readonly options: PasswordOptions) {
    this.limiter = new WorkLimiter({ concurrency: options.concurrency, maxQueued: options.maxQueued, what: 'sign-ins' });
    this.threads = new HashThreads(options.concurrency);
  }

  /** Ends the hashing threads (when the process's server closes). */
  close(): Promise<void> {
    return this.threads.close();
  }

  get cost(): number {
    return this.options.cost;
  }

  /** A new hash at the configured cost, in its turn (503 when too many wait). */
  hash(password: string): Promise<string> {
    return this.limiter.run(() => this.hashNow(password));
  }

  /** Takes a place for the work of one sign-in (503 when too many wait), before its first SQL call. */
  enter(): Place {
    return this.limiter.enter();
  }

  /** Whether the password matches the hash (false for anything that is not a bcrypt hash). Call in a place's turn. */
  async verifyNow(password: string, hash: string): Promise<boolean> {
    try {
      return await this.threads.verify(reduced(password), hash);
    } catch {
      return false;
    }
  }

  /** A new hash at the configured cost. Call in a place's turn. */
  hashNow(password: string): Promise<string> {
    return this.threads.hash(reduced(password), this.options.cost);
  }
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
