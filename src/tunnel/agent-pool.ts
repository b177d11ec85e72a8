/**
 * Every proxy replica an agent keeps a tunnel to (issue 14 item 6): one {@link TunnelAgent} per
 * `--proxy-url` whose host is an IP address, and one per address of a URL whose host is a DNS name
 * (a headless Service resolves to every replica's pod IP). DNS names are re-resolved every
 * `--proxy-resolve-interval`: a tunnel is added for each new address and stopped (GOAWAY, streams in
 * flight finish) for each address that vanished. Each tunnel reconnects on its own with the jittered
 * backoff, so one replica going away never disturbs the tunnels to the others; any replica then
 * serves any cluster, with no store shared between replicas.
 *
 * A failed or empty resolution keeps the tunnels there are (a DNS hiccup must not cut a working
 * tunnel); a name with no tunnel yet is retried sooner, with the reconnect backoff, up to the interval.
 */
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { reconnectDelayMs } from './backoff.js';
import { TunnelAgent, type TunnelAgentOptions } from './agent.js';

/** Default of `--proxy-resolve-interval`. */
export const DEFAULT_PROXY_RESOLVE_INTERVAL_MS = 30_000;

/** Resolves a host name to its addresses (every A and AAAA record). */
export type ProxyResolver = (hostname: string) => Promise<string[]>;

/** The system resolver (`getaddrinfo`, as every other dial of the process): all addresses. */
export const systemResolver: ProxyResolver = async (hostname) => (await lookup(hostname, { all: true, verbatim: true })).map((a) => a.address);

/** Options of {@link AgentPool}: a tunnel's options without its proxy, plus the proxies. */
export interface AgentPoolOptions extends Omit<TunnelAgentOptions, 'proxyUrl' | 'dialAddress'> {
  /** The proxies' agent listeners (`--proxy-url`, repeatable). */
  proxyUrls: URL[];
  /** How often DNS names are re-resolved; default {@link DEFAULT_PROXY_RESOLVE_INTERVAL_MS}. */
  resolveIntervalMs?: number;
  /** Name resolution (tests inject one); default {@link systemResolver}. */
  resolver?: ProxyResolver;
  /** Called for every tunnel the pool creates (tests). */
  onTunnel?: (agent: TunnelAgent) => void;
}

/** The host of `url` without IPv6 brackets. */
function hostOf(url: URL): string {
  return url.hostname.replace(/^\[(.*)\]$/, '$1');
}

/** One tunnel per proxy replica, kept in step with `--proxy-url` and DNS. */
export class AgentPool {
  readonly #o: AgentPoolOptions;
  /** Tunnels by `url|address` (address empty for an IP-literal URL). */
  readonly #tunnels = new Map<string, TunnelAgent>();
  /** Tunnels being stopped (their address vanished), awaited by {@link stop}. */
  readonly #stopping = new Set<Promise<void>>();
  #stopped = false;
  #timer: NodeJS.Timeout | undefined;
  #chain: Promise<void> = Promise.resolve();
  #failures = 0;

  constructor(o: AgentPoolOptions) {
    this.#o = o;
    for (const url of o.proxyUrls) if (isIP(hostOf(url)) !== 0) this.#add(url, undefined);
    void this.resolveNow();
  }

  /** The tunnels running now (one per replica address). */
  get tunnels(): TunnelAgent[] {
    return [...this.#tunnels.values()];
  }

  /** How many tunnels are up now. */
  get connectedCount(): number {
    return this.tunnels.filter((t) => t.connected).length;
  }

  /**
   * Re-resolve every DNS-named proxy URL now and add/stop tunnels to match; resolves once done.
   * Runs one at a time, and re-arms the periodic timer.
   */
  resolveNow(): Promise<void> {
    this.#chain = this.#chain.then(() => this.#reconcile());
    return this.#chain;
  }

  async #reconcile(): Promise<void> {
    if (this.#stopped) return;
    clearTimeout(this.#timer);
    let starved = false;
    for (const url of this.#o.proxyUrls) {
      const name = hostOf(url);
      if (isIP(name) !== 0) continue;
      let addresses: string[];
      try {
        addresses = [...new Set(await (this.#o.resolver ?? systemResolver)(name))];
        if (addresses.length === 0) throw new Error('no addresses');
      } catch (e) {
        const have = this.#addressesOf(url).length;
        if (have === 0) starved = true;
        this.#o.log.warn({ proxy: url.origin, err: (e as Error).message, tunnels: have }, 'resolving the proxy failed; keeping the tunnels there are');
        continue;
      }
      if (this.#stopped) return;
      const current = this.#addressesOf(url);
      for (const a of addresses) if (!current.includes(a)) this.#add(url, a);
      for (const a of current) if (!addresses.includes(a)) this.#remove(url, a);
    }
    if (this.#stopped) return;
    const interval = this.#o.resolveIntervalMs ?? DEFAULT_PROXY_RESOLVE_INTERVAL_MS;
    this.#failures = starved ? this.#failures + 1 : 0;
    const delay = starved ? Math.min(interval, reconnectDelayMs(this.#failures - 1, (this.#o.random ?? Math.random)())) : interval;
    this.#timer = setTimeout(() => void this.resolveNow(), delay);
    this.#timer.unref();
  }

  #key(url: URL, address: string | undefined): string {
    return `${url.href}|${address ?? ''}`;
  }

  #addressesOf(url: URL): string[] {
    const prefix = `${url.href}|`;
    return [...this.#tunnels.keys()].filter((k) => k.startsWith(prefix) && k.length > prefix.length).map((k) => k.slice(prefix.length));
  }

  #add(url: URL, address: string | undefined): void {
    const { proxyUrls: _urls, resolveIntervalMs: _interval, resolver: _resolver, onTunnel, ...tunnel } = this.#o;
    const agent = new TunnelAgent({ ...tunnel, proxyUrl: url, ...(address !== undefined ? { dialAddress: address } : {}) });
    this.#tunnels.set(this.#key(url, address), agent);
    if (address !== undefined) this.#o.log.info({ proxy: agent.proxy }, 'proxy replica found: opening a tunnel to it');
    onTunnel?.(agent);
  }

  #remove(url: URL, address: string): void {
    const key = this.#key(url, address);
    const agent = this.#tunnels.get(key)!;
    this.#tunnels.delete(key);
    this.#o.log.info({ proxy: agent.proxy }, 'proxy replica gone from DNS: closing its tunnel');
    const stopping = agent.stop().finally(() => this.#stopping.delete(stopping));
    this.#stopping.add(stopping);
  }

  /** Stop every tunnel (GOAWAY; streams in flight may finish) and the re-resolution. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await Promise.all([...[...this.#tunnels.values()].map((t) => t.stop()), ...this.#stopping]);
    this.#tunnels.clear();
  }
}
