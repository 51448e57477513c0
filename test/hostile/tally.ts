import type { Answer } from './http.js';

/**
 * What one principal's attack got back, counted by kind: each answer is classified by the case
 * (`created`, `refused: quota`…), and anything the case did not expect is kept (the first few
 * verbatim) so that a failing assertion shows what came instead.
 */
export class Tally {
  readonly counts: Record<string, number> = {};
  /** Answers no rule expected: how many, and the first ones as they came. */
  unexpected = 0;
  readonly samples: string[] = [];

  add(kind: string): void {
    this.counts[kind] = (this.counts[kind] ?? 0) + 1;
  }

  count(kind: string): number {
    return this.counts[kind] ?? 0;
  }

  /** Notes an answer (or a failure to get one) that no rule expected. */
  odd(what: string, answer: Answer | Error): void {
    this.unexpected++;
    if (this.samples.length >= 5) return;
    this.samples.push(
      answer instanceof Error
        ? `${what}: ${answer.message}`
        : `${what}: HTTP ${answer.status} ${answer.text.slice(0, 400)}`,
    );
  }

  /** All answers seen, expected or not. */
  get total(): number {
    return Object.values(this.counts).reduce((sum, n) => sum + n, 0) + this.unexpected;
  }

  /** The counts and the unexpected answers, for an assertion that shows them when it fails. */
  summary(): { counts: Record<string, number>; unexpected: number; samples: string[] } {
    return { counts: { ...this.counts }, unexpected: this.unexpected, samples: this.samples };
  }
}

/** Whether two JSON values are equal (key order aside). */
export function sameJson(a: unknown, b: unknown): boolean {
  return JSON.stringify(canonical(a)) === JSON.stringify(canonical(b));
}

function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(
      Object.keys(value)
        .sort()
        .map((key) => [key, canonical((value as Record<string, unknown>)[key])]),
    );
  }
  return value;
}
