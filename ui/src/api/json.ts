// JSON without silent loss of big integers. `JSON.parse` turns an integer beyond 2^53 into the
// nearest double (12345678901234567890 → 12345678901234567000); the engine keeps such numbers
// exactly (64-bit integers), so a run's input shown, edited and sent back would change. Here
// such integers parse into a `LosslessNumber` that keeps its digits, and serialize back as the
// same digits. Everything else parses exactly as `JSON.parse` would.

const RAW_JSON = (JSON as unknown as { rawJSON?: (text: string) => unknown }).rawJSON;

/** True when `JSON.stringify` can emit a raw number (`JSON.rawJSON`), e.g. inside Tauri's `invoke`. */
export const canStringifyRaw = typeof RAW_JSON === 'function';

/** An integer too big for a double, kept as its digits. */
export class LosslessNumber {
  readonly raw: string;
  constructor(raw: string) {
    this.raw = raw;
  }
  /** In a plain `JSON.stringify`: the exact digits where the engine supports `JSON.rawJSON`, else the rounded number. */
  toJSON(): unknown {
    return RAW_JSON ? RAW_JSON(this.raw) : Number(this.raw);
  }
  valueOf(): number {
    return Number(this.raw);
  }
  toString(): string {
    return this.raw;
  }
}

/** Does this integer literal lose digits as a double? */
function unsafeInteger(raw: string): boolean {
  return !Number.isSafeInteger(Number(raw));
}

/** Parse JSON text; integers beyond 2^53 become {@link LosslessNumber}. Throws `SyntaxError` like `JSON.parse`. */
export function parseJson(text: string): unknown {
  // Fast path: no run of 16 digits anywhere, so no integer can be unsafe.
  if (!/\d{16}/.test(text)) return JSON.parse(text);
  return new Parser(text).document();
}

class Parser {
  private i = 0;
  constructor(private readonly s: string) {}

  document(): unknown {
    const v = this.value();
    this.ws();
    if (this.i < this.s.length) this.fail('Unexpected non-whitespace character after JSON');
    return v;
  }

  private fail(msg: string): never {
    throw new SyntaxError(`${msg} at position ${this.i}`);
  }

  private ws() {
    const s = this.s;
    while (this.i < s.length) {
      const c = s.charCodeAt(this.i);
      if (c === 32 || c === 9 || c === 10 || c === 13) this.i++;
      else break;
    }
  }

  private value(): unknown {
    this.ws();
    const c = this.s[this.i];
    if (c === '{') return this.object();
    if (c === '[') return this.array();
    if (c === '"') return this.string();
    if (c === '-' || (c >= '0' && c <= '9')) return this.number();
    for (const [word, v] of [
      ['true', true],
      ['false', false],
      ['null', null],
    ] as const) {
      if (this.s.startsWith(word, this.i)) {
        this.i += word.length;
        return v;
      }
    }
    return this.fail(c === undefined ? 'Unexpected end of JSON input' : `Unexpected token '${c}'`);
  }

  private object(): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    this.i++;
    this.ws();
    if (this.s[this.i] === '}') {
      this.i++;
      return out;
    }
    for (;;) {
      this.ws();
      if (this.s[this.i] !== '"') this.fail('Expected a property name');
      const k = this.string();
      this.ws();
      if (this.s[this.i] !== ':') this.fail("Expected ':' after a property name");
      this.i++;
      // Like JSON.parse: a "__proto__" key is an own property, not the prototype.
      Object.defineProperty(out, k, { value: this.value(), enumerable: true, writable: true, configurable: true });
      this.ws();
      const c = this.s[this.i++];
      if (c === '}') return out;
      if (c !== ',') this.fail("Expected ',' or '}' after a property value");
    }
  }

  private array(): unknown[] {
    const out: unknown[] = [];
    this.i++;
    this.ws();
    if (this.s[this.i] === ']') {
      this.i++;
      return out;
    }
    for (;;) {
      out.push(this.value());
      this.ws();
      const c = this.s[this.i++];
      if (c === ']') return out;
      if (c !== ',') this.fail("Expected ',' or ']' after an array element");
    }
  }

  private string(): string {
    const start = this.i;
    this.i++;
    const s = this.s;
    while (this.i < s.length) {
      const c = s[this.i];
      if (c === '"') {
        this.i++;
        // The native parser decodes escapes and checks control characters.
        return JSON.parse(s.slice(start, this.i)) as string;
      }
      this.i += c === '\\' ? 2 : 1;
    }
    return this.fail('Unterminated string in JSON');
  }

  private number(): number | LosslessNumber {
    const m = /-?(?:0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/y;
    m.lastIndex = this.i;
    const r = m.exec(this.s);
    if (!r) this.fail('No number after minus sign in JSON');
    this.i += r[0].length;
    const raw = r[0];
    if (!r[1] && !r[2] && unsafeInteger(raw)) return new LosslessNumber(raw);
    return Number(raw);
  }
}

const MARK = '\u0000fluxo-lossless:';

/**
 * `JSON.stringify` that writes {@link LosslessNumber}s as their exact digits (with or without
 * `JSON.rawJSON`). Same arguments and answers otherwise.
 */
export function stringifyJson(value: unknown, indent?: number): string {
  let marked = false;
  const text = JSON.stringify(
    value,
    function (this: Record<string, unknown>, key: string, v: unknown) {
      const own = this[key];
      if (own instanceof LosslessNumber) {
        marked = true;
        return MARK + own.raw;
      }
      return v;
    },
    indent,
  );
  if (!marked || text === undefined) return text;
  // The mark starts with NUL, which JSON.stringify escapes as \u0000: it cannot occur in a real string.
  return text.replace(/"\\u0000fluxo-lossless:(-?\d+)"/g, '$1');
}

/** Is there an integer in `v` that a double has already rounded (parsed without {@link parseJson})? */
export function hasRoundedInteger(v: unknown): boolean {
  if (typeof v === 'number') return Number.isInteger(v) && !Number.isSafeInteger(v);
  if (v instanceof LosslessNumber || v === null || typeof v !== 'object') return false;
  return (Array.isArray(v) ? v : Object.values(v)).some(hasRoundedInteger);
}

/** Is there a {@link LosslessNumber} in `v`? */
export function hasLosslessNumber(v: unknown): boolean {
  if (v instanceof LosslessNumber) return true;
  if (v === null || typeof v !== 'object') return false;
  return (Array.isArray(v) ? v : Object.values(v)).some(hasLosslessNumber);
}
