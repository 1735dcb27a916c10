// The one place where failures become HTTP statuses and bodies.
//
// SQL functions choose a status with SQLSTATE 'PTxxx' (PostgREST's convention):
// `message` is shown to the client and `hint`, when it is a snake_case word,
// becomes the machine-readable `error` code. Other SQLSTATEs map through the
// table below; anything unknown is a 500 whose details stay in the server log.
// Every code is one of the register's (core/web/error-codes.ts).
import postgres from 'postgres';
import { ERROR_CODES, type ErrorCode } from './error-codes.ts';

export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: ErrorCode,
    message: string,
    readonly details: Record<string, unknown> | null = null,
    /**
     * A finer reason than the code, never shown in this service's own bodies,
     * for a shape that tells more (Supabase Auth tells a missing credential,
     * 401 `no_authorization`, from a bad one, 403 `bad_jwt`): 'bad_credential'.
     */
    readonly nuance: 'bad_credential' | null = null,
  ) {
    super(message);
  }
}

const DEFAULT_CODES: Record<number, ErrorCode> = {
  400: 'bad_request',
  401: 'unauthorized',
  403: 'forbidden',
  404: 'not_found',
  409: 'conflict',
  413: 'payload_too_large',
  415: 'unsupported_media_type',
  422: 'validation_error',
  429: 'rate_limited',
  500: 'internal_error',
  503: 'service_unavailable',
  504: 'statement_timeout',
  507: 'storage_full',
};

export function defaultCode(status: number): ErrorCode {
  return DEFAULT_CODES[status] ?? (status >= 500 ? 'internal_error' : 'error');
}

/** SQLSTATE → HTTP status, for errors not raised as PTxxx. */
const SQLSTATE_STATUS: Record<string, number> = {
  '22P02': 400, // invalid_text_representation (e.g. a malformed uuid)
  '22007': 400, // invalid_datetime_format
  '22008': 400, // datetime_field_overflow
  '22003': 400, // numeric_value_out_of_range
  '22001': 422, // string_data_right_truncation
  '22P05': 400, // untranslatable_character (NUL in text/jsonb)
  '22021': 400, // character_not_in_repertoire (invalid UTF-8)
  '54000': 422, // program_limit_exceeded (e.g. a value too large for an index)
  '54001': 422, // statement_too_complex (e.g. JSON nested too deep)
  '22023': 400, // invalid_parameter_value
  '23502': 422, // not_null_violation
  '23503': 409, // foreign_key_violation
  '23505': 409, // unique_violation
  '23514': 422, // check_violation
  '42501': 403, // insufficient_privilege
  P0002: 404, // no_data_found
  '40001': 503, // serialization_failure (after retries)
  '40P01': 503, // deadlock_detected (after retries)
  '55P03': 503, // lock_not_available
  '57014': 504, // query_canceled (statement timeout)
  '53300': 503, // too_many_connections
  // '25006' read_only_sql_transaction: in a read-write transaction, the host
  // is no longer the primary (a switchover): core/database/transaction.ts
  // turns it into NotPrimaryError, a 503 below. In a read-only transaction
  // (a GET) it is a route that writes where it must not: a 500.
};

const SAFE_MESSAGES: Record<number, string> = {
  400: 'the request is not valid',
  403: 'not allowed',
  404: 'not found',
  409: 'the request conflicts with existing data',
  422: 'the request is not valid',
  503: 'the database is busy, try again',
  504: 'the request took longer than the statement timeout and was cancelled; nothing was changed',
};

/** Seconds a client should wait before retrying a 503 (the database restarting, busy or out of connections). */
const RETRY_UNAVAILABLE_SECONDS = 1;

function isPgError(err: unknown): err is postgres.PostgresError {
  return err instanceof postgres.PostgresError;
}

function isConnectionError(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return (
    typeof code === 'string' &&
    [
      'ECONNREFUSED',
      'ECONNRESET',
      'EPIPE',
      'EHOSTUNREACH',
      'ETIMEDOUT',
      'CONNECT_TIMEOUT',
      'CONNECTION_CLOSED',
      'CONNECTION_ENDED',
      'CONNECTION_DESTROYED',
      'DATABASE_WAIT_TIMEOUT', // core/database/pool.ts DatabaseWaitError: no connection, or no answer, in bounded time
    ].includes(code)
  );
}

/**
 * A refusal SQL raised (or answered, with the same three parts) as SQLSTATE
 * PTxxx: status xxx, the snake_case hint as the error code; null for any
 * other SQLSTATE. A DETAIL that is a JSON object becomes the answer's
 * `details` (`retry_after` of a limit, the communities of
 * last_manager_of_communities); any other DETAIL stays in the server.
 */
export function sqlRefusal(sqlstate: string, hint: string | null | undefined, message: string, detail?: string | null): HttpError | null {
  const custom = /^PT(\d{3})$/.exec(sqlstate);
  if (!custom) return null;
  const status = Number(custom[1]);
  // A registered code (test/unit/error-codes.test.ts checks every hint of the migrations).
  const code = hint && /^[a-z][a-z0-9_]*$/.test(hint) ? (hint as ErrorCode) : defaultCode(status);
  return new HttpError(status, code, message, detailsOf(detail));
}

/** The details a SQL refusal carries in its DETAIL: a JSON object, else none. */
function detailsOf(detail: string | null | undefined): Record<string, unknown> | null {
  if (!detail || !detail.startsWith('{')) return null;
  try {
    const value: unknown = JSON.parse(detail);
    return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/** Turns anything thrown while serving a request into an HttpError. */
export function toHttpError(err: unknown): HttpError {
  if (err instanceof HttpError) return err;
  if (isPgError(err)) {
    const refusal = sqlRefusal(err.code, err.hint, err.message, err.detail);
    if (refusal) return refusal;
    // Backstops: any other data exception (class 22) is the input's fault; a
    // lost connection (08), a server shutting down or starting (57P) or out
    // of resources (53) is temporary.
    const status =
      SQLSTATE_STATUS[err.code] ??
      (err.code.startsWith('22') ? 400 : /^(08|57P|53)/.test(err.code) ? 503 : undefined);
    if (status === 503) return unavailable(SAFE_MESSAGES[503]!);
    if (status !== undefined) {
      // Built-in messages can quote SQL or constraint names: say it plainly.
      return new HttpError(status, defaultCode(status), SAFE_MESSAGES[status] ?? 'request failed');
    }
  }
  if (isDiskFull(err)) return storageFull();
  if ((err as { code?: unknown } | null)?.code === 'OUTCOME_UNKNOWN') return outcomeUnknown();
  if ((err as { code?: unknown } | null)?.code === 'NOT_PRIMARY') return unavailable('the database is switching to another primary; nothing was saved, try again');
  if (isConnectionError(err)) return unavailable('the database is not reachable');
  return new HttpError(500, 'internal_error', 'internal server error');
}

/** A write the file system refused for want of space (ENOSPC) or of quota (EDQUOT): the storage volume is full. */
export function isDiskFull(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === 'ENOSPC' || code === 'EDQUOT';
}

/** 507 storage_full: the storage volume has no room for the file (STORAGE_DIR's file system; docs/operations/backup.md#disk-full). */
export function storageFull(): HttpError {
  return new HttpError(507, 'storage_full', 'the storage volume is full: the file was not stored; try again later');
}

/** 503 service_unavailable with a Retry-After (details.retry_after, as the 429 answers carry it). */
export function unavailable(message: string): HttpError {
  return new HttpError(503, 'service_unavailable', message, { retry_after: RETRY_UNAVAILABLE_SECONDS });
}

/**
 * 504 outcome_unknown: the request's COMMIT was sent and its answer never
 * came (core/database/pool.ts OutcomeUnknownError); the change may have been saved.
 */
export function outcomeUnknown(): HttpError {
  return new HttpError(
    504,
    'outcome_unknown',
    'the database stopped answering after this request was sent: it may or may not have been saved; retry with the same Idempotency-Key (or read to check)',
  );
}

/**
 * This service's codes as Supabase Auth names the same failure (its
 * `error_code`s); a code not listed keeps its name. A route may name the
 * exact Supabase code in the error's details (`error_code`).
 */
const SUPABASE_AUTH_CODES: Partial<Record<ErrorCode, string>> = {
  unauthorized: 'no_authorization',
  invalid_token: 'bad_jwt',
  session_ended: 'session_not_found',
  rate_limited: 'over_request_rate_limit',
  validation_error: 'validation_failed',
  bad_request: 'validation_failed',
  invalid_json: 'bad_json',
  invalid_email: 'email_address_invalid',
  email_taken: 'email_exists',
  invalid_refresh_token: 'refresh_token_not_found',
  service_unavailable: 'request_timeout',
  statement_timeout: 'request_timeout',
  internal_error: 'unexpected_failure',
};

/**
 * Supabase Auth's status for a failure: a credential that is there but not
 * valid is 403 `bad_jwt`, an ended session 403 `session_not_found`
 * (internal/api/auth.go); a missing one stays 401 `no_authorization`.
 */
function supabaseAuthRestated(err: HttpError): HttpError {
  if (isInvalidEmail(err)) return new HttpError(400, 'invalid_email', GOTRUE_INVALID_EMAIL, { error_code: 'validation_failed' });
  if (err.status !== 401) return err;
  if (err.code === 'session_ended') return new HttpError(403, err.code, 'Session from session_id claim in JWT does not exist', { error_code: 'session_not_found' });
  if (err.code === 'invalid_token' || err.nuance === 'bad_credential') {
    return new HttpError(403, err.code, `invalid JWT: unable to parse or verify signature, ${err.message}`, { error_code: 'bad_jwt' });
  }
  return err;
}

/** Supabase Auth's words for an e-mail address it cannot take (its validateEmail), always 400 `validation_failed`. */
export const GOTRUE_INVALID_EMAIL = 'Unable to validate email address: invalid format';

/** An address refused by a request's validation (the field `email` of a body or query) or by SQL (invalid_email). */
function isInvalidEmail(err: HttpError): boolean {
  if (err.code === 'invalid_email') return true;
  if (err.status !== 400 && err.status !== 422) return false;
  const issues = err.details?.issues;
  return Array.isArray(issues) && issues.length > 0 && (issues[0] as { path?: unknown }).path === 'body.email';
}

/** Supabase Auth's error body: the status in `code`, `error_code`, `msg` (and `weak_password.reasons` for a weak password). */
function supabaseAuthBody(err: HttpError): Record<string, unknown> {
  const named = err.details?.error_code;
  const errorCode = typeof named === 'string' ? named : (SUPABASE_AUTH_CODES[err.code] ?? err.code);
  const body: Record<string, unknown> = { code: err.status, error_code: errorCode, msg: err.message };
  if (errorCode === 'weak_password') body.weak_password = { reasons: ['length'] };
  return body;
}

/**
* Supabase Storage's `error` for a status, when the code has none of its own
 * (ERROR_CODES[code].storage).
 */
const STORAGE_ERRORS: Record<number, string> = {
  400: 'InvalidRequest',
  401: 'InvalidJWT',
  403: 'Unauthorized',
  404: 'not_found',
  409: 'Duplicate',
  413: 'Payload too large',
  415: 'invalid_mime_type',
  416: 'InvalidRange',
  422: 'InvalidRequest',
  429: 'too_many_requests',
  500: 'InternalError',
  503: 'DatabaseError',
  504: 'DatabaseTimeout',
  507: 'InsufficientStorage',
};

/** The `error` of Supabase Storage's body for a code and status. */
export function storageErrorName(code: ErrorCode, status: number): string {
  return (ERROR_CODES[code] as { storage?: string }).storage ?? STORAGE_ERRORS[status] ?? (status >= 500 ? 'InternalError' : 'InvalidRequest');
}

/** What a route's error body is built from and how the docs describe it. */
interface ErrorShapeSpec {
  /** The OpenAPI component (gateway/http/responses.ts SHAPE_SCHEMAS). */
  readonly component: string;
  /** The field that carries this service's code, which the document narrows per operation (none: the body has no code of ours). */
  readonly codeField: 'error' | 'code' | null;
  /** How docs/errors.md and the document introduce the codes of a status answered with this body (none for the default). */
  readonly note: string | null;
  /** The failure as the body's service answers it, when its status differs (the routes declare that status too). */
  readonly restate?: (err: HttpError) => HttpError;
  readonly body: (err: HttpError) => Record<string, unknown>;
}

/**
 * The error bodies, by name (docs/api/conventions.md#errors): a route group names one
 * (RouteDefinition.errorShape) and every error of its routes, the pipeline's
 * included, is answered with it. `default` is this service's Error body;
 * `simple` and `flagged` are the bodies of older interfaces (per status);
 * `supabase_storage` and `supabase_auth` are Supabase's own, for the routes of
 * /storage/v1 and /auth/v1 that the Supabase SDKs call.
 */
export const ERROR_SHAPES = {
  default: {
    component: 'Error',
    codeField: 'error',
    note: null,
    body: (err) => ({ error: err.code, message: err.message, details: err.details }),
  },
  simple: { component: 'SimpleError', codeField: null, note: 'Simple body: message only', body: (err) => ({ error: err.message }) },
  flagged: {
    component: 'FlaggedError',
    codeField: null,
    note: 'Flagged body: message only',
    body: (err) => ({ success: false, error: err.message }),
  },
  supabase_storage: {
    component: 'StorageError',
    codeField: 'code',
    note: "Supabase Storage's body: the code in `code`",
    body: (err) => ({ statusCode: String(err.status), error: storageErrorName(err.code, err.status), code: err.code, message: err.message }),
  },
  supabase_auth: {
    component: 'SupabaseAuthError',
    codeField: null,
    note: "Supabase Auth's body: its own name of the code in `error_code`",
    body: supabaseAuthBody,
    restate: supabaseAuthRestated,
  },
} as const satisfies Record<string, ErrorShapeSpec>;

export type ErrorShape = keyof typeof ERROR_SHAPES;

/** The error body of a shape. */
export function errorBody(shape: ErrorShape, err: HttpError): Record<string, unknown> {
  return ERROR_SHAPES[shape].body(err);
}

/** The failure as a shape's service answers it (its status may differ: Supabase Auth's 403 for a bad token). */
export function restatedFor(shape: ErrorShape, err: HttpError): HttpError {
  const spec: ErrorShapeSpec = ERROR_SHAPES[shape];
  return spec.restate ? spec.restate(err) : err;
}

/** SQLSTATEs worth retrying the whole transaction for. */
export function isRetryable(err: unknown): boolean {
  return isPgError(err) && (err.code === '40001' || err.code === '40P01');
}
