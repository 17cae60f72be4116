// JSON without silent loss of big integers, on the `lossless-json` library. `JSON.parse` turns
// an integer beyond 2^53 into the nearest double (1610521604143693812 → 1610521604143693800);
// the engine keeps such numbers exactly (64-bit integers), so a run's input shown, copied,
// formatted and sent back would change. Here such integers parse into a `LosslessNumber` that
// keeps its digits and serializes back as the same digits. Every other number parses exactly as
// `JSON.parse` would (a plain `number`), so the rest of the UI sees ordinary values.

import { LosslessNumber as LibLosslessNumber, isInteger, isLosslessNumber, isSafeNumber, parse, stringify } from 'lossless-json';

const RAW_JSON = (JSON as unknown as { rawJSON?: (text: string) => unknown }).rawJSON;

/** True when `JSON.stringify` can emit a raw number (`JSON.rawJSON`), e.g. inside Tauri's `invoke`. */
export const canStringifyRaw = typeof RAW_JSON === 'function';

/**
 * An integer too big for a double, kept as its digits: `lossless-json`'s number, which also
 * survives a plain `JSON.stringify` (Tauri's `invoke`) where the engine has `JSON.rawJSON`.
 */
export class LosslessNumber extends LibLosslessNumber {
  /** The digits as written. */
  get raw(): string {
    return this.value;
  }
  /** In a plain `JSON.stringify`: the exact digits where the engine supports `JSON.rawJSON`, else the rounded number. */
  toJSON(): unknown {
    return RAW_JSON ? RAW_JSON(this.value) : Number(this.value);
  }
}

/** Unsafe integers keep their digits; everything else is the `number` `JSON.parse` gives. */
function parseNumber(text: string): number | LosslessNumber {
  return isInteger(text) && !isSafeNumber(text) ? new LosslessNumber(text) : Number(text);
}

/**
 * A member given twice (`{"order_id":"A","order_id":"B"}`): the last one wins, as in
 * `JSON.parse` and the engine (serde_json), so every surface reads one body the same way
 * (handed case C12). `lossless-json` would throw here by default.
 */
const lastMemberWins = ({ newValue }: { newValue: unknown }) => newValue;

/**
 * Parse JSON text; integers beyond 2^53 become {@link LosslessNumber}. A member given twice
 * keeps its last value (as `JSON.parse` and the engine do). Throws `SyntaxError` like
 * `JSON.parse`.
 */
export function parseJson(text: string): unknown {
  // Fast path: no run of 16 digits anywhere, so no integer can be unsafe.
  if (!/\d{16}/.test(text)) return JSON.parse(text);
  try {
    return parse(text, null, { parseNumber, onDuplicateKey: lastMemberWins });
  } catch (e) {
    throw e instanceof SyntaxError ? e : new SyntaxError((e as Error).message);
  }
}

/**
 * `JSON.stringify` that writes {@link LosslessNumber}s (and bigints) as their exact digits.
 * Same arguments and answers otherwise.
 */
export function stringifyJson(value: unknown, indent?: number): string {
  if (!hasLosslessNumber(value)) return JSON.stringify(value, null, indent);
  return stringify(value, null, indent) as string;
}

/** Is there an integer in `v` that a double has already rounded (parsed without {@link parseJson})? */
export function hasRoundedInteger(v: unknown): boolean {
  if (typeof v === 'number') return Number.isInteger(v) && !Number.isSafeInteger(v);
  if (isLosslessNumber(v) || v === null || typeof v !== 'object') return false;
  return (Array.isArray(v) ? v : Object.values(v)).some(hasRoundedInteger);
}

/** Is there a lossless number (or a bigint) in `v`? */
export function hasLosslessNumber(v: unknown): boolean {
  if (isLosslessNumber(v) || typeof v === 'bigint') return true;
  if (v === null || typeof v !== 'object') return false;
  return (Array.isArray(v) ? v : Object.values(v)).some(hasLosslessNumber);
}
