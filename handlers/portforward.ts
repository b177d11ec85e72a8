/**
 * `pods/portforward` (GET and POST). Today: upgrade passthrough. With `PortForwardWebsockets` the
 * `SPDY/3.1+portforward.k8s.io` tunnel will be tried first.
 */
import { podSubresourceRoutes } from './pod-subresource.js';

/** Fastify plugin for `/api/v1/namespaces/:namespace/pods/:name/portforward`. */
export const portforwardRoutes = podSubresourceRoutes('portforward');
