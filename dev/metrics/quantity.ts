/**
 * Kubernetes `resource.Quantity` strings for the figures of the metrics API, in the canonical form
 * `Quantity.String()` writes (apimachinery `pkg/api/resource`): metrics-server makes CPU a
 * DecimalSI quantity at scale -9 (nanocores) and memory a BinarySI quantity in bytes. Pure.
 */

const DECIMAL_SUFFIXES = new Map<number, string>([
  [-9, 'n'],
  [-6, 'u'],
  [-3, 'm'],
  [0, ''],
  [3, 'k'],
  [6, 'M'],
  [9, 'G'],
  [12, 'T'],
  [15, 'P'],
  [18, 'E'],
]);

const BINARY_SUFFIXES = ['', 'Ki', 'Mi', 'Gi', 'Ti', 'Pi', 'Ei'];

function assertCount(value: number, what: string): void {
  if (!Number.isSafeInteger(value) || value < 0) throw new RangeError(`${what} must be a non-negative safe integer, got ${value}`);
}

/**
 * A DecimalSI quantity `value × 10^exponent` in canonical form: trailing zeros are taken into the
 * exponent, which is then lowered to a multiple of 3 (`1500000` at -9 is `1500u`, `5000000` is `5m`).
 */
export function formatDecimalSI(value: number, exponent: number): string {
  assertCount(value, 'a quantity');
  if (value === 0) return '0';
  let amount = value;
  let exp = exponent;
  while (amount % 10 === 0) {
    amount /= 10;
    exp++;
  }
  const mod = ((exp % 3) + 3) % 3;
  amount *= 10 ** mod;
  exp -= mod;
  const suffix = DECIMAL_SUFFIXES.get(exp);
  return suffix === undefined ? `${amount}e${exp}` : `${amount}${suffix}`;
}

/** CPU in nanocores, as metrics-server writes it (`329087452n`, `5m`, `0`). */
export function formatCpuNanocores(nanocores: number): string {
  return formatDecimalSI(nanocores, -9);
}

/**
 * Memory in bytes as a BinarySI quantity: the largest power of 1024 that divides it exactly
 * (`12345Ki`, `1Mi`, `1500`); below 1024 bytes Kubernetes switches to DecimalSI (`1k` for 1000).
 */
export function formatMemoryBytes(bytes: number): string {
  assertCount(bytes, 'a memory size');
  if (bytes < 1024) return formatDecimalSI(bytes, 0);
  let amount = bytes;
  let power = 0;
  while (amount % 1024 === 0 && power < BINARY_SUFFIXES.length - 1) {
    amount /= 1024;
    power++;
  }
  return `${amount}${BINARY_SUFFIXES[power]}`;
}
