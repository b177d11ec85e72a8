/**
 * Feature gates with their Kubernetes names, parsed from kube-apiserver's `--feature-gates` syntax
 * (`A=true,B=false`, values as Go's `strconv.ParseBool` reads them).
 */
import { ConfigError } from './errors.js';

/**
 * Known gates and their defaults, all beta and on by default in kube-apiserver:
 * `TranslateStreamCloseWebsocketRequests` from 1.30, `PortForwardWebsockets` from 1.31,
 * `AuthorizePodWebsocketUpgradeCreatePermission` from 1.35 and `ExtendWebSocketsToKubelet` from 1.36
 * (KEP-4006; all four are planned to be locked on in 1.38). That is the behaviour kubectl ≥ 1.30
 * expects from a server.
 */
export const FEATURE_GATE_DEFAULTS = {
  /** WebSocket `v5.channel.k8s.io` exec/attach is translated to SPDY where the upstream cannot take it. */
  TranslateStreamCloseWebsocketRequests: true,
  /** WebSocket `SPDY/3.1+portforward.k8s.io` port-forward is tunnelled to SPDY where the upstream cannot take it. */
  PortForwardWebsockets: true,
  /**
   * A GET WebSocket upgrade to pods/exec, attach or portforward is authorized as `create`, as a SPDY
   * POST is (`--authn impersonate`); off: as `get`, as kube-apiserver < 1.35 did.
   */
  AuthorizePodWebsocketUpgradeCreatePermission: true,
  /**
   * `--upstream-mode kubelet`: v5 exec/attach and the port-forward tunnel are passed through to a
   * kubelet whose node lists `ExtendWebSocketsToKubelet` in `status.declaredFeatures`, which
   * translates itself; off: always translated here, as before 1.36.
   */
  ExtendWebSocketsToKubelet: true,
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
