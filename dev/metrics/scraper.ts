/**
 * dev-metrics' scrape loop, metrics-server's scraper in small: every interval it lists the cluster's
 * nodes and pods, GETs each node's kubelet `/metrics/resource` through `nodes/proxy`, decodes the
 * points and hands the merged batch to the {@link MetricsStore}. The first scrape runs at start;
 * scrapes never overlap. A failed node contributes nothing to that round (its pods' series are
 * dropped, as metrics-server does); a failed listing keeps the previous lists. Emits `scrape`
 * after every round.
 */
import { EventEmitter } from 'node:events';
import type { ClusterClient } from './cluster-client.js';
import type { MetricsStore } from './metrics-store.js';
import type { ObjectRef } from './metrics-objects.js';
import { parsePrometheusText } from './prometheus-text.js';
import { decodeResourceBatch, mergeBatches, podKey, type ResourceBatch } from './resource-batch.js';

/** The slice of a listed object the scraper keeps. */
interface ListedObject {
  metadata?: { name?: string; namespace?: string; labels?: Record<string, string> };
  status?: { phase?: string };
}

/** The outcome of one round. */
export interface ScrapeResult {
  /** When the round started, ms since the epoch. */
  startedMs: number;
  /** One message per failed request; empty when everything answered. */
  errors: string[];
}

/** Periodic scraping of the cluster into a store. */
export class MetricsScraper extends EventEmitter {
  /** Running pods by `namespace/name`, from the last successful listing. */
  pods = new Map<string, ObjectRef>();
  /** Nodes by name, from the last successful listing. */
  nodes = new Map<string, ObjectRef>();
  /** The last round's outcome. */
  last: ScrapeResult | undefined;
  /** Rounds completed. */
  rounds = 0;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #stopped = false;

  constructor(
    private readonly client: ClusterClient,
    private readonly store: MetricsStore,
    readonly intervalMs: number,
  ) {
    super();
  }

  /** Scrape now, then every interval until {@link stop}. */
  start(): void {
    const tick = (): void => {
      if (this.#stopped) return;
      this.#running = this.scrapeOnce().then(() => {
        if (!this.#stopped) this.#timer = setTimeout(tick, this.intervalMs);
      });
    };
    tick();
  }

  /** Stop the loop; resolves once a running round has finished. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#running;
  }

  /** One round: list, scrape every node, store. Never rejects (errors land in {@link last}). */
  async scrapeOnce(): Promise<ScrapeResult> {
    const startedMs = Date.now();
    const errors: string[] = [];
    const [nodes, pods] = await Promise.all([
      this.client.getJson<{ items?: ListedObject[] }>('/api/v1/nodes').catch((e: unknown) => {
        errors.push(String((e as Error).message ?? e));
        return undefined;
      }),
      this.client.getJson<{ items?: ListedObject[] }>('/api/v1/pods').catch((e: unknown) => {
        errors.push(String((e as Error).message ?? e));
        return undefined;
      }),
    ]);
    if (nodes) this.nodes = new Map(refs(nodes.items).map((n) => [n.name, { name: n.name, labels: n.labels }]));
    if (pods) {
      const running = (pods.items ?? []).filter((p) => p.status?.phase === 'Running');
      this.pods = new Map(refs(running).map((p) => [podKey(p.namespace ?? '', p.name), p]));
    }
    const batches = await Promise.all(
      [...this.nodes.keys()].map(async (name): Promise<ResourceBatch | undefined> => {
        const path = `/api/v1/nodes/${encodeURIComponent(name)}/proxy/metrics/resource`;
        try {
          const scrapeTimeMs = Date.now();
          return decodeResourceBatch(parsePrometheusText(await this.client.getText(path, 'text/plain')), name, scrapeTimeMs);
        } catch (e) {
          errors.push(`node ${name}: ${(e as Error).message}`);
          return undefined;
        }
      }),
    );
    this.store.store(mergeBatches(batches.filter((b): b is ResourceBatch => b !== undefined)));
    this.last = { startedMs, errors };
    this.rounds++;
    this.emit('scrape', this.last);
    return this.last;
  }
}

function refs(items: ListedObject[] | undefined): ObjectRef[] {
  return (items ?? [])
    .filter((i) => typeof i.metadata?.name === 'string')
    .map((i) => ({ name: i.metadata!.name!, namespace: i.metadata!.namespace, labels: { ...(i.metadata!.labels ?? {}) } }));
}
