// The documentation resolves inside the repository: every Markdown link and
// every backticked repository path in README.md, docs/*.md and
// mcp-server/README.md names a file that exists (a link's #section too); every
// `docs/<file>.md#section` a code comment cites exists; and no file refers to
// documents that live outside the repository.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../support/processes.ts';

/**
 * Documents another change generates (the error register): links to them are
 * allowed before they land. Remove an entry once its file exists (a test
 * below says so).
 */
const PENDING = new Set(['docs/errors.md']);

/** Files that may keep outside references: committed migrations are never edited. */
const FROZEN = [/^sql\/migrations\/committed\//, /^sql\/schema\.sql$/, /^supabase\/migrations\//];

/** Names of documents outside the repository (built here so this file does not name them itself). */
const OUTSIDE = [['..', 'shared'].join('/'), ['DESIGN', 'md'].join('.'), ['interface', 'md'].join('.')];

/** Top-level folders whose paths the docs mention in backticks. */
const REPO_DIRS = ['gateway', 'mcp-server', 'sql', 'supabase', 'test', 'docs', '.ci'];

/** The repository's files (tracked, or new and not ignored), relative, with forward slashes. */
function repositoryFiles(): string[] {
  const git = spawnSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: projectRoot, encoding: 'utf8' });
  if (git.status === 0) return git.stdout.split('\0').filter((f) => f && fs.existsSync(path.join(projectRoot, f)));
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const entry of fs.readdirSync(path.join(projectRoot, dir), { withFileTypes: true })) {
      if (['node_modules', '.git', '.data', 'dist', 'coverage'].includes(entry.name)) continue;
      const rel = dir ? `${dir}/${entry.name}` : entry.name;
      if (entry.isDirectory()) walk(rel);
      else out.push(rel);
    }
  };
  walk('');
  return out;
}

const files = repositoryFiles();
const docs = files.filter((f) => f === 'README.md' || f === 'mcp-server/README.md' || /^docs\/[^/]+\.md$/.test(f));
const read = (file: string) => fs.readFileSync(path.join(projectRoot, file), 'utf8');
const exists = (file: string) => fs.existsSync(path.join(projectRoot, file));

/** Markdown without its fenced code blocks (their text is code, not links). */
function prose(markdown: string): string {
  return markdown.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '');
}

/** The anchors of a Markdown file's headings, as GitHub makes them. */
function anchors(file: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const [, text] of prose(read(file)).matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const plain = text!.replace(/\[([^\]]*)\]\([^)]*\)/g, '$1');
    const slug = plain.toLowerCase().replace(/[^\p{L}\p{N}\p{M}\s_-]/gu, '').replace(/\s/g, '-');
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    out.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return out;
}

/** What is wrong with a reference to `target` (a repository path, maybe with #section), or null. */
function problem(target: string): string | null {
  const [file, section] = target.split('#') as [string, string | undefined];
  if (PENDING.has(file)) return null;
  if (!exists(file)) return 'no such file';
  if (section !== undefined && file.endsWith('.md') && !anchors(file).has(section)) return `no section #${section}`;
  return null;
}

/** A glob of the docs (`supabase/tests/*.sql`): its folder exists (it may hold no match, as current/ on main). */
function globFolderExists(glob: string): boolean {
  return exists(glob.slice(0, glob.indexOf('*')).replace(/[^/]*$/, ''));
}

describe('the documentation', () => {
  it('is there: README.md, docs/*.md, mcp-server/README.md', () => {
    expect(docs).toContain('README.md');
    expect(docs).toContain('mcp-server/README.md');
    expect(docs.filter((f) => f.startsWith('docs/')).length).toBeGreaterThan(3);
  });

  it('links only to files and sections that exist', () => {
    const broken: string[] = [];
    for (const doc of docs) {
      for (const [, raw] of prose(read(doc)).matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
        const link = raw!;
        if (/^[a-z][a-z0-9+.-]*:/i.test(link)) continue; // http:, https:, mailto:
        const [rel, section] = link.split('#') as [string, string | undefined];
        const target = rel === '' ? doc : path.posix.normalize(path.posix.join(path.posix.dirname(doc), rel));
        const why = target.startsWith('..') ? 'outside the repository' : problem(section === undefined ? target : `${target}#${section}`);
        if (why) broken.push(`${doc}: (${link}): ${why}`);
      }
    }
    expect(broken).toEqual([]);
  });

  it('names only repository paths that exist (in backticks)', () => {
    const missing: string[] = [];
    const repoPath = new RegExp(`^(${REPO_DIRS.map((d) => d.replace('.', '\\.')).join('|')})/`);
    for (const doc of docs) {
      for (const [, code] of prose(read(doc)).matchAll(/`([^`\n]+)`/g)) {
        const candidate = code!.replace(/[.,:;]$/, '');
        if (!repoPath.test(candidate) || /\s/.test(candidate)) continue;
        if (/[<>{}…]|NNN/.test(candidate)) continue; // a placeholder: `sql/migrations/current/NNN-area.sql`
        const ok = candidate.includes('*') ? globFolderExists(candidate) : problem(candidate.replace(/\/$/, '')) === null;
        if (!ok) missing.push(`${doc}: \`${code}\``);
      }
    }
    expect(missing).toEqual([]);
  });

  it('is cited by code comments with sections that exist (docs/<file>.md#section)', () => {
    const broken: string[] = [];
    for (const file of files.filter((f) => !FROZEN.some((p) => p.test(f)) && /\.(ts|sql|toml|md|json|js)$|^\.ci\//.test(f))) {
      if (docs.includes(file)) continue; // Markdown links are checked above
      for (const match of read(file).matchAll(/(?<![\w/.-])(docs\/[\w.-]+\.md)(#[\w-]+)?/g)) {
        const why = problem(`${match[1]}${match[2] ?? ''}`);
        if (why) broken.push(`${file}: ${match[0]}: ${why}`);
      }
    }
    expect(broken).toEqual([]);
  });

  it('refers to no document outside the repository', () => {
    const found: string[] = [];
    for (const file of files.filter((f) => !FROZEN.some((p) => p.test(f)))) {
      const text = read(file);
      for (const name of OUTSIDE) if (text.includes(name)) found.push(`${file}: ${name}`);
    }
    expect(found).toEqual([]);
  });

  it('lists as pending only documents that have not landed yet', () => {
    expect([...PENDING].filter(exists), 'these exist now: remove them from PENDING').toEqual([]);
  });
});
