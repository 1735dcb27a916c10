// The SQLSTATE a statement fails with, or 'ok': for asserting which rule
// refused a call (PT4xx codes pick the HTTP status).
export async function sqlState(statement: Promise<unknown>): Promise<string | undefined> {
  try {
    await statement;
    return 'ok';
  } catch (err) {
    return (err as { code?: string }).code;
  }
}
