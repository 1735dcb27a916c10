// A real S3-compatible server for the S3 byte store's tests (s3rver, from
// npm): started by the test on a free port with its data in a temporary
// folder, one bucket made for the test.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';

interface S3rverInstance {
  run(): Promise<{ address: string; port: number }>;
  close(): Promise<void>;
}
type S3rverClass = new (options: {
  port: number;
  address: string;
  silent: boolean;
  directory: string;
  configureBuckets: { name: string; configs: unknown[] }[];
}) => S3rverInstance;

// s3rver ships no types: it is loaded as the CommonJS module it is.
const S3rver = createRequire(import.meta.url)('s3rver') as S3rverClass;

export interface RunningS3 {
  endpoint: string;
  bucket: string;
  directory: string;
  /** The environment variables of a gateway using it (STORAGE_BACKEND=s3). */
  env: Record<string, string>;
  stop(): Promise<void>;
}

export async function startS3(bucket = 'community-test'): Promise<RunningS3> {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 's3rver-'));
  const server = new S3rver({ port: 0, address: '127.0.0.1', silent: true, directory, configureBuckets: [{ name: bucket, configs: [] }] });
  const { port } = await server.run();
  const endpoint = `http://127.0.0.1:${port}`;
  return {
    endpoint,
    bucket,
    directory,
    env: {
      STORAGE_BACKEND: 's3',
      STORAGE_S3_BUCKET: bucket,
      STORAGE_S3_ENDPOINT: endpoint,
      STORAGE_S3_REGION: 'us-east-1',
      STORAGE_S3_ACCESS_KEY_ID: 'S3RVER',
      STORAGE_S3_SECRET_ACCESS_KEY: 'S3RVER',
      STORAGE_S3_FORCE_PATH_STYLE: '1',
      STORAGE_S3_PREFIX: 'community/',
    },
    async stop() {
      await server.close();
      fs.rmSync(directory, { recursive: true, force: true });
    },
  };
}
