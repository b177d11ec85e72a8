/**
 * Validating the `:namespace` and `:name` path parameters of pod subresource routes, as the apiserver
 * does (apimachinery `validation.IsDNS1123Label` / `IsDNS1123Subdomain`). Parameters arrive
 * percent-decoded, so an encoded slash or `..` fails here instead of reaching the upstream.
 */
import { InvalidNameError } from '../errors.js';

/** DNS-1123 label: at most 63 characters. */
export const DNS1123_LABEL_MAX_LENGTH = 63;
/** DNS-1123 subdomain: at most 253 characters. */
export const DNS1123_SUBDOMAIN_MAX_LENGTH = 253;

const LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** Throw InvalidNameError unless `value` is a namespace name (a DNS-1123 label). */
export function validateNamespace(value: string): void {
  if (value.length > DNS1123_LABEL_MAX_LENGTH) throw new InvalidNameError('namespace', value, `must be no more than ${DNS1123_LABEL_MAX_LENGTH} characters`);
  if (!LABEL.test(value)) {
    throw new InvalidNameError('namespace', value, "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character");
  }
}

/** Throw InvalidNameError unless `value` is a pod name (a DNS-1123 subdomain). */
export function validatePodName(value: string): void {
  if (value.length > DNS1123_SUBDOMAIN_MAX_LENGTH) throw new InvalidNameError('name', value, `must be no more than ${DNS1123_SUBDOMAIN_MAX_LENGTH} characters`);
  if (!SUBDOMAIN.test(value)) {
    throw new InvalidNameError('name', value, "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character");
  }
}
