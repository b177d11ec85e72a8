/**
 * Wiring the aggregation layer into the server: the {@link Aggregator} fed by `--apiservice-config`
 * (every valid reload replaces the registrations; a rejected one is logged and the last good set
 * stays), its metrics on the server's registry, and its shutdown with the app.
 */
import type { FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';
import type { ProxyApiClient } from '../api-client.js';
import type { AuthnMode } from '../auth/request-auth.js';
import type { AggregationConfig } from '../config.js';
import { createAggregatorMetrics } from './aggregator-metrics.js';
import { Aggregator } from './aggregator.js';

/** What {@link startAggregator} needs of the server. */
export interface AggregatorWiring {
  authn: AuthnMode;
  registry: Registry;
  app: FastifyInstance;
  api?: Pick<ProxyApiClient, 'readService' | 'listEndpointSlices'>;
  /** Availability check intervals (tests shorten them). */
  recheckMs?: number;
  retryMs?: number;
}

/** Build the aggregator, load the registrations and follow the config file. */
export function startAggregator(config: AggregationConfig, w: AggregatorWiring): Aggregator {
  const log = w.app.log;
  const aggregator = new Aggregator({
    authn: w.authn,
    transport: { ...(config.proxyClient ? { proxyClient: config.proxyClient } : {}), presentToCallers: w.authn === 'impersonate' },
    metrics: createAggregatorMetrics(w.registry),
    log,
    ...(w.api ? { api: w.api } : {}),
    ...(w.recheckMs !== undefined ? { recheckMs: w.recheckMs } : {}),
    ...(w.retryMs !== undefined ? { retryMs: w.retryMs } : {}),
  });
  const file = config.apiServices;
  aggregator.setAPIServices(file.current);
  log.info({ apiservices: file.current.map((a) => a.metadata.name) }, 'APIServices registered');
  file.on('change', (set) => {
    aggregator.setAPIServices(set);
    log.info({ apiservices: set.map((a) => a.metadata.name) }, 'APIServices reloaded');
  });
  file.on('rejected', (error) => log.error({ err: error }, 'APIService config rejected; the last good set stays in force'));
  w.app.addHook('onClose', async () => {
    file.close();
    aggregator.close();
  });
  return aggregator;
}
