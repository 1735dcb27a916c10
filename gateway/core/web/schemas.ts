// Request schemas shared by route modules (and, later, MCP tools). zod is the
// single description of each shape; the OpenAPI document is generated from it.
import { z } from 'zod';
import { LIMITS } from './limits.ts';

export const Email = z
  .string()
  .trim()
  .max(LIMITS.emailMaxLength)
  .pipe(z.email({ message: 'must be an email address' }))
  .meta({ example: 'ada@example.com' });

/** At least LIMITS.passwordMinLength characters (docs/api/accounts.md#authentication). Passwords are SHA-256-reduced before bcrypt, so length is capped only to bound work. */
export const Password = z
  .string()
  .min(LIMITS.passwordMinLength, { message: `must be at least ${LIMITS.passwordMinLength} characters` })
  .max(1024)
  .meta({ example: 'correct horse battery staple' });

export const Uuid = z.uuid({ message: 'must be a uuid' });

/**
 * An integer in a query string: digits only (no sign, no decimal point, no
 * exponent), then within [min, max]. The string is turned into a number
 * before the number schema checks it (z.preprocess), so the document
 * describes an `integer` with its bounds, as a client sends it.
 */
export const QueryInteger = (min: number, max: number) =>
  z.preprocess(
    (value) => (typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value),
    z
      .number({ error: (issue) => (issue.code === 'invalid_type' ? 'must be a whole number' : undefined) })
      .int()
      .min(min)
      .max(max),
  );

/** A non-empty trimmed string of at most `max` characters. */
export const Text = (max: number) => z.string().trim().min(1, { message: 'must not be empty' }).max(max);

/** A profile's display name. */
export const ProfileName = Text(LIMITS.profileNameMaxLength);

/** A JSON object whose serialised form is at most maxBytes (UTF-8). */
export const BoundedJsonObject = (maxBytes: number) =>
  z.record(z.string(), z.unknown()).refine((value) => Buffer.byteLength(JSON.stringify(value)) <= maxBytes, {
    message: `must be at most ${maxBytes} bytes as JSON`,
  });
