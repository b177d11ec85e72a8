/**
 * `pods/attach` (GET and POST). WebSocket `v5.channel.k8s.io` requests go to the StreamTranslatorProxy
 * while `TranslateStreamCloseWebsocketRequests` is on; everything else is the upgrade passthrough.
 */
import { streamTranslatorDelegate } from './translator-delegate.js';
import { podSubresourceRoutes } from './pod-subresource.js';

/** Fastify plugin for `/api/v1/namespaces/:namespace/pods/:name/attach`. */
export const attachRoutes = podSubresourceRoutes('attach', streamTranslatorDelegate('attach'));
