// File storage as one service a process builds once (gateway/server.ts; the
// job worker for the byte store alone): the byte store, the image work, the
// uploader (uploader.ts), the cached transformations and the staging area of
// resumable uploads (TUS: STORAGE_DIR/tus on this machine, or, with
// STORAGE_RESUMABLE_STAGING=s3, the S3 bucket, shared by every machine).
import crypto from 'node:crypto';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { FileStore } from '@tus/file-store';
import { S3Store } from '@tus/s3-store';
import type { DataStore } from '@tus/utils';
import type { StorageConfig } from '../core/process/config.ts';
import { renderKey, type ByteStore } from './byte-store.ts';
import { FsByteStore } from './fs-store.ts';
import { ImageWork, normalizeRender, renderVariant, type ImageType, type RenderOptions } from './images.ts';
import { S3ByteStore, s3ClientConfig } from './s3-store.ts';
import { Uploader } from './uploader.ts';

/** The byte store the configuration names (STORAGE_BACKEND). */
export function createByteStore(config: StorageConfig): ByteStore {
  return config.backend === 's3' ? new S3ByteStore(config.s3!) : new FsByteStore(config.dir);
}

/** Resumable uploads not finished within a day are dropped from the staging area (the storage_collect job). */
export const RESUMABLE_EXPIRY_MS = 24 * 60 * 60 * 1000;

/** An object version as a transformation needs it. */
export interface RenderSource {
  storage_key: string;
  etag: string;
  content_type: string;
}

/**
 * What the cache of transformations records (SQL: app.storage_renders, the
 * rules in sql/areas/storage.sql): each answers the keys of transformations
 * to delete now (past the bound per object, past the budget).
 */
export interface RenderCache {
  /** A miss of `variant`: counted against the client's rate (a refusal throws), recorded. */
  begin(variant: string): Promise<string[]>;
  /** `variant` is stored, `size` bytes. */
  stored(variant: string, size: number): Promise<string[]>;
}

/** A transformation: its bytes (made now or read from the cache) and its ETag. */
export interface Rendered {
  etag: string;
  contentType: ImageType;
  size: number;
  body: () => Promise<Readable>;
}

export class StorageService {
  readonly bytes: ByteStore;
  readonly images: ImageWork;
  /** Every upload, from its first byte to its commit or abort. */
  readonly uploader: Uploader;
  /** The staging area of resumable uploads. */
  readonly staging: DataStore;
  private readonly rendering = new Map<string, Promise<Buffer>>();

  constructor(readonly config: StorageConfig) {
    this.bytes = createByteStore(config);
    this.images = new ImageWork({ maxPixels: config.maxImagePixels, concurrency: config.imageConcurrency, maxQueued: config.imageMaxQueued });
    this.uploader = new Uploader(this.bytes, this.images, config.dir);
    this.staging =
      config.resumableStaging === 's3'
        ? new S3Store({
            s3ClientConfig: { ...s3ClientConfig(config.s3!), bucket: config.s3!.bucket },
            expirationPeriodInMilliseconds: RESUMABLE_EXPIRY_MS,
            // No object tags (not every S3-compatible server has them); expiry is by date.
            useTags: false,
          })
        : new FileStore({ directory: path.join(config.dir, 'tus'), expirationPeriodInMilliseconds: RESUMABLE_EXPIRY_MS });
  }

  /** The staged bytes of a finished resumable upload. */
  async staged(id: string): Promise<Readable> {
    const store = this.staging as FileStore | S3Store;
    return store instanceof FileStore ? store.read(id) : (store as S3Store).read(id);
  }

  /**
   * A transformation of an image (its options normalized: images.ts
   * normalizeRender): from the cache (the byte store, under the version's
   * renders/) or made now, once however many ask at the same time in this
   * process. A miss is recorded in `cache` before the work and its size
   * after; the transformations it evicts are deleted at once.
   */
  async render(client: string, source: RenderSource, asked: RenderOptions, output: ImageType, cache: RenderCache): Promise<Rendered> {
    const options = normalizeRender(asked, output);
    const variant = renderVariant(options, output);
    const key = renderKey(source.storage_key, variant);
    const etag = `"${crypto.createHash('md5').update(`${source.etag}:${variant}`).digest('hex')}"`;
    const cached = await this.bytes.size(key);
    if (cached !== null) return { etag, contentType: output, size: cached, body: () => this.bytes.get(key) };
    let made = this.rendering.get(key);
    if (!made) {
      made = (async () => {
        await this.evict(await cache.begin(variant));
        const buffer = await this.images.render(client, await this.bytes.get(source.storage_key), options, output);
        await this.bytes.put(key, Readable.from([buffer]), { contentType: output });
        await this.evict(await cache.stored(variant, buffer.length));
        return buffer;
      })();
      this.rendering.set(key, made);
      made.finally(() => this.rendering.delete(key)).catch(() => {});
    }
    const buffer = await made;
    return { etag, contentType: output, size: buffer.length, body: async () => Readable.from([buffer]) };
  }

  /** Deletes evicted transformations now; one that fails waits in app.storage_garbage, where SQL put it too. */
  private async evict(keys: string[]): Promise<void> {
    if (keys.length > 0) await this.bytes.delete(keys).catch(() => {});
  }

  /** Deletes leftovers older than a day: cut-off puts, image work files, expired staged uploads. */
  async sweep(): Promise<number> {
    let removed = await this.bytes.sweep(RESUMABLE_EXPIRY_MS);
    if (this.bytes.kind === 's3') {
      // The fs byte store's sweep covers its tmp/; image work of the s3 backend is in the same local folder.
      removed += await sweepFolder(path.join(this.config.dir, 'tmp'), RESUMABLE_EXPIRY_MS);
    }
    removed += await this.staging.deleteExpired().catch(() => 0);
    return removed;
  }
}

async function sweepFolder(dir: string, olderThanMs: number): Promise<number> {
  const names = await fsp.readdir(dir).catch(() => [] as string[]);
  let removed = 0;
  for (const name of names) {
    const file = path.join(dir, name);
    const stat = await fsp.stat(file).catch(() => null);
    if (stat && stat.mtimeMs < Date.now() - olderThanMs) {
      await fsp.rm(file, { force: true, recursive: true });
      removed++;
    }
  }
  return removed;
}
