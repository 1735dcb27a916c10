// The byte store in a folder (STORAGE_DIR; by default DATA_DIR/storage):
//
//   objects/<uuid>            one file per object version
//   renders/<uuid>/<variant>  cached transformations of that version
//   tmp/                      files being written
//
// A put writes `tmp/<random>.part`, fsyncs it, renames it to its key and
// fsyncs the folder: a reader (or a crash) never sees half a file under a
// key. Leftover `.part` files of a killed process are swept by the
// storage_collect job.
import crypto from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { promisify } from 'node:util';
import { checkKey, hasRenders, NotStoredError, rendersOf, type ByteRange, type ByteStore } from './byte-store.ts';

export class FsByteStore implements ByteStore {
  readonly kind = 'fs' as const;
  private readonly tmp: string;

  constructor(readonly dir: string) {
    this.tmp = path.join(dir, 'tmp');
  }

  private pathOf(key: string): string {
    return path.join(this.dir, checkKey(key));
  }

  async put(key: string, body: Readable, _options: { contentType: string }): Promise<void> {
    const target = this.pathOf(key);
    await fsp.mkdir(this.tmp, { recursive: true });
    const part = path.join(this.tmp, `${crypto.randomUUID()}.part`);
    // A plain descriptor (a FileHandle's close() would wait for the stream that holds it).
    const fd = await promisify(fs.open)(part, 'wx', 0o600);
    try {
      await pipeline(body, fs.createWriteStream(part, { fd, autoClose: false }));
      await promisify(fs.fsync)(fd);
    } catch (err) {
      await promisify(fs.close)(fd).catch(() => {});
      await fsp.rm(part, { force: true });
      throw err;
    }
    await promisify(fs.close)(fd);
    try {
      await fsp.mkdir(path.dirname(target), { recursive: true });
      await fsp.rename(part, target);
      await syncFolder(path.dirname(target));
    } catch (err) {
      await fsp.rm(part, { force: true });
      throw err;
    }
  }

  async get(key: string, range?: ByteRange): Promise<Readable> {
    const file = this.pathOf(key);
    // Opened first: a missing key is an error here, not on the stream; an
    // open file stays readable when a collector deletes it meanwhile.
    let handle: fsp.FileHandle;
    try {
      handle = await fsp.open(file, 'r');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new NotStoredError(`nothing stored under ${key}`);
      throw err;
    }
    return handle.createReadStream(range ? { start: range.start, end: range.end } : {});
  }

  async size(key: string): Promise<number | null> {
    try {
      return (await fsp.stat(this.pathOf(key))).size;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw err;
    }
  }

  async copy(from: string, to: string): Promise<void> {
    await this.put(to, await this.get(from), { contentType: 'application/octet-stream' });
  }

  async delete(keys: string[]): Promise<void> {
    for (const key of keys) {
      await fsp.rm(this.pathOf(key), { force: true });
      if (hasRenders(key)) await fsp.rm(path.join(this.dir, rendersOf(checkKey(key))), { recursive: true, force: true });
    }
  }

  async sweep(olderThanMs: number): Promise<number> {
    let removed = 0;
    let names: string[];
    try {
      names = await fsp.readdir(this.tmp);
    } catch {
      return 0;
    }
    const before = Date.now() - olderThanMs;
    for (const name of names) {
      const file = path.join(this.tmp, name);
      const stat = await fsp.stat(file).catch(() => null);
      if (stat && stat.mtimeMs < before) {
        await fsp.rm(file, { force: true, recursive: true });
        removed++;
      }
    }
    return removed;
  }
}

/** fsync of a folder: the rename into it survives a crash. */
async function syncFolder(dir: string): Promise<void> {
  const fd = await promisify(fs.open)(dir, 'r');
  try {
    await promisify(fs.fsync)(fd);
  } finally {
    await promisify(fs.close)(fd);
  }
}
