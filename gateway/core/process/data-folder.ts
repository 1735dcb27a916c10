// DATA_DIR (and the folders made inside it) must be a writable folder. Node's
// recursive mkdir reports a read-only file system as ENOENT and a file in the
// way as EEXIST: say instead what is wrong and what to do, as one line.
import fs from 'node:fs';
import path from 'node:path';
import { ConfigError } from './config.ts';

/** Makes `dir` (and its parents); a ConfigError naming the cause when it cannot be made. */
export function makeDataFolder(dir: string, mode?: number): void {
  try {
    fs.mkdirSync(dir, { recursive: true, mode });
    if (!fs.statSync(dir).isDirectory()) throw Object.assign(new Error('not a folder'), { code: 'ENOTDIR' });
  } catch (err) {
    throw new ConfigError(`cannot use the data folder ${dir}: ${cause(dir, err)}; set DATA_DIR to a writable folder`);
  }
}

function cause(dir: string, err: unknown): string {
  let existing = dir;
  while (!fs.existsSync(existing) && path.dirname(existing) !== existing) existing = path.dirname(existing);
  if (!fs.statSync(existing).isDirectory()) return `${existing} is a file, not a folder`;
  try {
    fs.accessSync(existing, fs.constants.W_OK);
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EROFS' ? `${existing} is on a read-only file system` : `no permission to write in ${existing}`;
  }
  return (err as Error).message;
}
