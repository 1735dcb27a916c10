// What the storage routes share (docs/storage.md): the Services field of
// the storage service, and the shapes of Supabase Storage's HTTP interface as
// supabase-js's storage client speaks it: the bucket and the object path, the
// object's metadata, the headers and bodies of uploads and downloads, the
// refusals. Errors are Supabase Storage's body ({statusCode, error, code,
// message}); statuses are the real ones (Supabase answers 400 for most client
// errors, with the real one in statusCode: docs/decisions.md).
import { z } from 'zod';
import type { RawBody } from '../http/route.ts';
import { content, DateTime, errors, Id, noContent } from '../http/responses.ts';
import { MAX_RENDER_SIDE } from './images.ts';
import type { StorageService } from './service.ts';

declare module '../http/route.ts' {
  interface Services {
    /** File storage: the byte store, uploads, images (gateway/storage/service.ts). */
    storage: StorageService;
  }
}

/**
 * Every storage route answers Supabase Storage's error body, and 400 for input
 * that does not validate; the service-role key acts there as the operator
 * (every bucket and object, past the folder rules: private.storage_operator).
 */
export const storageRoute = { errorShape: 'supabase_storage' as const, invalidStatus: 400 as const, serviceRole: 'operator' as const };

export const Bucket = z
  .string()
  .regex(/^[a-z0-9][a-z0-9_-]{0,62}$/, { message: 'must be a bucket id (a-z, 0-9, _ and -)' })
  .describe('The bucket: avatars, community-images, event-images, attachments (or one an operator made).')
  .meta({ example: 'avatars' });
export const ObjectPath = z
  .string()
  .min(1)
  .max(1024)
  .describe("The object's path in the bucket, folders included (slashes are part of it); the first folder is the id of its owner.")
  .meta({ example: '5f0c8a9e-3b1d-4c62-9a7e-2d4b6f8a1c03/me.png' });
export const ObjectParams = z.object({ bucket: Bucket, path: ObjectPath });

export const ObjectMetadata = z
  .object({
    eTag: z.string().describe('A digest of the bytes (quoted).').meta({ example: '"5d41402abc4b2a76b9719d911017c592"' }),
    size: z.number().int().describe('Bytes.').meta({ example: 48213 }),
    mimetype: z.string().describe('The content type it is served with.').meta({ example: 'image/png' }),
    cacheControl: z.string().describe('The Cache-Control it is served with.').meta({ example: 'max-age=3600' }),
    lastModified: DateTime.describe('When its bytes were last written.'),
    contentLength: z.number().int().describe('Bytes (as size).').meta({ example: 48213 }),
    httpStatusCode: z.number().int().describe('Always 200.').meta({ example: 200 }),
  })
  .meta({ id: 'StorageObjectMetadata', description: "An object's metadata, as Supabase Storage lists it." });

export const UserMetadata = z
  .record(z.string(), z.unknown())
  .nullable()
  .describe('The metadata the uploader attached (supabase-js `metadata`), or null.')
  .meta({ example: { alt: 'Ada at the climbing wall' } });

export const Uploaded = z
  .object({
    Id: Id.describe("The object's id."),
    Key: z.string().describe('The bucket and the path, `bucket/path`.').meta({ example: 'avatars/5f0c8a9e-3b1d-4c62-9a7e-2d4b6f8a1c03/me.png' }),
  })
  .meta({ id: 'StorageUploaded', description: 'Where an upload went.' });

export const Transform = z
  .object({
    width: z.number().int().min(1).max(MAX_RENDER_SIDE).optional().describe('Width in pixels (at most 2,500).').meta({ example: 256 }),
    height: z.number().int().min(1).max(MAX_RENDER_SIDE).optional().describe('Height in pixels (at most 2,500).').meta({ example: 256 }),
    resize: z.enum(['cover', 'contain', 'fill']).optional().describe('cover (default): fill the size, cropping; contain: fit inside it; fill: stretch to it.'),
    quality: z.number().int().min(20).max(100).optional().describe('Quality, 20 to 100 (default 80).').meta({ example: 80 }),
    format: z.enum(['origin']).optional().describe('`origin`: keep the original format whatever the client accepts.'),
  })
  .describe('An image transformation: width and height at most 2,500 px; the format follows the Accept header (WebP, AVIF) unless `origin`.');

/** Options of the object routes that serve bytes. */
export const DownloadQuery = z.object({
  download: z.string().max(255).optional().describe('Serve as an attachment (a download), under this file name if not empty.').meta({ example: 'photo.png' }),
  cacheNonce: z.string().max(255).optional().describe('Ignored: supabase-js sends it to get past caches.').meta({ example: '1' }),
});

export const ConditionalHeaders = z.object({
  range: z.string().max(200).optional().describe('One byte range (`bytes=0-1023`, `bytes=1024-`, `bytes=-512`): 206 with that part.').meta({ example: 'bytes=0-1023' }),
  'if-none-match': z.string().max(4096).optional().describe("The ETag held: 304 when it is still the object's.").meta({ example: '"5d41402abc4b2a76b9719d911017c592"' }),
});

export const UploadHeaders = z.object({
  'x-upsert': z.enum(['true', 'false']).optional().describe('`true`: replace an object at the path (default false: 409 if one is there).'),
  'cache-control': z.string().max(255).optional().describe('How long it may be cached (`max-age=3600`, the default), when the body is the file; a form sends `cacheControl`.').meta({ example: 'max-age=3600' }),
  'x-metadata': z.string().max(12_000).optional().describe('Metadata to attach: base64 of a JSON object (at most 8 KB).').meta({ example: 'eyJhbHQiOiJtZSJ9' }),
});

// One media type in the document: the multipart form is described in words.
// Generated clients (orval's fetch client) do not compile an operation whose
// body may be either a binary or a form, and supabase-js builds its request
// itself.
export const UPLOAD_BODY: RawBody = {
  description:
    "The file: either the body itself, with its Content-Type (as supabase-js sends a Buffer, ArrayBuffer or stream: any Content-Type, the type it is stored with), or a multipart/form-data form (as it sends a Blob or File) with the fields `cacheControl` (seconds, default 3600) and `metadata` (a JSON object) and one file part, whose Content-Type is the object's.",
  content: {
    'application/octet-stream': z.string().meta({ format: 'binary' }).describe('The file (any Content-Type: the type it is stored with).'),
  },
};

export const BYTES = content('application/octet-stream', "The object's bytes, with its Content-Type, ETag, Last-Modified, Cache-Control and Content-Length (HEAD: the headers only).");
export const PARTIAL = content('application/octet-stream', 'The range asked for, with Content-Range.');
export const NOT_MODIFIED = noContent("Not modified: the ETag sent is still the object's (no body).");

/** The object routes' refusals that come from the object itself. */
export const READ_ERRORS = { 404: errors('bucket_not_found', 'object_not_found'), 416: errors('invalid_range') } as const;
export const UPLOAD_ERRORS = {
  400: errors('invalid_key'),
  403: errors('storage_access_denied'),
  404: errors('bucket_not_found', 'upload_not_found'),
  409: errors('object_exists'),
  413: errors('object_too_large', 'quota_exceeded'),
  415: errors('invalid_mime_type', 'mime_type_mismatch', 'svg_not_allowed', 'html_not_allowed', 'not_an_image'),
  422: errors('image_too_many_pixels', 'invalid_image'),
  429: errors('too_many_uploads'),
  507: errors('storage_full'),
} as const;

/** What an upload route says of its limits. */
export const UPLOAD_LIMITS = [
  "An object is at most its bucket's size limit (avatars 5 MB, community-images and event-images 10 MB, attachments 25 MB): past it, 413 `object_too_large` as soon as the bytes pass it.",
  "A user stores at most their plan's quota (100 MB basic, 1 GB premium) and starts at most its uploads per minute (30, 60): 413 `quota_exceeded`, 429 `too_many_uploads` with Retry-After.",
  'An image bucket takes JPEG, PNG, WebP, AVIF and GIF images of at most 50 million pixels, without SVG or HTML; the image is stored upright and without metadata (EXIF, GPS, XMP).',
];

/** A row of api.storage_object_get / api.storage_object_signed. */
export interface ObjectRow {
  id: string;
  bucket_id: string;
  name: string;
  storage_key: string;
  size: string | number;
  content_type: string;
  cache_control: string;
  etag: string;
  width: number | null;
  height: number | null;
  user_metadata: Record<string, unknown> | null;
  version: string;
  created_at: Date;
  updated_at: Date;
  public: boolean;
  images: boolean;
  download_as_attachment: boolean;
  transform?: z.infer<typeof Transform> | null;
}

