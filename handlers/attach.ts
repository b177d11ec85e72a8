/**
 * `pods/attach` (GET and POST). Today: upgrade passthrough. With `TranslateStreamCloseWebsocketRequests`
 * the WebSocket `v5.channel.k8s.io` translator will be tried first.
 */
import { podSubresourceRoutes } from './pod-subresource.js';

/** Fastify plugin for `/api/v1/namespaces/:namespace/pods/:name/attach`. */
export const attachRoutes = podSubresourceRoutes('attach');
