// The buckets (supabase-js `listBuckets()`, `getBucket()`, and for the
// service-role key `createBucket()`, `updateBucket()`, `emptyBucket()`,
// `deleteBucket()`): SQL's api.storage_bucket*, which refuse anyone but the
// operator (private.storage_operator) the changes.
import type postgres from 'postgres';
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

/** Decimal units, as Supabase Storage reads them (`20MB` is 20,000,000 bytes). */
const UNITS: Record<string, number> = { '': 1, b: 1, k: 1e3, kb: 1e3, m: 1e6, mb: 1e6, g: 1e9, gb: 1e9 };

/** A size limit as Supabase Storage takes it: bytes, or a string such as `20MB` or `1.5GB` (null: the default, 50 MB). */
const FileSizeLimit = z
  .union([
    z.number().int().min(1).max(5 * 1024 ** 3),
    z
      .string()
      .max(32)
      .regex(/^\s*\d+(\.\d+)?\s*([kmg]?b?)\s*$/i, { message: 'must be a number of bytes or a size such as 20MB' })
      .transform((text, ctx) => {
        const [, amount, unit] = /^\s*(\d+(?:\.\d+)?)\s*([kmg]?b?)\s*$/i.exec(text)!;
        const bytes = Math.floor(Number(amount) * UNITS[unit!.toLowerCase()]!);
        if (bytes < 1 || bytes > 5 * 1024 ** 3) ctx.addIssue({ code: 'custom', message: 'must be 1 byte to 5 GB' });
        return bytes;
      }),
  ])
  .nullable()
  .describe('The largest object: bytes, or a size such as `20MB` (null: 50 MB; at most 5 GB).')
  .meta({ example: 5242880 });

const MimeTypes = z
  .array(z.string().max(255))
  .max(50)
  .nullable()
  .describe('The types it takes, such as `image/png` or `image/*` (null or empty: any).')
  .meta({ example: ['image/png', 'image/jpeg'] });

/** An empty list of types means any, as Supabase Storage reads it. */
const typesOf = (types: string[] | null | undefined) => (types && types.length > 0 ? types : null);

const Message = (example: string) => z.object({ message: z.string().describe('What was done.').meta({ example }) }).describe('Done.');

const OPERATOR_ONLY =
  'For the service-role key only (the operator, `npm run admin -- keys`); a user\'s credential: 403 `storage_access_denied`.';

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

  defineRoute({
    method: 'post',
    path: '/storage/v1/bucket',
    summary: 'Create a bucket (the service-role key).',
    description: `A bucket, public or private, with a size limit and the types it takes (supabase-js \`createBucket(id, { public, fileSizeLimit, allowedMimeTypes })\`). Its users write under their own id (\`{user id}/...\`); an operator sets other rules in SQL (docs/storage.md). ${OPERATOR_ONLY}`,
    auth: 'user',
    ...storageRoute,
    body: z.object({
      id: z.string().max(100).describe("The bucket's id: a-z, 0-9, _ and -.").meta({ example: 'receipts' }),
      name: z.string().max(100).optional().describe('Its name: the id (supabase-js sends both).').meta({ example: 'receipts' }),
      type: z.enum(['STANDARD']).optional().describe('STANDARD (the only kind served: analytics and vector buckets are not).'),
      public: z.boolean().nullish().describe('Whether anyone may read its objects (default false).'),
      file_size_limit: FileSizeLimit.optional(),
      allowed_mime_types: MimeTypes.optional(),
    }),
    responses: {
      200: z.object({ name: z.string().describe('The id of the bucket made.').meta({ example: 'receipts' }) }).describe('Made.'),
      400: errors('invalid_bucket_name', 'invalid_bucket_limits'),
      403: errors('storage_access_denied'),
      409: errors('bucket_exists'),
    },
    async handler({ body, db }) {
      const [row] = await db(
        (tx) => tx<{ made: string }[]>`
          select api.storage_bucket_create(${body.id}, ${body.public ?? false}, ${body.file_size_limit ?? null},
                                           ${typesOf(body.allowed_mime_types)}::text[])::text as made`,
      );
      return { status: 200, json: row!.made };
    },
  }),

  defineRoute({
    method: 'put',
    path: '/storage/v1/bucket/:bucket',
    summary: 'Change a bucket (the service-role key).',
    description: `Changes whether a bucket is public, its size limit and the types it takes (supabase-js \`updateBucket(id, { public, fileSizeLimit, allowedMimeTypes })\`); a field left out stays, null clears a limit. ${OPERATOR_ONLY}`,
    auth: 'user',
    ...storageRoute,
    params: z.object({ bucket: Bucket }),
    body: z.object({
      id: z.string().max(100).optional().describe('The id again (supabase-js sends it; ignored).').meta({ example: 'receipts' }),
      name: z.string().max(100).optional().describe('The id again (ignored).').meta({ example: 'receipts' }),
      public: z.boolean().optional().describe('Whether anyone may read its objects.'),
      file_size_limit: FileSizeLimit.optional(),
      allowed_mime_types: MimeTypes.optional(),
    }),
    responses: {
      200: Message('Successfully updated'),
      400: errors('invalid_bucket_limits'),
      403: errors('storage_access_denied'),
      404: errors('bucket_not_found'),
    },
    async handler({ params, body, db }) {
      const changes: Record<string, unknown> = {};
      if (body.public !== undefined) changes.public = body.public;
      if (body.file_size_limit !== undefined) changes.file_size_limit = body.file_size_limit;
      if (body.allowed_mime_types !== undefined) changes.allowed_mime_types = typesOf(body.allowed_mime_types);
      const [row] = await db((tx) => tx<{ done: string }[]>`select api.storage_bucket_update(${params.bucket}, ${tx.json(changes as postgres.JSONValue)})::text as done`);
      return { status: 200, json: row!.done };
    },
  }),

  defineRoute({
    method: 'post',
    path: '/storage/v1/bucket/:bucket/empty',
    summary: 'Empty a bucket (the service-role key).',
    description: `Deletes every object of a bucket, at once (supabase-js \`emptyBucket(id)\`); their bytes are collected later. ${OPERATOR_ONLY}`,
    auth: 'user',
    ...storageRoute,
    params: z.object({ bucket: Bucket }),
    responses: { 200: Message('Successfully emptied'), 403: errors('storage_access_denied'), 404: errors('bucket_not_found') },
    async handler({ params, db }) {
      const [row] = await db((tx) => tx<{ done: string }[]>`select api.storage_bucket_empty(${params.bucket})::text as done`);
      return { status: 200, json: row!.done };
    },
  }),

  defineRoute({
    method: 'delete',
    path: '/storage/v1/bucket/:bucket',
    summary: 'Delete a bucket (the service-role key).',
    description: `Deletes an empty bucket (supabase-js \`deleteBucket(id)\`; empty it first). The four built-in buckets cannot be deleted (409 \`bucket_builtin\`). ${OPERATOR_ONLY}`,
    auth: 'user',
    ...storageRoute,
    params: z.object({ bucket: Bucket }),
    responses: {
      200: Message('Successfully deleted'),
      403: errors('storage_access_denied'),
      404: errors('bucket_not_found'),
      409: errors('bucket_builtin', 'bucket_not_empty'),
    },
    async handler({ params, db }) {
      const [row] = await db((tx) => tx<{ done: string }[]>`select api.storage_bucket_delete(${params.bucket})::text as done`);
      return { status: 200, json: row!.done };
    },
  }),

];
