// The map of the rules by area, sql/areas/areas.json: which area file states
// each object of the application schemas (an exact name wins over any
// pattern; otherwise exactly one area's patterns must match), and the area
// files on disk. Used by `npm run db -- areas` (areas.ts).
import fs from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { projectRoot } from '../core/process/config.ts';

export const AREAS_DIR = path.join(projectRoot(), 'sql', 'areas');
export const MAP_FILE = path.join(AREAS_DIR, 'areas.json');


const AreaSchema = z.object({
  name: z.string().regex(/^[a-z][a-z0-9-]*$/),
  title: z.string().min(1),
  /** The route modules of the area (gateway/routes/*.ts), or other code that calls its functions. */
  code: z.array(z.string()),
  /** Its pgTAP file(s) (supabase/tests/*.sql). */
  tests: z.array(z.string()),
  /** Names (`schema.name`, or a schema alone) and patterns (`*` for any characters). A name listed exactly wins over any pattern. */
  objects: z.array(z.string().min(1)),
});
const MapSchema = z.object({ $comment: z.array(z.string()).optional(), areas: z.array(AreaSchema).min(1) });

export type AreaDef = z.infer<typeof AreaSchema>;
export type AreaMap = z.infer<typeof MapSchema>;

export function loadAreaMap(file = MAP_FILE): AreaMap {
  const parsed = MapSchema.parse(JSON.parse(fs.readFileSync(file, 'utf8')));
  const names = parsed.areas.map((a) => a.name);
  const twice = names.filter((n, i) => names.indexOf(n) !== i);
  if (twice.length > 0) throw new Error(`${path.relative(projectRoot(), file)}: area ${twice.join(', ')} is listed twice`);
  return parsed;
}

const patternRegex = (pattern: string) => new RegExp(`^${pattern.split('*').map((p) => p.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('.*')}$`);

/** Places object names in areas: an exact entry wins; else exactly one area's patterns must match. */
export class Placement {
  private readonly exact = new Map<string, string[]>();
  private readonly patterns: { area: string; pattern: string; regex: RegExp }[] = [];
  private readonly cache = new Map<string, { area: string } | { problem: string }>();

  constructor(readonly map: AreaMap) {
    for (const area of map.areas) {
      for (const entry of area.objects) {
        if (entry.includes('*')) this.patterns.push({ area: area.name, pattern: entry, regex: patternRegex(entry) });
        else this.exact.set(entry, [...(this.exact.get(entry) ?? []), area.name]);
      }
    }
  }

  place(name: string): { area: string } | { problem: string } {
    const known = this.cache.get(name);
    if (known) return known;
    let result: { area: string } | { problem: string };
    const exact = this.exact.get(name);
    if (exact && exact.length === 1) result = { area: exact[0]! };
    else if (exact) result = { problem: `${name} is listed by several areas: ${exact.join(', ')}` };
    else {
      const matches = this.patterns.filter((p) => p.regex.test(name));
      const areas = [...new Set(matches.map((m) => m.area))];
      if (areas.length === 1) result = { area: areas[0]! };
      else if (areas.length === 0) result = { problem: `${name} is in no area: add it to an area of sql/areas/areas.json` };
      else {
        result = {
          problem: `${name} matches the patterns of several areas (${matches.map((m) => `${m.area}: ${m.pattern}`).join(', ')}): list it exactly in one`,
        };
      }
    }
    this.cache.set(name, result);
    return result;
  }

  areaOf(name: string): string | null {
    const placed = this.place(name);
    return 'area' in placed ? placed.area : null;
  }
}


export interface AreaFile {
  area: string;
  file: string;
  text: string;
}

export function readAreaFiles(dir = AREAS_DIR): AreaFile[] {
  if (!fs.existsSync(dir)) return [];
  return fs
    .readdirSync(dir)
    .filter((f) => f.endsWith('.sql'))
    .sort()
    .map((f) => ({ area: path.basename(f, '.sql'), file: path.join(dir, f), text: fs.readFileSync(path.join(dir, f), 'utf8') }));
}

/** A path as a person running the command reads it. */
export const shown = (file: string) => path.relative(process.cwd(), file) || file;
