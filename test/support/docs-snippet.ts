// A JavaScript block of the docs, run as written: what the block leaves to
// the reader (its variables) first, then the block as it stands, then what
// the test wants printed, in a Node process of its own (this machine's Node:
// 20 and 24 on CI), from a git-ignored file under test/http/generated/, so
// that its imports resolve as an app's would.
import fs from 'node:fs';
import path from 'node:path';
import { projectRoot } from './processes.ts';

/** The `index`-th fenced js block after the heading `heading` of `doc` (docs/….md). */
export function jsBlockAfter(doc: string, heading: string, index = 0): string {
  const markdown = fs.readFileSync(path.join(projectRoot, 'docs', doc), 'utf8');
  const from = markdown.indexOf(heading);
  if (from === -1) throw new Error(`docs/${doc} has no ${heading}`);
  const blocks = [...markdown.slice(from).matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]!);
  if (!blocks[index]) throw new Error(`docs/${doc}: no js block ${index} after ${heading}`);
  return blocks[index];
}

/** Writes `lines` (the reader's part, the block, the test's part) as test/http/generated/<name>.mjs; its path. */
export function writeSnippet(name: string, source: string, lines: string[]): string {
  const file = path.join(projectRoot, 'test', 'http', 'generated', `${name}.mjs`);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, [`// Written by ${source} (git-ignored): a block of the docs, after what it leaves to the reader.`, ...lines].join('\n'));
  return file;
}
