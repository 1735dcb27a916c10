// Conditional requests (gateway/http/conditional.ts): If-None-Match compares
// weakly (a GET: 304), If-Match strongly (a write: 412 when it does not match).
import { describe, expect, it } from 'vitest';
import { entityTags, httpDate, ifMatch, noneMatch } from '../../gateway/http/conditional.ts';

describe('conditional requests', () => {
  it('reads the entity tags of If-None-Match, W/ dropped and * kept; none without the header', () => {
    expect(entityTags(undefined)).toBeNull();
    expect(entityTags('"a", W/"b" ,*')).toEqual(['"a"', '"b"', '*']);
    expect(entityTags('not a tag')).toEqual([]);
    expect(entityTags(Array.from({ length: 80 }, (_, i) => `"${i}"`).join(','))).toHaveLength(50);
  });

  it('If-None-Match matches weakly: the same tag, its weak form, or *', () => {
    expect(noneMatch(undefined, '"a"')).toBe(false);
    expect(noneMatch('"a"', '"a"')).toBe(true);
    expect(noneMatch('W/"a"', '"a"')).toBe(true);
    expect(noneMatch('"b", "a"', '"a"')).toBe(true);
    expect(noneMatch('*', '"a"')).toBe(true);
    expect(noneMatch('"b"', '"a"')).toBe(false);
  });

  it('If-Match matches strongly: the same tag or * when there is a representation; a weak tag never', () => {
    expect(ifMatch(undefined, '"a"')).toBe(true);
    expect(ifMatch(undefined, null)).toBe(true);
    expect(ifMatch('"a"', '"a"')).toBe(true);
    expect(ifMatch('"b", "a"', '"a"')).toBe(true);
    expect(ifMatch('W/"a"', '"a"')).toBe(false);
    expect(ifMatch('W/"a"', 'W/"a"')).toBe(false);
    expect(ifMatch('"b"', '"a"')).toBe(false);
    expect(ifMatch('*', '"a"')).toBe(true);
    expect(ifMatch('*', null)).toBe(false);
    expect(ifMatch('"a"', null)).toBe(false);
  });

  it('reads If-Modified-Since as a date, or nothing', () => {
    expect(httpDate(undefined)).toBeNull();
    expect(httpDate('not a date')).toBeNull();
    expect(httpDate('Tue, 01 Dec 2026 10:00:00 GMT')?.toISOString()).toBe('2026-12-01T10:00:00.000Z');
  });
});
