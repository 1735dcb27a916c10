// The objects (supabase-js `from(bucket)`): list, move, copy; information;
// download (and HEAD: exists), a public bucket's without a credential;
// upload and replace (the Uploader: gateway/storage/uploader.ts); remove.
// Who may do what is SQL's (sql/areas/storage.sql: api.storage_*).
import { z } from 'zod';
import { defineRoute } from '../../http/route.ts';
import { HttpError } from '../../core/web/errors.ts';
import { DateTime, errors, Id } from '../../http/responses.ts';
import { readObject, serveObject } from '../downloads.ts';
import {
  Bucket,
  BYTES,
  ConditionalHeaders,
  DownloadQuery,
  NOT_MODIFIED,
  ObjectMetadata,
  ObjectParams,
  ObjectPath,
  PARTIAL,
  READ_ERRORS,
  storageRoute,
  UPLOAD_BODY,
  UPLOAD_ERRORS,
  UPLOAD_LIMITS,
  Uploaded,
  UploadHeaders,
  UserMetadata,
  type ObjectRow,
} from '../shapes.ts';

const StoredObject = z
  .object({
    id: Id.describe("The object's id."),
    name: z.string().describe('Its path in the bucket.').meta({ example: '5f0c8a9e-3b1d-4c62-9a7e-2d4b6f8a1c03/me.png' }),
    bucket_id: z.string().describe('Its bucket.').meta({ example: 'avatars' }),
    owner: Id.nullable().describe('The user who uploaded it (null once that account is gone).'),
    owner_id: Id.nullable().describe('The same, as Supabase Storage also names it.'),
    version: Id.describe('The version of its bytes: a new one on every replacement.'),
    created_at: DateTime.describe('When it was created.'),
    updated_at: DateTime.describe('When it last changed.'),
    last_accessed_at: DateTime.describe('When it last changed (reads are not tracked).'),
    metadata: ObjectMetadata,
    user_metadata: UserMetadata,
  })
  .meta({ id: 'StorageObject', description: 'A stored object, as Supabase Storage answers it.' });


const ListEntry = z
  .object({
    name: z.string().describe('The name under the prefix: a folder, or an object.').meta({ example: 'me.png' }),
    id: Id.nullable().describe("The object's id; null for a folder."),
    updated_at: DateTime.nullable().describe('When it last changed; null for a folder.'),
    created_at: DateTime.nullable().describe('When it was created; null for a folder.'),
    last_accessed_at: DateTime.nullable().describe('When it last changed; null for a folder.'),
    metadata: ObjectMetadata.nullable().describe('Its metadata; null for a folder.'),
  })
  .meta({ id: 'StorageListEntry', description: 'A folder or an object directly under the listed prefix.' });


const ObjectInfo = z
  .object({
    id: Id.describe("The object's id."),
    name: z.string().describe('Its path in the bucket.').meta({ example: '5f0c8a9e-3b1d-4c62-9a7e-2d4b6f8a1c03/me.png' }),
    version: Id.describe('The version of its bytes.'),
    bucket_id: z.string().describe('Its bucket.').meta({ example: 'avatars' }),
    size: z.number().int().describe('Bytes.').meta({ example: 48213 }),
    content_type: z.string().describe('The content type it is served with.').meta({ example: 'image/png' }),
    cache_control: z.string().describe('The Cache-Control it is served with.').meta({ example: 'max-age=3600' }),
    etag: z.string().describe('A digest of the bytes (quoted).').meta({ example: '"5d41402abc4b2a76b9719d911017c592"' }),
    metadata: z.record(z.string(), z.unknown()).describe('The metadata the uploader attached (supabase-js `metadata`); `{}` when none.').meta({ example: { alt: 'Ada at the climbing wall' } }),
    last_modified: DateTime.describe('When its bytes were last written.'),
    created_at: DateTime.describe('When it was created.'),
  })
  .meta({ id: 'StorageObjectInfo', description: "An object's information (supabase-js `info()`)." });


const Message = (example: string) =>
  z.object({ message: z.string().describe('What happened.').meta({ example }) }).describe('Done.');


function info(object: ObjectRow): z.infer<typeof ObjectInfo> {
  return {
    id: object.id,
    name: object.name,
    version: object.version,
    bucket_id: object.bucket_id,
    size: Number(object.size),
    content_type: object.content_type,
    cache_control: object.cache_control,
    etag: object.etag,
    metadata: object.user_metadata ?? {},
    last_modified: new Date(object.updated_at).toISOString(),
    created_at: new Date(object.created_at).toISOString(),
  };
}


export const storageObjectRoutes = [
  defineRoute({
    method: 'post',
    path: '/storage/v1/object/list/:bucket',
    summary: 'The folders and objects under a prefix.',
    description:
      'What is directly under a folder of the bucket (supabase-js `list(prefix, {limit, offset, search, sortBy})`): its folders first (id null), then its objects, in the folders the caller owns.',
    auth: 'user',
    ...storageRoute,
    params: z.object({ bucket: Bucket }),
    body: z.object({
      prefix: z.string().max(1024).default('').describe('The folder to list (`` for the bucket\'s top).').meta({ example: '5f0c8a9e-3b1d-4c62-9a7e-2d4b6f8a1c03' }),
      limit: z.number().int().min(1).max(1000).default(100).describe('At most this many (default 100).').meta({ example: 100 }),
      offset: z.number().int().min(0).max(1_000_000).default(0).describe('Skip this many.').meta({ example: 0 }),
      search: z.string().max(1024).default('').describe('Only names that start with this (case-insensitive).').meta({ example: 'me' }),
      sortBy: z
        .object({
          column: z.enum(['name', 'created_at', 'updated_at', 'last_accessed_at']).default('name').describe('What to sort by (default name).'),
          order: z.enum(['asc', 'desc']).default('asc').describe('asc (default) or desc.'),
        })
        .default({ column: 'name', order: 'asc' })
        .describe('The order of the objects (folders are by name).'),
    }),
    responses: { 200: z.array(ListEntry).describe('Folders first, then objects.'), 404: errors('bucket_not_found') },
    async handler({ params, body, db }) {
      const [row] = await db(
        (tx) => tx<{ list: string }[]>`
          select api.storage_objects_list(${params.bucket}, ${body.prefix}, ${body.limit}, ${body.offset}, ${body.search},
                                          ${body.sortBy.column}, ${body.sortBy.order})::text as list`,
      );
      return { status: 200, json: row!.list };
    },
  }),

  defineRoute({
    method: 'post',
    path: '/storage/v1/object/list-v2/:bucket',
    summary: 'A page of the objects under a prefix (cursor-based).',
    description:
      "The objects whose paths start with `prefix` (supabase-js `listV2({ prefix, limit, cursor, with_delimiter, sortBy })`), a page at a time: `nextCursor` asks for the next; with `with_delimiter` the folders directly under the prefix come in `folders` instead of what they hold. Only in the folders the caller owns.",
    auth: 'user',
    ...storageRoute,
    params: z.object({ bucket: Bucket }),
    body: z.object({
      prefix: z.string().max(1024).optional().describe('Only paths that start with this (a string, not only a folder).').meta({ example: '5f0c8a9e-3b1d-4c62-9a7e-2d4b6f8a1c03/' }),
      limit: z.number().int().min(1).max(1000).optional().describe('At most this many entries (default and most 1,000).').meta({ example: 100 }),
      cursor: z.string().max(4096).optional().describe('`nextCursor` of the page before (with the same order).').meta({ example: 'eyJjIjoibmFtZSJ9' }),
      with_delimiter: z.boolean().optional().describe('Folders directly under the prefix, in `folders`, instead of what they hold.'),
      sortBy: z
        .object({
          column: z.enum(['name', 'created_at', 'updated_at']).describe('What to sort by.'),
          order: z.enum(['asc', 'desc']).optional().describe('asc (default) or desc.'),
        })
        .optional()
        .describe('The order (default by name, asc; by a date, folders come first).'),
    }),
    responses: {
      200: z
        .object({
          hasNext: z.boolean().describe('Whether there is another page.'),
          nextCursor: z.string().optional().describe('What to send as `cursor` for the next page (absent on the last).').meta({ example: 'eyJjIjoibmFtZSJ9' }),
          nextCursorKey: z.string().optional().describe('The path of the last entry of this page (absent on the last).').meta({ example: 'a/b.png' }),
          folders: z
            .array(z.object({ key: z.string().describe("The folder's own name.").meta({ example: 'photos' }), name: z.string().describe('Its path, ending in `/`.').meta({ example: 'a/photos/' }) }))
            .describe('The folders (with with_delimiter).'),
          objects: z.array(ListEntry.extend({ id: Id.describe("The object's id."), name: z.string().describe('Its full path.').meta({ example: 'a/b.png' }) })).describe('The objects, by full path.'),
        })
        .describe('A page.'),
      400: errors('bad_request'),
      404: errors('bucket_not_found'),
    },
    async handler({ params, body, db }) {
      const [row] = await db(
        (tx) => tx<{ page: string }[]>`
          select api.storage_objects_list_v2(${params.bucket}, ${body.prefix ?? ''}, ${body.limit ?? 1000}, ${body.cursor ?? null},
                                             ${body.with_delimiter ?? false}, ${body.sortBy?.column ?? 'name'}, ${body.sortBy?.order ?? 'asc'})::text as page`,
      );
      return { status: 200, json: row!.page };
    },
  }),

  defineRoute({
    method: 'post',
    path: '/storage/v1/object/move',
    summary: 'Move (rename) an object.',
    description: "Moves an object the caller may write to a free path they may write, in the same or another bucket (supabase-js `move()`); its id, bytes and the images pointing at it stay.",
    auth: 'user',
    ...storageRoute,
    body: z.object({
      bucketId: Bucket.describe('The bucket of the object.'),
      sourceKey: ObjectPath.describe('Its path.'),
      destinationKey: ObjectPath.describe('Its new path.'),
      destinationBucket: Bucket.optional().describe('Another bucket to move it to (default: the same).'),
    }),
    responses: {
      200: Message('Successfully moved'),
      400: errors('invalid_key'),
      403: errors('storage_access_denied'),
      404: errors('bucket_not_found', 'object_not_found'),
      409: errors('object_exists'),
      413: errors('object_too_large'),
      415: errors('invalid_mime_type'),
    },
    async handler({ body, db }) {
      await db((tx) => tx`select api.storage_object_move(${body.bucketId}, ${body.sourceKey}, ${body.destinationBucket ?? null}, ${body.destinationKey})`);
      return { status: 200, body: { message: 'Successfully moved' } };
    },
  }),

  defineRoute({
    method: 'post',
    path: '/storage/v1/object/copy',
    summary: 'Copy an object.',
    description:
      'Copies an object the caller may read to a path they may write, in the same or another bucket (supabase-js `copy()`; `x-upsert: true` replaces an object there). The copy counts against the caller\'s quota.',
    limits: UPLOAD_LIMITS.slice(0, 2),
    auth: 'user',
    ...storageRoute,
    headers: UploadHeaders.pick({ 'x-upsert': true }),
    body: z.object({
      bucketId: Bucket.describe('The bucket of the object.'),
      sourceKey: ObjectPath.describe('Its path.'),
      destinationKey: ObjectPath.describe('The path of the copy.'),
      destinationBucket: Bucket.optional().describe('Another bucket to copy it to (default: the same).'),
    }),
    responses: {
      200: Uploaded,
      400: errors('invalid_key'),
      403: errors('storage_access_denied'),
      404: errors('bucket_not_found', 'object_not_found', 'upload_not_found'),
      409: errors('object_exists'),
      413: errors('object_too_large', 'quota_exceeded'),
      415: errors('invalid_mime_type'),
      429: errors('too_many_uploads'),
      507: errors('storage_full'),
    },
    async handler(ctx) {
      const { body, headers } = ctx;
      const object = await ctx.services.storage.uploader.copy(ctx, {
        bucket: body.bucketId,
        path: body.sourceKey,
        toBucket: body.destinationBucket ?? null,
        toPath: body.destinationKey,
        upsert: headers['x-upsert'] === 'true',
      });
      return { status: 200, body: { Id: object.id, Key: `${body.destinationBucket ?? body.bucketId}/${body.destinationKey}` } };
    },
  }),

  ...(['', 'authenticated/'] as const).map((via) =>
    defineRoute({
      method: 'get',
      path: `/storage/v1/object/info/${via}:bucket/:path*`,
      summary: "An object's information.",
      description: "An object's size, type, digest, cache control, dates and metadata, for a caller who may read it (supabase-js `info()`).",
      auth: 'user',
      ...storageRoute,
      params: ObjectParams,
      responses: { 200: ObjectInfo, 404: errors('bucket_not_found', 'object_not_found') },
      async handler(ctx) {
        return { status: 200, body: info(await readObject(ctx, ctx.params.bucket, ctx.params.path, false)) };
      },
    }),
  ),

  defineRoute({
    method: 'get',
    path: '/storage/v1/object/info/public/:bucket/:path*',
    summary: "A public object's information (no credential).",
    description: "The information of an object of a public bucket, without a credential.",
    auth: 'public',
    ...storageRoute,
    params: ObjectParams,
    responses: { 200: ObjectInfo, 404: errors('bucket_not_found', 'object_not_found') },
    async handler(ctx) {
      return { status: 200, body: info(await readObject(ctx, ctx.params.bucket, ctx.params.path, true)) };
    },
  }),

  defineRoute({
    method: 'get',
    path: '/storage/v1/object/public/:bucket/:path*',
    summary: 'Download an object of a public bucket (no credential).',
    description:
      "An object of a public bucket, without a credential: the URL supabase-js `getPublicUrl()` makes, and a profile's `avatar_url` or a community's `image_url`. Range (206), If-None-Match (304), Cache-Control.",
    auth: 'public',
    ...storageRoute,
    params: ObjectParams,
    query: DownloadQuery,
    headers: ConditionalHeaders,
    responses: { 200: BYTES, 206: PARTIAL, 304: NOT_MODIFIED, ...READ_ERRORS },
    async handler(ctx) {
      const object = await readObject(ctx, ctx.params.bucket, ctx.params.path, true);
      return serveObject(ctx, object, ctx.headers, ctx.query.download);
    },
  }),

  ...(['', 'authenticated/'] as const).map((via) =>
    defineRoute({
      method: 'get',
      path: `/storage/v1/object/${via}:bucket/:path*`,
      summary: via ? 'Download an object (with a credential).' : 'Download an object; HEAD: whether it exists.',
      description:
        "An object the caller may read: any object of a public bucket, and those of a private bucket's folders the caller owns (supabase-js `download()`; HEAD is `exists()`). Range (206), If-None-Match (304), Cache-Control; an attachment (the attachments bucket) comes with Content-Disposition: attachment and X-Content-Type-Options: nosniff whatever its type.",
      auth: 'user',
      ...storageRoute,
      params: ObjectParams,
      query: DownloadQuery,
      headers: ConditionalHeaders,
      responses: { 200: BYTES, 206: PARTIAL, 304: NOT_MODIFIED, ...READ_ERRORS },
      async handler(ctx) {
        const object = await readObject(ctx, ctx.params.bucket, ctx.params.path, false);
        return serveObject(ctx, object, ctx.headers, ctx.query.download);
      },
    }),
  ),

  ...(['post', 'put'] as const).map((method) =>
    defineRoute({
      method,
      path: '/storage/v1/object/:bucket/:path*',
      summary: method === 'post' ? 'Upload an object.' : 'Replace an object (or upload it).',
      description:
        method === 'post'
          ? 'Uploads an object to a path the caller may write (supabase-js `upload()`): a taken path is 409 `object_exists` unless `x-upsert: true`. The object appears once its bytes are stored; an upload cut off leaves nothing.'
          : 'Uploads an object to a path the caller may write, replacing one that is there (supabase-js `update()`, or `upload()` with `upsert: true`). Its id stays; the old bytes go.',
      limits: UPLOAD_LIMITS,
      auth: 'user',
      ...storageRoute,
      params: ObjectParams,
      headers: UploadHeaders,
      rawBody: UPLOAD_BODY,
      responses: { 200: Uploaded, ...UPLOAD_ERRORS },
      async handler(ctx) {
        const { params, headers } = ctx;
        const upsert = method === 'put' || headers['x-upsert'] === 'true';
        const object = await ctx.services.storage.uploader.upload(ctx, { via: 'direct', bucket: params.bucket, path: params.path, upsert }, ctx.request, {
          cacheControl: headers['cache-control'],
          metadata: headers['x-metadata'],
        });
        return { status: 200, body: { Id: object.id, Key: `${params.bucket}/${params.path}` } };
      },
    }),
  ),

  defineRoute({
    method: 'delete',
    path: '/storage/v1/object/:bucket',
    summary: 'Remove objects.',
    description:
      'Removes the named objects the caller may write (supabase-js `remove(paths)`) and answers them; paths that are not there, or not the caller\'s, are left out. Their bytes are deleted in the background.',
    auth: 'user',
    ...storageRoute,
    params: z.object({ bucket: Bucket }),
    body: z.object({
      prefixes: z.array(ObjectPath).min(1).max(1000).describe('The paths of the objects to remove.').meta({ example: ['5f0c8a9e-3b1d-4c62-9a7e-2d4b6f8a1c03/old.png'] }),
    }),
    responses: { 200: z.array(StoredObject).describe('The objects removed.'), 404: errors('bucket_not_found') },
    async handler({ params, body, db }) {
      const [row] = await db((tx) => tx<{ removed: string }[]>`select api.storage_objects_remove(${params.bucket}, ${body.prefixes})::text as removed`);
      return { status: 200, json: row!.removed };
    },
  }),

  defineRoute({
    method: 'delete',
    path: '/storage/v1/object/:bucket/:path*',
    summary: 'Remove one object.',
    description: 'Removes one object the caller may write.',
    auth: 'user',
    ...storageRoute,
    params: ObjectParams,
    responses: { 200: Message('Successfully deleted'), 404: errors('bucket_not_found', 'object_not_found') },
    async handler({ params, db }) {
      const [row] = await db((tx) => tx<{ removed: unknown[] }[]>`select api.storage_objects_remove(${params.bucket}, ${[params.path]}) as removed`);
      if (row!.removed.length === 0) throw new HttpError(404, 'object_not_found', 'Object not found');
      return { status: 200, body: { message: 'Successfully deleted' } };
    },
  }),
];
