/**
 * Feature gates with their Kubernetes names, parsed from kube-apiserver's `--feature-gates` syntax
 * (`A=true,B=false`, values as Go's `strconv.ParseBool` reads them).
 */
import { ConfigError } from './errors.js';

/**
 * Known gates and their defaults. Both default to true because they are beta and on by default in
 * kube-apiserver from 1.30 (`TranslateStreamCloseWebsocketRequests`) and 1.31 (`PortForwardWebsockets`),
 * which is the behaviour kubectl ≥ 1.30 expects from a server.
 */
export const FEATURE_GATE_DEFAULTS = {
  /** WebSocket `v5.channel.k8s.io` exec/attach is translated to SPDY upstream. */
  TranslateStreamCloseWebsocketRequests: true,
  /** WebSocket `SPDY/3.1+portforward.k8s.io` port-forward is tunnelled to SPDY upstream. */
  PortForwardWebsockets: true,
} as const;

/** A known gate's name. */
export type FeatureGateName = keyof typeof FEATURE_GATE_DEFAULTS;

/** The value of every known gate. */
export type FeatureGates = Readonly<Record<FeatureGateName, boolean>>;

const TRUE_VALUES = new Set(['1', 't', 'T', 'TRUE', 'true', 'True']);
const FALSE_VALUES = new Set(['0', 'f', 'F', 'FALSE', 'false', 'False']);

function isKnown(name: string): name is FeatureGateName {
  return Object.prototype.hasOwnProperty.call(FEATURE_GATE_DEFAULTS, name);
}

/**
 * Parse `--feature-gates`. An empty or absent value gives the defaults. Throws ConfigError with
 * component-base's wording (`unrecognized feature gate: X`, `missing bool value for X`,
 * `invalid value of X=Y`).
 */
export function parseFeatureGates(spec: string | undefined): FeatureGates {
  const gates: Record<FeatureGateName, boolean> = { ...FEATURE_GATE_DEFAULTS };
  if (spec === undefined) return gates;
  for (const raw of spec.split(',')) {
    const entry = raw.trim();
    if (entry === '') continue;
    const eq = entry.indexOf('=');
    const name = (eq < 0 ? entry : entry.slice(0, eq)).trim();
    if (!isKnown(name)) {
      throw new ConfigError(
        `--feature-gates: unrecognized feature gate: ${name} (known: ${Object.keys(FEATURE_GATE_DEFAULTS).join(', ')})`,
      );
    }
    if (eq < 0) throw new ConfigError(`--feature-gates: missing bool value for ${name}`);
    const value = entry.slice(eq + 1).trim();
    if (TRUE_VALUES.has(value)) gates[name] = true;
    else if (FALSE_VALUES.has(value)) gates[name] = false;
    else throw new ConfigError(`--feature-gates: invalid value of ${name}=${value}, want true or false`);
  }
  return gates;
}
