// The byte store in an S3-compatible bucket (STORAGE_BACKEND=s3): AWS S3,
// MinIO, Cloudflare R2, ... (@aws-sdk/client-s3). Keys are those of
// byte-store.ts under STORAGE_S3_PREFIX. A put streams through
// @aws-sdk/lib-storage's Upload (a multipart upload in 5 MB parts, one part
// in memory at a time, or one PUT for a small body): the object exists only
// once the upload completes, and a failed one is aborted, so nothing partial
// is left under the key. Incomplete multipart uploads of a process killed
// mid-put are S3's to expire: give the bucket a lifecycle rule
// (AbortIncompleteMultipartUpload; docs/storage.md).
import type { Readable } from 'node:stream';
import {
  CopyObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  S3Client,
  type S3ClientConfig,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import type { S3Config } from '../core/process/config.ts';
import { checkKey, hasRenders, NotStoredError, rendersOf, type ByteRange, type ByteStore } from './byte-store.ts';

/** The client configuration of an S3Config (also what @tus/s3-store is given). */
export function s3ClientConfig(config: S3Config): S3ClientConfig {
  return {
    region: config.region,
    endpoint: config.endpoint,
    forcePathStyle: config.forcePathStyle,
    credentials: config.credentials,
    // Checksums only where S3 requires them: S3-compatible servers do not all
    // understand the SDK's default trailing checksums (aws-chunked bodies).
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  };
}

export class S3ByteStore implements ByteStore {
  readonly kind = 's3' as const;
  readonly client: S3Client;

  constructor(private readonly config: S3Config) {
    this.client = new S3Client(s3ClientConfig(config));
  }

  private keyOf(key: string): string {
    return `${this.config.prefix}${checkKey(key)}`;
  }

  async put(key: string, body: Readable, options: { contentType: string }): Promise<void> {
    const upload = new Upload({
      client: this.client,
      params: { Bucket: this.config.bucket, Key: this.keyOf(key), Body: body, ContentType: options.contentType },
      queueSize: 1,
      partSize: 5 * 1024 * 1024,
      leavePartsOnError: false,
    });
    // A body that fails (a client cut off) fails the upload, which is then aborted.
    const failed = new Promise<never>((_, reject) => body.once('error', reject));
    try {
      await Promise.race([upload.done(), failed]);
    } catch (err) {
      await upload.abort().catch(() => {});
      throw err;
    } finally {
      failed.catch(() => {});
    }
  }

  async get(key: string, range?: ByteRange): Promise<Readable> {
    try {
      const out = await this.client.send(
        new GetObjectCommand({ Bucket: this.config.bucket, Key: this.keyOf(key), Range: range ? `bytes=${range.start}-${range.end}` : undefined }),
      );
      return out.Body as Readable;
    } catch (err) {
      if (isMissing(err)) throw new NotStoredError(`nothing stored under ${key}`);
      throw err;
    }
  }

  async size(key: string): Promise<number | null> {
    try {
      const out = await this.client.send(new HeadObjectCommand({ Bucket: this.config.bucket, Key: this.keyOf(key) }));
      return out.ContentLength ?? 0;
    } catch (err) {
      if (isMissing(err)) return null;
      throw err;
    }
  }

  async copy(from: string, to: string): Promise<void> {
    try {
      await this.client.send(
        new CopyObjectCommand({
          Bucket: this.config.bucket,
          Key: this.keyOf(to),
          CopySource: `${this.config.bucket}/${this.keyOf(from).split('/').map(encodeURIComponent).join('/')}`,
        }),
      );
    } catch (err) {
      if (isMissing(err)) throw new NotStoredError(`nothing stored under ${from}`);
      throw err;
    }
  }

  async delete(keys: string[]): Promise<void> {
    const all = [...keys.map((k) => this.keyOf(k))];
    for (const key of keys.filter(hasRenders)) all.push(...(await this.list(`${this.config.prefix}${rendersOf(checkKey(key))}`)));
    for (let i = 0; i < all.length; i += 1000) {
      const batch = all.slice(i, i + 1000);
      const out = await this.client.send(
        new DeleteObjectsCommand({ Bucket: this.config.bucket, Delete: { Objects: batch.map((Key) => ({ Key })), Quiet: true } }),
      );
      const failed = (out.Errors ?? []).filter((e) => e.Code !== 'NoSuchKey');
      if (failed.length > 0) throw new Error(`S3 DeleteObjects: ${failed.map((e) => `${e.Key}: ${e.Code} ${e.Message}`).join('; ')}`);
    }
  }

  async sweep(): Promise<number> {
    return 0; // nothing partial is ever visible under a key (see the top of this file)
  }

  private async list(prefix: string): Promise<string[]> {
    const keys: string[] = [];
    let token: string | undefined;
    do {
      const out = await this.client.send(new ListObjectsV2Command({ Bucket: this.config.bucket, Prefix: prefix, ContinuationToken: token }));
      for (const item of out.Contents ?? []) if (item.Key) keys.push(item.Key);
      token = out.IsTruncated ? out.NextContinuationToken : undefined;
    } while (token);
    return keys;
  }
}

function isMissing(err: unknown): boolean {
  const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
  return e?.name === 'NoSuchKey' || e?.name === 'NotFound' || e?.$metadata?.httpStatusCode === 404;
}
