// The formats HTTP answers are checked against.

/** A uuid as the interface writes it (lower case). */
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** A timestamp as the interface writes it: UTC, milliseconds. */
export const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/** A well-formed uuid that names nothing. */
export const UNKNOWN = '00000000-0000-4000-8000-000000000000';
