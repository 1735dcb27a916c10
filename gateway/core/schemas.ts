// Request schemas shared by route modules (and, later, MCP tools). zod is the
// single description of each shape; the OpenAPI document is generated from it.
import { z } from 'zod';
import { LIMITS } from './limits.ts';

export const Email = z.string().trim().max(LIMITS.emailMaxLength).pipe(z.email({ message: 'must be an email address' }));

/** At least LIMITS.passwordMinLength characters (docs/api.md#authentication). Passwords are SHA-256-reduced before bcrypt, so length is capped only to bound work. */
export const Password = z
  .string()
  .min(LIMITS.passwordMinLength, { message: `must be at least ${LIMITS.passwordMinLength} characters` })
  .max(1024);

export const Uuid = z.uuid({ message: 'must be a uuid' });

/** A non-empty trimmed string of at most `max` characters. */
export const Text = (max: number) => z.string().trim().min(1, { message: 'must not be empty' }).max(max);

/** A profile's display name. */
export const ProfileName = Text(LIMITS.profileNameMaxLength);

/** A JSON object whose serialised form is at most maxBytes (UTF-8). */
export const BoundedJsonObject = (maxBytes: number) =>
  z.record(z.string(), z.unknown()).refine((value) => Buffer.byteLength(JSON.stringify(value)) <= maxBytes, {
    message: `must be at most ${maxBytes} bytes as JSON`,
  });
