/**
 * kube-apiserver's long-running request check (`BasicLongRunningRequestCheck` with the verbs `watch`
 * and `proxy` and the subresources `attach`, `exec`, `proxy`, `log`, `portforward`): the requests
 * `--request-timeout` never cuts, because they are meant to last (a watch, a stream, a log follow).
 * Pure: read off the request-target the way its RequestInfo reads it.
 */

/** Subresources that are long-running whatever the verb. */
const LONG_RUNNING_SUBRESOURCES: ReadonlySet<string> = new Set(['attach', 'exec', 'proxy', 'log', 'portforward']);

/** True for a request the request timeout must not apply to. */
export function isLongRunningRequest(url: string): boolean {
  const [path = '', query = ''] = url.split('?', 2);
  const watch = new URLSearchParams(query).get('watch');
  if (watch !== null && watch !== 'false' && watch !== '0') return true;
  const parts = path.split('/').filter((p) => p !== '');
  let rest: string[];
  if (parts[0] === 'api') rest = parts.slice(2);
  else if (parts[0] === 'apis') rest = parts.slice(3);
  else return false;
  // Legacy verbs as path prefixes: /api/v1/watch/…, /api/v1/proxy/…
  if (rest[0] === 'watch' || rest[0] === 'proxy') return true;
  // namespaces/NS/<resource>/<name>/<subresource>; a namespace's own subresources stay as they are.
  if (rest[0] === 'namespaces' && rest.length >= 3) rest = rest.slice(2);
  return rest.length >= 3 && LONG_RUNNING_SUBRESOURCES.has(rest[2]!);
}
