// The buckets (supabase-js `listBuckets()`, `getBucket()`): SQL's
// api.storage_buckets_list and api.storage_bucket_get.
import { z } from 'zod';
import { defineRoute } from '../../http/route.ts';
import { DateTime, errors } from '../../http/responses.ts';
import { Bucket, storageRoute } from '../shapes.ts';

const BucketShape = z
  .object({
    id: z.string().describe("The bucket's id.").meta({ example: 'avatars' }),
    name: z.string().describe('Its name (its id).').meta({ example: 'avatars' }),
    owner: z.string().describe('Always empty: buckets are the service\'s.').meta({ example: '' }),
    public: z.boolean().describe('Whether anyone may read its objects (public URLs).'),
    file_size_limit: z.number().int().describe('The largest object, in bytes.').meta({ example: 5242880 }),
    allowed_mime_types: z.array(z.string()).nullable().describe('The types it takes (null: any).').meta({ example: ['image/*'] }),
    created_at: DateTime.describe('When it was made.'),
    updated_at: DateTime.describe('When it last changed.'),
  })
  .meta({ id: 'StorageBucket', description: 'A bucket, as Supabase Storage describes it.' });

export const storageBucketRoutes = [
  defineRoute({
    method: 'get',
    path: '/storage/v1/bucket',
    summary: 'The buckets.',
    description: 'Every bucket, with whether it is public, its size limit and the types it takes (supabase-js `listBuckets()`).',
    auth: 'user',
    ...storageRoute,
    responses: { 200: z.array(BucketShape).describe('The buckets, by id.') },
    async handler({ db }) {
      const [row] = await db((tx) => tx<{ buckets: string }[]>`select api.storage_buckets_list()::text as buckets`);
      return { status: 200, json: row!.buckets };
    },
  }),

  defineRoute({
    method: 'get',
    path: '/storage/v1/bucket/:bucket',
    summary: 'One bucket.',
    description: 'One bucket (supabase-js `getBucket()`).',
    auth: 'user',
    ...storageRoute,
    params: z.object({ bucket: Bucket }),
    responses: { 200: BucketShape, 404: errors('bucket_not_found') },
    async handler({ params, db }) {
      const [row] = await db((tx) => tx<{ bucket: string }[]>`select api.storage_bucket_get(${params.bucket})::text as bucket`);
      return { status: 200, json: row!.bucket };
    },
  }),
];
