/**
 * Field-level validation errors as apimachinery's `field.Error` / `field.ErrorList` print them
 * (`k8s.io/apimachinery/pkg/util/validation/field/errors.go`): `<path>: <Type>[: <value>][: <detail>]`,
 * for example `jwt[0].issuer.url: Invalid value: "http://x": URL scheme must be https`. Paths are built
 * as `field.Path` builds them (`a.b[0].c`). Validation returns every error, not the first.
 */

/** apimachinery's `ErrorType`, by its printed name. */
export type FieldErrorType =
  | 'Required value'
  | 'Duplicate value'
  | 'Invalid value'
  | 'Unsupported value'
  | 'Forbidden'
  | 'Too many'
  | 'Internal error';

/** Types printed without their bad value (`ErrorBody`'s first cases). */
const VALUELESS: ReadonlySet<FieldErrorType> = new Set(['Required value', 'Forbidden', 'Internal error']);

/** A field path (`field.Path`): `jwt`, `jwt[0]`, `jwt[0].issuer.url`. */
export class FieldPath {
  readonly #text: string;

  private constructor(text: string) {
    this.#text = text;
  }

  /** A path starting at `name` (`field.NewPath`), with more names appended. */
  static of(name: string, ...more: string[]): FieldPath {
    return more.reduce((p, n) => p.child(n), new FieldPath(name));
  }

  /** This path followed by `.name` (several: `.a.b`). */
  child(name: string, ...more: string[]): FieldPath {
    const p = new FieldPath(`${this.#text}.${name}`);
    return more.length ? p.child(more[0]!, ...more.slice(1)) : p;
  }

  /** This path followed by `[i]`. */
  index(i: number): FieldPath {
    return new FieldPath(`${this.#text}[${i}]`);
  }

  toString(): string {
    return this.#text;
  }
}

/** How Go's `%q` / `%v` print a bad value (strings quoted, numbers and booleans plain). */
function printValue(value: unknown): string {
  if (value === null || value === undefined) return 'null';
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') return String(value);
  return JSON.stringify(value);
}

/** One field error. */
export class FieldError {
  constructor(
    readonly type: FieldErrorType,
    readonly field: string,
    readonly badValue: unknown,
    readonly detail: string,
    /** Print the type without a value even where apimachinery would print one (`omitValue`). */
    readonly omitValue = false,
  ) {}

  /** The message without the field name (`ErrorBody`). */
  body(): string {
    let s: string = this.type;
    if (!VALUELESS.has(this.type) && !this.omitValue) s += `: ${printValue(this.badValue)}`;
    if (this.detail !== '') s += `: ${this.detail}`;
    return s;
  }

  toString(): string {
    return `${this.field}: ${this.body()}`;
  }
}

/** `field.Required`. */
export function required(path: FieldPath, detail = ''): FieldError {
  return new FieldError('Required value', path.toString(), '', detail);
}

/** `field.Invalid`. */
export function invalid(path: FieldPath, value: unknown, detail: string): FieldError {
  return new FieldError('Invalid value', path.toString(), value, detail);
}

/** `field.Duplicate`. */
export function duplicate(path: FieldPath, value: unknown): FieldError {
  return new FieldError('Duplicate value', path.toString(), value, '');
}

/** `field.Forbidden`. */
export function forbidden(path: FieldPath, detail: string): FieldError {
  return new FieldError('Forbidden', path.toString(), '', detail);
}

/** `field.TooMany`. */
export function tooMany(path: FieldPath, actual: number, max: number): FieldError {
  return new FieldError('Too many', path.toString(), actual, `must have at most ${max} items`);
}

/** `field.InternalError`. */
export function internalError(path: FieldPath, message: string): FieldError {
  return new FieldError('Internal error', path.toString(), null, message);
}

/**
 * The list as `utilerrors.NewAggregate(list.ToAggregate())` prints it: one error alone, several as
 * `[a, b]`, duplicates dropped.
 */
export function aggregateMessage(errors: readonly FieldError[]): string {
  const seen = new Set<string>();
  const msgs: string[] = [];
  for (const e of errors) {
    const m = e.toString();
    if (!seen.has(m)) {
      seen.add(m);
      msgs.push(m);
    }
  }
  return msgs.length === 1 ? msgs[0]! : `[${msgs.join(', ')}]`;
}
