// Signed URLs: download URLs of one object or many (optionally of a
// transformation), and signed upload URLs; the downloads and uploads through
// them, without a credential. The tokens are made and checked by SQL
// (api.storage_sign, api.storage_sign_upload, api.storage_object_signed,
// api.storage_upload_begin_signed) with a key that never leaves the database.
import { z } from 'zod';
import { defineRoute } from '../../http/route.ts';
import { HttpError } from '../../core/web/errors.ts';
import { errors, Id } from '../../http/responses.ts';
import { readSigned, serveObject } from '../downloads.ts';
import {
  Bucket,
  BYTES,
  ConditionalHeaders,
  DownloadQuery,
  NOT_MODIFIED,
  ObjectParams,
  ObjectPath,
  PARTIAL,
  READ_ERRORS,
  storageRoute,
  Transform,
  UPLOAD_BODY,
  UPLOAD_ERRORS,
  UPLOAD_LIMITS,
  Uploaded,
  UploadHeaders,
} from '../shapes.ts';

export const storageSignRoutes = [
  defineRoute({
    method: 'post',
    path: '/storage/v1/object/sign/:bucket',
    summary: 'Signed download URLs of several objects.',
    description:
      'A signed URL for each path the caller may read (supabase-js `createSignedUrls(paths, expiresIn)`), valid `expiresIn` seconds; anyone with one may download the object without a credential. A path that is not there (or not readable) gets an `error` instead.',
    auth: 'user',
    ...storageRoute,
    params: z.object({ bucket: Bucket }),
    body: z.object({
      expiresIn: z.number().int().min(1).max(31_536_000).describe('Seconds the URLs are valid (at most a year).').meta({ example: 3600 }),
      paths: z.array(ObjectPath).min(1).max(1000).describe('The objects.').meta({ example: ['5f0c8a9e-3b1d-4c62-9a7e-2d4b6f8a1c03/doc.pdf'] }),
    }),
    responses: {
      200: z
        .array(
          z.object({
            path: z.string().describe('The path asked for.').meta({ example: '5f0c8a9e-3b1d-4c62-9a7e-2d4b6f8a1c03/doc.pdf' }),
            signedURL: z.string().nullable().describe('The URL, relative to /storage/v1; null with an error.').meta({ example: '/object/sign/attachments/5f0c8a9e-3b1d-4c62-9a7e-2d4b6f8a1c03/doc.pdf?token=eyJhbGciOiJIUzI1NiJ9.e30.sig' }),
            error: z.string().nullable().describe('Why there is no URL, or null.').meta({ example: null }),
          }),
        )
        .describe('One entry per path, in order.'),
      404: errors('bucket_not_found'),
    },
    async handler({ params, body, db }) {
      const [row] = await db((tx) => tx<{ urls: string }[]>`select api.storage_sign(${params.bucket}, ${body.paths}, ${body.expiresIn}, null)::text as urls`);
      return { status: 200, json: row!.urls };
    },
  }),

  defineRoute({
    method: 'post',
    path: '/storage/v1/object/sign/:bucket/:path*',
    summary: 'A signed download URL of an object (optionally of a transformation).',
    description:
      'A signed URL of an object the caller may read (supabase-js `createSignedUrl(path, expiresIn, {transform})`), valid `expiresIn` seconds: anyone with it may download the object (or the transformation signed with it) without a credential. It stops working when the signer\'s credentials end (a password reset).',
    auth: 'user',
    ...storageRoute,
    params: ObjectParams,
    body: z.object({
      expiresIn: z.number().int().min(1).max(31_536_000).describe('Seconds the URL is valid (at most a year).').meta({ example: 3600 }),
      transform: Transform.optional(),
    }),
    responses: {
      200: z.object({
        signedURL: z.string().describe('The URL, relative to /storage/v1.').meta({ example: '/object/sign/attachments/5f0c8a9e-3b1d-4c62-9a7e-2d4b6f8a1c03/doc.pdf?token=eyJhbGciOiJIUzI1NiJ9.e30.sig' }),
      }),
      404: errors('bucket_not_found', 'object_not_found'),
    },
    async handler({ params, body, db }) {
      const transform = body.transform && Object.keys(body.transform).length > 0 ? body.transform : null;
      const [row] = await db(
        (tx) => tx<{ urls: { signedURL: string | null }[] }[]>`
          select api.storage_sign(${params.bucket}, ${[params.path]}, ${body.expiresIn}, ${transform ? tx.json(transform) : null}::jsonb) as urls`,
      );
      const url = row!.urls[0]?.signedURL;
      if (!url) throw new HttpError(404, 'object_not_found', 'Object not found');
      return { status: 200, body: { signedURL: url } };
    },
  }),

  defineRoute({
    method: 'get',
    path: '/storage/v1/object/sign/:bucket/:path*',
    summary: 'Download through a signed URL (no credential).',
    description: 'The object a signed URL names, without a credential (the URL supabase-js `createSignedUrl()` makes). A tampered or expired token is refused.',
    auth: 'public',
    ...storageRoute,
    params: ObjectParams,
    query: DownloadQuery.extend({ token: z.string().min(1).max(8192).describe('The signed URL\'s token.').meta({ example: 'eyJhbGciOiJIUzI1NiJ9.e30.sig' }) }),
    headers: ConditionalHeaders,
    responses: {
      200: BYTES,
      206: PARTIAL,
      304: NOT_MODIFIED,
      400: errors('invalid_signature', 'signature_expired'),
      ...READ_ERRORS,
    },
    async handler(ctx) {
      const object = await readSigned(ctx, ctx.params.bucket, ctx.params.path, ctx.query.token);
      return serveObject(ctx, object, ctx.headers, ctx.query.download);
    },
  }),

  defineRoute({
    method: 'post',
    path: '/storage/v1/object/upload/sign/:bucket/:path*',
    summary: 'A signed upload URL.',
    description:
      'A URL to upload one object to a path the caller may write, once, within 2 hours (supabase-js `createSignedUploadUrl(path, {upsert})`): whoever has it uploads as the caller, without a credential (`uploadToSignedUrl`). It ends early when the caller\'s password changes, they sign out everywhere or the account is deleted.',
    auth: 'user',
    ...storageRoute,
    params: ObjectParams,
    headers: UploadHeaders.pick({ 'x-upsert': true }),
    responses: {
      200: z.object({
        url: z.string().describe('The URL, relative to /storage/v1.').meta({ example: '/object/upload/sign/attachments/5f0c8a9e-3b1d-4c62-9a7e-2d4b6f8a1c03/doc.pdf?token=eyJhbGciOiJIUzI1NiJ9.e30.sig' }),
        token: z.string().describe('Its token.').meta({ example: 'eyJhbGciOiJIUzI1NiJ9.e30.sig' }),
      }),
      400: errors('invalid_key'),
      403: errors('storage_access_denied'),
      404: errors('bucket_not_found'),
    },
    async handler({ params, headers, db }) {
      const [row] = await db(
        (tx) => tx<{ signed: string }[]>`select api.storage_sign_upload(${params.bucket}, ${params.path}, ${headers['x-upsert'] === 'true'})::text as signed`,
      );
      return { status: 200, json: row!.signed };
    },
  }),

  defineRoute({
    method: 'put',
    path: '/storage/v1/object/upload/sign/:bucket/:path*',
    summary: 'Upload through a signed upload URL (no credential).',
    description:
      'Uploads the object a signed upload URL names, as the user who signed it (supabase-js `uploadToSignedUrl(path, token, file)`). A signed upload URL uploads once: another upload with it is 409 `signed_url_used` (an upload through it that is refused or cut off gives it back).',
    limits: UPLOAD_LIMITS,
    auth: 'public',
    ...storageRoute,
    params: ObjectParams,
    query: z.object({ token: z.string().min(1).max(8192).describe("The signed upload URL's token.").meta({ example: 'eyJhbGciOiJIUzI1NiJ9.e30.sig' }) }),
    headers: UploadHeaders,
    rawBody: UPLOAD_BODY,
    responses: {
      200: Uploaded.pick({ Key: true }).extend({ Id: Id.describe("The object's id.") }),
      ...UPLOAD_ERRORS,
      400: errors('invalid_key', 'invalid_signature', 'signature_expired'),
      409: errors('object_exists', 'signed_url_used'),
    },
    async handler(ctx) {
      const { params, query } = ctx;
      const object = await ctx.services.storage.uploader.upload(ctx, { via: 'signed', bucket: params.bucket, path: params.path, token: query.token }, ctx.request, {
        cacheControl: ctx.headers['cache-control'],
        metadata: ctx.headers['x-metadata'],
      });
      return { status: 200, body: { Id: object.id, Key: `${params.bucket}/${params.path}` } };
    },
  }),
];
