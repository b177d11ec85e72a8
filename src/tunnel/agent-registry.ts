/**
 * The agents connected to this proxy replica, per cluster name. An entry is one HTTP/2 session
 * (one agent's tunnel), added once it is proven: the agent's HTTP/2 SETTINGS arrived (the listener
 * adds it then; an agent that got its 101 and never speaks HTTP/2 is never routable). It leaves the
 * registry when the session closes for any reason (the agent went away, GOAWAY), and at once when
 * its PING goes unanswered ({@link AgentRegistry.retire}), before the session has finished closing.
 *
 * Several tunnels for one cluster (agent replicas, an agent's new tunnel before its old one has
 * died) are all kept. New streams go to the newest tunnel that has been up for
 * {@link TUNNEL_SETTLE_MS}, else to the newest: a replica that reconnects over and over (a flapping
 * one) never gets the streams while a settled tunnel exists, and an agent's fresh tunnel takes over
 * from its old one within that time. A stream that fails on its tunnel before the agent answered is
 * opened once more on another ({@link AgentRegistry.pick}'s `exclude`; tunnel-route.ts).
 */
import type { ClientHttp2Session } from 'node:http2';
import type { Duplex } from 'node:stream';
import type { TunnelMetrics } from '../metrics.js';

/** One connected agent. */
export interface AgentTunnel {
  cluster: string;
  session: ClientHttp2Session;
  /** The agent's address, for logs. */
  remoteAddress: string | undefined;
  /** The `Host` the agent's apiserver expects (sent by the agent at connect). */
  upstreamHost: string;
  connectedAt: number;
  /** When the tunnel became routable (its SETTINGS arrived); set by {@link AgentRegistry.add}. */
  routableAt?: number;
  /**
   * The connection the session runs on, destroyed with the session when a close outlasts its
   * grace: Node's session close ends the socket and waits for that end() to call back before it
   * emits 'close', which was seen never to happen (the demo's SIGTERM right after a request through
   * the tunnel), leaving `closeAll` and the proxy's shutdown hanging.
   */
  socket?: Duplex;
}

/**
 * How long a tunnel must have been routable before it is preferred over younger ones: far above a
 * flapping replica's lifetime (the review saw 3,271 reconnects in 20 s), well below the time a
 * dead tunnel lingers (the PING timeout).
 */
export const TUNNEL_SETTLE_MS = 1_000;

/** Connected agents by cluster. */
export class AgentRegistry {
  readonly #byCluster = new Map<string, AgentTunnel[]>();
  readonly #metrics: TunnelMetrics | undefined;
  readonly #waiters = new Map<string, ((t: AgentTunnel) => void)[]>();

  constructor(metrics?: TunnelMetrics) {
    this.#metrics = metrics;
  }

  /** Register `tunnel` (proven: its SETTINGS arrived) until its session closes or it is retired. */
  add(tunnel: AgentTunnel): void {
    tunnel.routableAt ??= Date.now();
    // A session that received GOAWAY takes no new streams: out of the registry now.
    tunnel.session.once('goaway', () => this.retire(tunnel));
    const list = this.#byCluster.get(tunnel.cluster) ?? [];
    list.push(tunnel);
    this.#byCluster.set(tunnel.cluster, list);
    this.#metrics?.setTunnelAgents(tunnel.cluster, list.length);
    tunnel.session.once('close', () => this.#remove(tunnel));
    const waiters = this.#waiters.get(tunnel.cluster) ?? [];
    this.#waiters.delete(tunnel.cluster);
    for (const w of waiters) w(tunnel);
  }

  /** The next tunnel registered for `cluster` (tests, start-up checks). */
  nextTunnel(cluster: string): Promise<AgentTunnel> {
    return new Promise((resolve) => {
      const list = this.#waiters.get(cluster) ?? [];
      list.push(resolve);
      this.#waiters.set(cluster, list);
    });
  }

  /**
   * Send GOAWAY on every tunnel (start of a graceful shutdown): streams in flight run on, new
   * requests for these clusters are refused here (503), and agents open a new tunnel at once — to
   * another replica behind the same address when there is one.
   */
  goAway(): void {
    for (const t of [...this.#byCluster.values()].flat()) if (!t.session.closed) t.session.close();
  }

  /**
   * Take `tunnel` out of the registry now (its PING went unanswered, or it received GOAWAY): no
   * new stream goes to it, while its session is still being closed.
   */
  retire(tunnel: AgentTunnel): void {
    this.#remove(tunnel);
  }

  #remove(tunnel: AgentTunnel): void {
    const list = this.#byCluster.get(tunnel.cluster);
    if (!list) return;
    const rest = list.filter((t) => t !== tunnel);
    if (rest.length === list.length) return;
    if (rest.length > 0) this.#byCluster.set(tunnel.cluster, rest);
    else this.#byCluster.delete(tunnel.cluster);
    this.#metrics?.setTunnelAgents(tunnel.cluster, rest.length);
  }

  /**
   * The tunnel a new stream for `cluster` uses: the newest open one that has been routable for
   * {@link TUNNEL_SETTLE_MS}, else the newest open one; never `exclude` (the tunnel a first attempt
   * failed on). Undefined when there is none.
   */
  pick(cluster: string, exclude?: AgentTunnel, now = Date.now()): AgentTunnel | undefined {
    const list = this.#byCluster.get(cluster) ?? [];
    let newest: AgentTunnel | undefined;
    for (let i = list.length - 1; i >= 0; i--) {
      const t = list[i]!;
      if (t === exclude || t.session.closed || t.session.destroyed) continue;
      if (now - (t.routableAt ?? now) >= TUNNEL_SETTLE_MS) return t;
      newest ??= t;
    }
    return newest;
  }

  /** Cluster names with at least one agent. */
  clusters(): string[] {
    return [...this.#byCluster.keys()];
  }

  /**
   * Send GOAWAY on every tunnel (agents reconnect, to another replica if there is one; streams in
   * flight may finish), then destroy what is still open after `graceMs`.
   */
  async closeAll(graceMs: number): Promise<void> {
    const tunnels = [...this.#byCluster.values()].flat();
    await Promise.all(
      tunnels.map(
        ({ session: s, socket }) =>
          new Promise<void>((resolve) => {
            if (s.destroyed) return resolve();
            const timer = setTimeout(() => {
              s.destroy();
              socket?.destroy();
            }, graceMs);
            timer.unref();
            s.once('close', () => {
              clearTimeout(timer);
              resolve();
            });
            s.close();
          }),
      ),
    );
  }
}
