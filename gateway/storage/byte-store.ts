// Where the bytes of stored objects live: one interface, two implementations.
//
//   fs  a folder (STORAGE_DIR, by default under the data folder): nothing to
//       install, one machine (fs-store.ts)
//   s3  an S3-compatible bucket (AWS S3, MinIO, R2, ...): gateways on several
//       machines (s3-store.ts)
//
// Every version of an object has a key of its own (`objects/<uuid>`, made by
// SQL when the upload begins), written once and never changed, so a key is
// "temporary" until the transaction that finishes the upload points the
// object at it (private.storage_upload_finish): a put that fails or is cut
// off leaves nothing any object uses. put() resolves only once the bytes are
// durable (fsync and rename; S3's completed upload). Transformations of an
// image are kept under `renders/<uuid of its key>/...` and go with it.
//
// Streams both ways: nothing here holds a whole file in memory. The service
// (service.ts) picks the implementation from the configuration.
import type { Readable } from 'node:stream';

/** A byte range of an object, both ends included (HTTP's Range). */
export interface ByteRange {
  start: number;
  end: number;
}

export interface ByteStore {
  /** Which implementation (for logs and docs). */
  readonly kind: 'fs' | 's3';
  /** Writes `body` under `key`; resolves once it is durable. On failure nothing is left under `key`. */
  put(key: string, body: Readable, options: { contentType: string }): Promise<void>;
  /** The bytes under `key` (or a range of them); NotStoredError when there are none. */
  get(key: string, range?: ByteRange): Promise<Readable>;
  /** The size under `key`, or null when there is nothing. */
  size(key: string): Promise<number | null>;
  /** Copies the bytes under `from` to `to` (durable when it resolves). */
  copy(from: string, to: string): Promise<void>;
  /** Deletes the keys and everything under the `renders/` of each object version among them; missing keys are no error. */
  delete(keys: string[]): Promise<void>;
  /** Deletes leftovers of puts cut off by a killed process, older than `olderThanMs` (the fs backend's temporary files). */
  sweep(olderThanMs: number): Promise<number>;
}

/** No bytes under the key (deleted, or never written). */
export class NotStoredError extends Error {
  readonly code = 'NOT_STORED';
}

/** The folder of the transformations of an object version's bytes: `renders/<uuid>/`. */
export function rendersOf(storageKey: string): string {
  return `renders/${storageKey.replace(/^objects\//, '')}/`;
}

/** Whether a key has transformations of its own (an object version's; a transformation, evicted alone, has none). */
export function hasRenders(key: string): boolean {
  return key.startsWith('objects/');
}

/** The key of one transformation of an object version's bytes: `renders/<uuid>/<variant>`. */
export function renderKey(storageKey: string, variant: string): string {
  return checkKey(`${rendersOf(storageKey)}${variant}`);
}

/** The keys this service writes: a safe relative path (no `..`, nothing absolute). */
export const KEY_PATTERN = /^(objects|renders|tus)\/[A-Za-z0-9_-][A-Za-z0-9_./-]*$/;

export function checkKey(key: string): string {
  if (!KEY_PATTERN.test(key) || key.split('/').some((s) => s === '..' || s === '.' || s === '')) {
    throw new Error(`not a storage key: ${JSON.stringify(key)}`);
  }
  return key;
}
